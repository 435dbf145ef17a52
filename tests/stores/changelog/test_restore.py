"""Transactional restore against the real broker and RocksDB: committed state back, later writes undone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.kafka import KafkaConsumer, KafkaProducer
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog.exceptions import RestoreInterrupted
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.restore import ChangelogRestoreManager
from samsa.stores.checkpoint_dirs import checkpoint_dir, create_checkpoint, list_checkpoint_dirs, write_marker
from samsa.stores.logged import LoggedStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore

STORE = "counts"


class Task:
    """A task's logged RocksDB store and its commits, as the container drives them."""

    def __init__(
        self, context: TaskStoresContext, factory: ChangelogBackendFactory, producer: KafkaProducer
    ) -> None:
        self.dir = context.store_dirs[STORE]
        self.producer = producer
        self.backup = factory.backup_manager(context)
        self.engine = RocksDbStore(self.dir, name=STORE)
        stream = factory.changelogs[STORE].stream
        self.store = LoggedStore(self.engine, producer.send, stream, context.changelog_partition)

    def commit(self, local_dir: bool = True) -> tuple[str, dict[str, str], dict[bytes, bytes]]:
        """(checkpoint id, markers, committed state); with `local_dir`, leaves a marked checkpoint dir."""
        checkpoint_id = str(CheckpointId.create())
        self.store.flush()
        self.producer.flush()
        markers = self.backup.snapshot(checkpoint_id)
        if local_dir:
            path = create_checkpoint(self.engine, self.dir, checkpoint_id)
            assert path is not None
            write_marker(path, checkpoint_id, {"changelog": markers[STORE]})
        return checkpoint_id, markers, dict(self.engine.all())

    def crash(self) -> None:
        """Stops without a commit: what was sent is in the changelog, the live dir keeps its writes."""
        self.producer.flush()
        self.engine.close()


def restore(
    factory: ChangelogBackendFactory,
    context: TaskStoresContext,
    markers: dict[str, str] | None,
    checkpoint_id: str | None,
    stop: threading.Event | None = None,
) -> ChangelogRestoreManager:
    manager = factory.restore_manager(context)
    try:
        manager.init(markers, checkpoint_id)
        manager.restore(stop or threading.Event())
    finally:
        manager.close()
    return manager


def read_changelog(bootstrap: str, topic: str, partition: int = 0) -> dict[bytes, bytes]:
    """The state the changelog describes: its records applied in order, to its end."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
    try:
        _, high = consumer.watermarks((topic, partition))
        consumer.assign({(topic, partition): 0})
        state: dict[bytes, bytes] = {}
        last = -1
        deadline = time.monotonic() + 20
        while last < high - 1 and time.monotonic() < deadline:
            for m in consumer.consume(1000, 1):
                key, value = m.key(), m.value()
                assert key is not None
                if value is None:
                    state.pop(key, None)
                else:
                    state[key] = value
                last = m.offset()
        assert last == high - 1, f"changelog read stopped at {last}, high watermark {high}"
        return state
    finally:
        consumer.close()


def contents(path: Path) -> dict[bytes, bytes]:
    with RocksDbStore(path, name=STORE) as engine:
        return dict(engine.all())


def write(store: LoggedStore, tag: bytes, keys: range) -> None:
    for i in keys:
        store.put(b"k%04d" % i, tag + b"%d" % i)


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
