"""The replay loop with a fake consumer: batching, the end bound, compaction gaps, undo, stalls."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from samsa.kafka.message import RawMessage, SimpleMessage, TopicPartition
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog import restore as restore_module
from samsa.stores.changelog.exceptions import ChangelogRestoreError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.changelog.restore import ChangelogRestoreManager
from samsa.stores.memory import InMemoryStore
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "cl", 0)
TP = ("cl", 0)


class FakeConsumer:
    """Serves `records` (offset -> (key, value)) from the assigned offset, `batch` at a time."""

    def __init__(
        self, records: dict[int, tuple[bytes | None, bytes | None]], high: int, batch: int = 3
    ) -> None:
        self.records = records
        self.high = high
        self.batch = batch
        self.position_at = -1001
        self.appended: list[RawMessage] = []  # what the partition gains during the restore (undo records)
        self.closed = False

    def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        self.position_at = positions[TP]

    def unassign(self) -> None:
        pass

    def consume(self, max_messages: int, timeout: float) -> list[RawMessage]:
        available = [
            SimpleMessage("cl", 0, o, k, v)
            for o, (k, v) in sorted(self.records.items())
            if o >= self.position_at
        ]
        available += [m for m in self.appended if m.offset() >= self.position_at]
        out = available[: min(max_messages, self.batch)]
        if out:
            self.position_at = out[-1].offset() + 1
        elif self.position_at < self.high:
            self.position_at = self.high  # the fetch skipped a gap at the end (compaction, control records)
        return list(out)

    def position(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {TP: self.position_at}

    def watermarks(self, tp: TopicPartition, cached: bool = False, timeout: float = 10) -> tuple[int, int]:
        return (min(self.records, default=0), self.high)

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    def __init__(self, consumer: FakeConsumer) -> None:
        self.consumer = consumer
        self.sent: list[tuple[bytes | None, bytes | None]] = []
        self.flushed = 0

    def send(
        self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None
    ) -> None:
        assert (topic, partition) == TP
        self.sent.append((key, value))
        offset = self.consumer.high + len(self.consumer.appended)
        self.consumer.appended.append(SimpleMessage("cl", 0, offset, key, value))

    def flush(self, timeout: float = 60) -> None:
        self.flushed += 1


def run(
    tmp_path: Path, consumer: FakeConsumer, checkpointed: int | None, checkpoint_ms: float | None = None
) -> tuple[ChangelogRestoreManager, InMemoryStore, FakeProducer]:
    context = TaskStoresContext(
        "job", "t0", 0, {"s": tmp_path / "s"}, {"s": {"factory": "inmemory", "changelog": "kafka.cl"}}
    )
    engine = InMemoryStore("s")
    context.engines["s"] = engine
    producer = FakeProducer(consumer)
    manager = ChangelogRestoreManager(context, {"s": SSP}, lambda system: consumer, producer)
    markers = None if checkpointed is None else {"s": ChangelogMarker(SSP, checkpointed).encode()}
    millis = int(time.time() * 1000 if checkpoint_ms is None else checkpoint_ms)  # default: just now
    manager.init(markers, f"{millis}-1")
    manager.restore(threading.Event())
    manager.close()
    assert consumer.closed
    return manager, engine, producer


def test_replays_to_the_checkpoint_and_undoes_each_later_key_once(tmp_path: Path) -> None:
    records: dict[int, tuple[bytes | None, bytes | None]] = {
        0: (b"a", b"1"),
        1: (b"b", b"1"),
        2: (b"c", b"1"),
        3: (b"b", None),  # checkpoint at 3
        4: (b"a", b"2"),
        5: (b"a", b"3"),
        6: (b"b", b"2"),
        7: (b"d", b"1"),
    }
    consumer = FakeConsumer(records, high=8)
    manager, engine, producer = run(tmp_path, consumer, 3)
    assert dict(engine.all()) == {b"a": b"1", b"c": b"1"}
    assert producer.sent == [(b"a", b"1"), (b"b", None), (b"d", None)]
    assert producer.flushed == 1 and manager.trimmed["s"] == 3
    assert manager.context.progress["s"].records == 8  # the undo records appended meanwhile are not read


def test_compaction_gaps_and_a_hidden_end_finish_by_position(tmp_path: Path) -> None:
    records: dict[int, tuple[bytes | None, bytes | None]] = {
        0: (b"a", b"1"),
        5: (b"b", b"1"),
        9: (b"c", b"1"),
    }
    consumer = FakeConsumer(records, high=12)  # offsets 10, 11: records the consumer never hands out
    _, engine, producer = run(tmp_path, consumer, None)
    assert dict(engine.all()) == {b"a": b"1", b"b": b"1", b"c": b"1"}
    assert producer.sent == [] and producer.flushed == 0


def test_keyless_records_are_skipped(tmp_path: Path) -> None:
    consumer = FakeConsumer({0: (None, b"x"), 1: (b"a", b"1")}, high=2)
    _, engine, _ = run(tmp_path, consumer, 1)
    assert dict(engine.all()) == {b"a": b"1"}


def test_a_stalled_partition_fails_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restore_module, "_STALL_S", 0.0)
    monkeypatch.setattr(restore_module, "_POLL_S", 0.0)
    consumer = FakeConsumer({0: (b"a", b"1")}, high=5)
    consumer.consume = lambda max_messages, timeout: []  # type: ignore[method-assign]
    with pytest.raises(ChangelogRestoreError, match=r"kafka\.cl#0.*expected up to 4"):
        run(tmp_path, consumer, None)


def test_in_place_engine_is_emptied_first(tmp_path: Path) -> None:
    consumer = FakeConsumer({0: (b"a", b"1")}, high=1)
    context = TaskStoresContext(
        "job", "t0", 0, {"s": tmp_path / "s"}, {"s": {"factory": "inmemory", "changelog": "kafka.cl"}}
    )
    manager = ChangelogRestoreManager(context, {"s": SSP}, lambda system: consumer, FakeProducer(consumer))
    manager.init(None)
    manager.restore(threading.Event())
    engine = context.engines["s"]  # created, registered and left open for the task
    assert dict(engine.all()) == {b"a": b"1"}
    manager.close()
    assert engine.get(b"a") == b"1"


def test_an_old_checkpoint_keeps_the_later_writes(tmp_path: Path) -> None:
    records: dict[int, tuple[bytes | None, bytes | None]] = {0: (b"a", b"1"), 1: (b"a", b"2")}
    five_hours_ago = (time.time() - 5 * 3600) * 1000  # the default min.compaction.lag.ms is 4 h
    manager, engine, producer = run(tmp_path, FakeConsumer(records, high=2), 0, five_hours_ago)
    assert dict(engine.all()) == {b"a": b"2"} and producer.sent == []
    assert manager.actions["s"].degraded
