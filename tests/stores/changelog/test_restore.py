"""Transactional restore against the real broker and RocksDB: committed state back, later writes undone."""

from __future__ import annotations

import threading
import time

import pytest
from changelog_task import STORE, Task, contents, read_changelog, restore, write

from samsa.kafka import KafkaProducer
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog.exceptions import RestoreInterrupted
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.checkpoint_dirs import checkpoint_dir, list_checkpoint_dirs
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore


def test_restore_on_a_new_host_returns_the_committed_state_and_undoes_later_writes(
    factory: ChangelogBackendFactory,
    context: TaskStoresContext,
    producer: KafkaProducer,
    kafka_bootstrap: str,
    changelog: str,
) -> None:
    task = Task(context, factory, producer)
    write(task.store, b"v1-", range(100))
    for i in range(90, 100):
        task.store.delete(b"k%04d" % i)
    checkpoint_id, markers, committed = task.commit(local_dir=False)
    assert len(committed) == 90
    # Uncommitted: 10 changed, 5 deleted, 5 new keys, and a key deleted then re-added after the commit.
    write(task.store, b"v2-", range(10))
    for i in range(10, 15):
        task.store.delete(b"k%04d" % i)
    write(task.store, b"new-", range(200, 205))
    task.store.put(b"k0095", b"resurrected")
    task.crash()
    assert contents(task.dir) != committed  # the live dir holds the uncommitted writes

    manager = restore(factory, context, markers, checkpoint_id)

    assert contents(context.store_dirs[STORE]) == committed
    assert manager.trimmed[STORE] == 21
    assert read_changelog(kafka_bootstrap, changelog) == committed
    progress = context.progress[STORE]
    assert progress.done and progress.records == 100 + 10 + 21 == progress.total_records
    assert progress.bytes > 0


def test_restore_reuses_the_local_checkpoint_dir_and_replays_only_the_delta(
    factory: ChangelogBackendFactory,
    context: TaskStoresContext,
    producer: KafkaProducer,
    kafka_bootstrap: str,
    changelog: str,
) -> None:
    task = Task(context, factory, producer)
    write(task.store, b"a-", range(1000))
    first_id, _, _ = task.commit()
    write(task.store, b"b-", range(1000, 1030))
    second_id, markers, committed = task.commit(local_dir=False)  # its local dir never got written
    write(task.store, b"c-", range(2000, 2020))
    task.crash()

    manager = restore(factory, context, markers, second_id)

    actions = manager.actions[STORE]
    assert actions.reuse == checkpoint_dir(task.dir, first_id)
    assert context.progress[STORE].records == 30 + 20  # not the 1000 records behind the local dir
    assert contents(task.dir) == committed
    assert read_changelog(kafka_bootstrap, changelog) == committed
    assert [cid for cid, _ in list_checkpoint_dirs(task.dir)] == [first_id]  # kept for a crash before commit


def test_a_local_dir_ahead_of_the_checkpoint_is_deleted(
    factory: ChangelogBackendFactory, context: TaskStoresContext, producer: KafkaProducer
) -> None:
    task = Task(context, factory, producer)
    write(task.store, b"a-", range(50))
    first_id, markers, committed = task.commit()
    write(task.store, b"b-", range(50, 60))
    ahead_id, _, _ = task.commit()  # its checkpoint record was never written: the job resumes from first
    task.crash()

    manager = restore(factory, context, markers, first_id)

    assert manager.actions[STORE].reuse == checkpoint_dir(task.dir, first_id)
    assert not checkpoint_dir(task.dir, ahead_id).exists()
    assert contents(task.dir) == committed


def test_restore_without_checkpoint_keeps_the_whole_changelog(
    factory: ChangelogBackendFactory, context: TaskStoresContext, producer: KafkaProducer
) -> None:
    task = Task(context, factory, producer)
    write(task.store, b"a-", range(40))
    _, _, state = task.commit()
    task.crash()

    manager = restore(factory, context, None, None)

    assert manager.trimmed[STORE] == 0
    assert contents(task.dir) == state
    assert list_checkpoint_dirs(task.dir) == []


def test_in_memory_store_is_restored_in_place(
    factory: ChangelogBackendFactory,
    memory_context: TaskStoresContext,
    context: TaskStoresContext,
    producer: KafkaProducer,
    kafka_bootstrap: str,
    changelog: str,
) -> None:
    task = Task(context, factory, producer)  # writes the changelog as any store would
    write(task.store, b"a-", range(20))
    checkpoint_id, markers, committed = task.commit(local_dir=False)
    write(task.store, b"b-", range(5))
    task.crash()
    engine = InMemoryStore(STORE)
    engine.put(b"stale", b"from before")
    memory_context.engines[STORE] = engine

    restore(factory, memory_context, markers, checkpoint_id)

    assert memory_context.engines[STORE] is engine and dict(engine.all()) == committed
    assert read_changelog(kafka_bootstrap, changelog) == committed


def test_100k_record_restore_reports_progress(
    factory: ChangelogBackendFactory, context: TaskStoresContext, producer: KafkaProducer, changelog: str
) -> None:
    n = 100_000
    value = b"x" * 20
    for i in range(n):
        producer.send(changelog, value, b"key-%06d" % i, 0)
    producer.flush()
    manager = factory.restore_manager(context)
    manager.init(None, None)
    progress = context.progress[STORE]
    assert progress.total_records == n and progress.records == 0
    started = time.monotonic()
    try:
        manager.restore(threading.Event())
    finally:
        manager.close()
    elapsed = time.monotonic() - started
    assert progress.done and progress.records == n
    assert progress.bytes == n * (10 + 20)
    with RocksDbStore(context.store_dirs[STORE], name=STORE) as engine:
        assert sum(1 for _ in engine.all()) == n
    assert elapsed < 15, f"100k records took {elapsed:.1f} s"


def test_stop_interrupts_the_restore(
    factory: ChangelogBackendFactory, context: TaskStoresContext, producer: KafkaProducer, changelog: str
) -> None:
    for i in range(100):
        producer.send(changelog, b"v", b"k%d" % i, 0)
    producer.flush()
    stop = threading.Event()
    stop.set()
    with pytest.raises(RestoreInterrupted, match="'counts' of task 'Partition 0'"):
        restore(factory, context, None, None, stop)
    assert not context.progress[STORE].done


def test_a_tail_after_a_blob_download_counts_as_left_to_restore(
    factory: ChangelogBackendFactory, context: TaskStoresContext, producer: KafkaProducer, changelog: str
) -> None:
    # The blob restore marks the store's progress done; its changelog tail then reuses that progress: it
    # must read as under way, its records left, not 0 (samsa_store_restore_remaining_records; second read).
    from samsa.stores.backend import RestoreProgress

    for i in range(50):
        producer.send(changelog, b"v", b"k%d" % i, 0)
    producer.flush()
    downloaded = context.progress.setdefault(STORE, RestoreProgress(context.task_name, STORE))
    downloaded.records, downloaded.done = 7, True
    manager = factory.restore_manager(context)
    try:
        manager.init(None, None)
        assert not downloaded.done
        assert downloaded.total_records is not None and downloaded.total_records - downloaded.records == 50
    finally:
        manager.close()
