"""A task's logged RocksDB store driven as the container drives it, its restore, and what its changelog
describes: shared by the changelog restore tests."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.kafka import KafkaConsumer, KafkaProducer
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.restore import ChangelogRestoreManager
from samsa.stores.checkpoint_dirs import create_checkpoint, write_marker
from samsa.stores.logged import LoggedStore
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
