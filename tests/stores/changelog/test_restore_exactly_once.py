"""An exactly-once task's changelog: tagged writes, commit and abort records, and a restore that drops the
writes of a zombie (an earlier start still flushing after the restart), on the real broker and RocksDB."""

from __future__ import annotations

from dataclasses import dataclass

from changelog_task import STORE, Task, contents, read_changelog, restore

from samsa.exactly_once.changelog import (
    CONTROL_KEY,
    ChangelogReader,
    abort_record,
    commit_record,
    write_headers,
)
from samsa.exactly_once.protocol import Producer
from samsa.kafka import KafkaProducer
from samsa.kafka.message import Headers
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.logged import LoggedStore

TASK = Producer.of("job", "1", "Partition 0")
ZOMBIE_PEER = Producer.of("job", "1", "Partition 1")


class EosTask(Task):
    """The task's changelog writes tagged as the exactly-once commit does it."""

    def __init__(self, context: TaskStoresContext, factory: ChangelogBackendFactory, producer: KafkaProducer):
        super().__init__(context, factory, producer)
        self.stream = factory.changelogs[STORE].stream
        self.headers: Headers | None = None
        self.store = LoggedStore(
            self.engine,
            lambda topic, value, key=None, partition=None: producer.send(
                topic, value, key, partition, self.headers
            ),
            self.stream,
            0,
        )

    def version(self, generation: int, version: int, writes: dict[bytes, bytes | None]) -> None:
        """The writes of one version, sent at its cut with its tag."""
        self.headers = write_headers(TASK, generation, version)
        for key, value in writes.items():
            if value is None:
                self.store.delete(key)
            else:
                self.store.put(key, value)

    def control(self, record: tuple[bytes, bytes, Headers]) -> None:
        key, value, headers = record
        self.producer.send(self.stream, value, key, 0, headers)


def test_a_restore_drops_a_zombies_writes_after_the_abort_record_and_skips_control_records(
    factory: ChangelogBackendFactory,
    context: TaskStoresContext,
    producer: KafkaProducer,
    kafka_bootstrap: str,
    changelog: str,
) -> None:
    context.exactly_once = True
    task = EosTask(context, factory, producer)
    task.control(abort_record(TASK, 1, 0))
    task.version(1, 1, {b"k%d" % i: b"g1v1" for i in range(10)})
    task.control(commit_record(TASK, 1, 1))
    task.version(1, 2, {b"k0": b"g1v2", b"k9": None})
    task.commit(local_dir=False)
    task.control(commit_record(TASK, 1, 2))
    # A new start (generation 2) from version 2 writes its abort record; the old start, still alive, then
    # flushes its version 3 (a zombie: its checkpoint will be fenced, but these writes reach the changelog).
    task.control(abort_record(TASK, 2, 2))
    task.version(1, 3, {b"k1": b"zombie", b"k9": b"zombie", b"k50": b"zombie"})
    task.version(2, 3, {b"k2": b"g2v3"})
    checkpoint_id, markers, _ = task.commit(local_dir=False)  # the marker covers the zombie's writes
    task.crash()
    expected = {b"k%d" % i: b"g1v1" for i in range(9)} | {b"k0": b"g1v2", b"k2": b"g2v3"}

    manager = restore(factory, context, markers, checkpoint_id)

    assert contents(context.store_dirs[STORE]) == expected
    assert manager.trimmed[STORE] == 3  # the zombie's keys written again with the restored values
    described = {k: v for k, v in read_changelog(kafka_bootstrap, changelog).items() if CONTROL_KEY not in k}
    assert described == expected

    # Once more from scratch: the changelog alone (without the fences' context) restores the same state.
    again = restore(factory, context, markers, checkpoint_id)
    assert contents(context.store_dirs[STORE]) == expected
    assert again.trimmed[STORE] == 3


def test_without_exactly_once_the_restore_reads_tagged_records_as_plain_writes(
    factory: ChangelogBackendFactory,
    context: TaskStoresContext,
    producer: KafkaProducer,
) -> None:
    # The filter is what drops the zombie's write: the same log restored as a plain changelog keeps it.
    task = EosTask(context, factory, producer)
    task.version(1, 1, {b"k": b"g1v1"})
    task.control(abort_record(TASK, 2, 0))
    task.version(1, 2, {b"k": b"zombie"})
    checkpoint_id, markers, _ = task.commit(local_dir=False)
    task.crash()
    restore(factory, context, markers, checkpoint_id)
    assert contents(context.store_dirs[STORE])[b"k"] == b"zombie"
    context.exactly_once = True
    restore(factory, context, markers, checkpoint_id)
    assert contents(context.store_dirs[STORE]) == {b"k": b"g1v1"}


@dataclass
class _Msg:
    k: bytes | None
    h: Headers | None

    def key(self) -> bytes | None:
        return self.k

    def headers(self) -> Headers | None:
        return self.h

    def topic(self) -> str:
        return "changelog"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 0


def _write(producer: Producer, generation: int, version: int, key: bytes) -> _Msg:
    return _Msg(key, [(name, value) for name, value in write_headers(producer, generation, version)])


def _control(record: tuple[bytes, bytes, Headers]) -> _Msg:
    return _Msg(record[0], record[2])


def test_the_reader_voids_only_older_generations_above_the_restored_version_of_that_producer() -> None:
    reader = ChangelogReader()
    early = _write(TASK, 1, 5, b"before-the-fence")  # read before the abort record: kept (undo handles it)
    kept, void = reader.select(
        [early, _control(abort_record(TASK, 3, 4)), _control(commit_record(TASK, 3, 5))]
    )
    assert kept == [early] and void == []
    msgs = [
        _write(TASK, 1, 4, b"committed-before"),  # an older generation, at or below the restored version
        _write(TASK, 2, 5, b"void-gen2"),
        _write(TASK, 1, 6, b"void-gen1"),
        _write(TASK, 3, 5, b"current"),
        _write(TASK, 4, 9, b"newer"),
        _write(ZOMBIE_PEER, 1, 9, b"other-producer"),  # fences are per producer
        _Msg(b"untagged", None),  # a restore's undo record, or written before exactly-once
    ]
    kept, void = reader.select(msgs)
    assert [m.key() for m in kept] == [
        b"committed-before",
        b"current",
        b"newer",
        b"other-producer",
        b"untagged",
    ]
    assert void == [b"void-gen2", b"void-gen1"]
    assert reader.void == 2 and reader.control == 2
