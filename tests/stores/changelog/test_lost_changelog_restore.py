"""A changelog that lost the records its checkpoint covers, against the real broker and RocksDB: the local
checkpoint dir holding exactly the checkpointed state restores the store and rebuilds the changelog; without
it, the restore refuses before touching anything."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from changelog_task import STORE, Task, contents, read_changelog, restore, write
from recreated_topics import delete_records_before, recreate_changelog

from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog.exceptions import ChangelogLostError
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.changelog.settings import ChangelogSettings
from samsa.stores.checkpoint_dirs import checkpoint_dir, list_checkpoint_dirs


@pytest.fixture
def changelog(topics: Callable[..., str]) -> str:
    """A changelog topic whose records can be deleted from the front (a compacted-only one refuses that)."""
    config = {**ChangelogSettings().topic_config(), "cleanup.policy": "compact,delete", "retention.ms": "-1"}
    return topics(1, config, name="changelog")


def test_a_recreated_changelog_is_rebuilt_from_the_local_checkpoint_dir(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, context: TaskStoresContext, changelog: str
) -> None:
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    factory = ChangelogBackendFactory(
        producer, lambda system: {"bootstrap.servers": kafka_bootstrap}, {STORE: ("kafka", changelog)}
    )
    try:
        task = Task(context, factory, producer)
        write(task.store, b"a-", range(300))
        task.store.delete(b"k0007")
        checkpoint_id, markers, committed = task.commit()
        task.crash()
    finally:
        factory.close()
        producer.close()
    recreate_changelog(kafka_admin, changelog)

    # A new producer: the idempotent one keeps the sequence numbers of the deleted topic's partition.
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    factory = ChangelogBackendFactory(
        producer, lambda system: {"bootstrap.servers": kafka_bootstrap}, {STORE: ("kafka", changelog)}
    )
    try:
        factory.check_restore(context, markers, checkpoint_id)  # the start's own check lets it through
        manager = restore(factory, context, markers, checkpoint_id)
    finally:
        factory.close()
        producer.close()

    actions = manager.actions[STORE]
    assert actions.seed and actions.reuse == checkpoint_dir(context.store_dirs[STORE], checkpoint_id)
    assert contents(context.store_dirs[STORE]) == committed
    assert read_changelog(kafka_bootstrap, changelog) == committed  # another host restores all of it


def test_records_deleted_from_the_front_are_rebuilt_and_the_uncommitted_ones_undone(
    kafka_bootstrap: str,
    factory: ChangelogBackendFactory,
    context: TaskStoresContext,
    producer: KafkaProducer,
    changelog: str,
) -> None:
    task = Task(context, factory, producer)
    write(task.store, b"a-", range(100))
    checkpoint_id, markers, committed = task.commit()
    offset = ChangelogMarker.decode(markers[STORE], STORE).offset
    assert offset is not None
    write(task.store, b"b-", range(90, 110))  # uncommitted: 10 changed, 10 new
    task.crash()
    delete_records_before(kafka_bootstrap, changelog, 0, offset + 5)  # the checkpoint's records are gone

    manager = restore(factory, context, markers, checkpoint_id)

    assert manager.actions[STORE].seed
    assert contents(context.store_dirs[STORE]) == committed
    assert read_changelog(kafka_bootstrap, changelog) == committed


def test_without_the_exact_local_dir_the_restore_is_refused_before_touching_anything(
    kafka_bootstrap: str,
    factory: ChangelogBackendFactory,
    context: TaskStoresContext,
    producer: KafkaProducer,
    changelog: str,
) -> None:
    task = Task(context, factory, producer)
    write(task.store, b"a-", range(50))
    checkpoint_id, markers, _ = task.commit()
    write(task.store, b"b-", range(50, 70))
    other_id, _, _ = task.commit()  # a later commit whose checkpoint record was never written
    task.crash()
    for cid, path in list_checkpoint_dirs(context.store_dirs[STORE]):
        if cid == checkpoint_id:
            path.rename(path.with_name(path.name + "-moved-away"))
    delete_records_before(kafka_bootstrap, changelog, 0, 60)
    dirs = sorted(p.name for p in context.store_dirs[STORE].parent.iterdir())

    with pytest.raises(ChangelogLostError) as check:
        factory.check_restore(context, markers, checkpoint_id)
    with pytest.raises(ChangelogLostError) as refused:
        restore(factory, context, markers, checkpoint_id)

    assert str(check.value) == str(refused.value)
    assert (refused.value.offset, refused.value.low) == (ChangelogMarker.decode(markers[STORE]).offset, 60)
    assert f"counts-{other_id} is not the dir of checkpoint {checkpoint_id}" in str(refused.value)
    assert sorted(p.name for p in context.store_dirs[STORE].parent.iterdir()) == dirs  # nothing deleted
