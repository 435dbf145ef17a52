"""The replay loop with a fake consumer: batching, the end bound, compaction gaps, undo, stalls."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from samsa.exactly_once.changelog import abort_record, commit_record, write_headers
from samsa.exactly_once.protocol import Producer
from samsa.kafka.message import Headers, RawMessage, SimpleMessage, TopicPartition
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
        self,
        records: dict[int, tuple[bytes | None, bytes | None]],
        high: int,
        batch: int = 3,
        headers: dict[int, Headers] | None = None,
    ) -> None:
        self.records = records
        self.headers = headers or {}
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
            SimpleMessage("cl", 0, o, k, v, headers=self.headers.get(o))
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
    tmp_path: Path,
    consumer: FakeConsumer,
    checkpointed: int | None,
    checkpoint_ms: float | None = None,
    exactly_once: bool = False,
) -> tuple[ChangelogRestoreManager, InMemoryStore, FakeProducer]:
    context = TaskStoresContext(
        "job", "t0", 0, {"s": tmp_path / "s"}, {"s": {"factory": "inmemory", "changelog": "kafka.cl"}}
    )
    context.exactly_once = exactly_once
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


FIVE_HOURS_AGO = (time.time() - 5 * 3600) * 1000  # the default min.compaction.lag.ms is 4 h


def test_an_old_checkpoint_without_offset_gaps_undoes_the_later_writes(tmp_path: Path) -> None:
    # Consecutive offsets up to the checkpoint: nothing was compacted, so undoing is exact however old.
    records: dict[int, tuple[bytes | None, bytes | None]] = {0: (b"a", b"1"), 1: (b"a", b"2")}
    manager, engine, producer = run(tmp_path, FakeConsumer(records, high=2), 0, FIVE_HOURS_AGO)
    assert manager.actions["s"].undo_proven_only
    assert dict(engine.all()) == {b"a": b"1"} and producer.sent == [(b"a", b"1")]


def test_an_old_checkpoint_with_gaps_keeps_the_later_writes_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records: dict[int, tuple[bytes | None, bytes | None]] = {
        0: (b"a", b"1"),
        # 1, 2: removed by compaction (b's checkpointed value may have been one of them)
        3: (b"c", b"1"),  # checkpoint at 3
        4: (b"a", b"2"),
        5: (b"b", b"3"),
        6: (b"c", None),
    }
    with caplog.at_level("WARNING"):
        manager, engine, producer = run(tmp_path, FakeConsumer(records, high=7), 3, FIVE_HOURS_AGO)
    assert dict(engine.all()) == {b"a": b"2", b"b": b"3"}
    assert producer.sent == [] and manager.trimmed["s"] == 0
    (warning,) = [r.getMessage() for r in caplog.records if "KEPT" in r.getMessage()]
    for said in ("3 key(s)", "cl#0 offset 3", "up to offset 6", "[0, 3] have gaps", "counts twice"):
        assert said in warning, warning
    assert "stores.s.changelog.min.compaction.lag.ms" in warning


def test_an_old_checkpoint_with_a_gap_after_it_still_undoes(tmp_path: Path) -> None:
    # Only removals up to the checkpoint matter: a gap after it (an earlier write of a key written again)
    # hides nothing undoing needs.
    records: dict[int, tuple[bytes | None, bytes | None]] = {
        0: (b"a", b"1"),
        1: (b"b", b"1"),  # checkpoint at 1
        3: (b"a", b"3"),  # offset 2 (a=2) removed
    }
    _, engine, producer = run(tmp_path, FakeConsumer(records, high=4), 1, FIVE_HOURS_AGO)
    assert dict(engine.all()) == {b"a": b"1", b"b": b"1"} and producer.sent == [(b"a", b"1")]


def test_a_recent_checkpoint_with_gaps_undoes_everything(tmp_path: Path) -> None:
    records: dict[int, tuple[bytes | None, bytes | None]] = {
        0: (b"a", b"1"),
        2: (b"c", b"1"),
        3: (b"b", b"2"),
    }
    _, engine, producer = run(tmp_path, FakeConsumer(records, high=4), 2)
    assert dict(engine.all()) == {b"a": b"1", b"c": b"1"} and producer.sent == [(b"b", None)]


def test_exactly_once_an_old_checkpoint_undoes_the_open_version_unless_gaps_hide_restored_values(
    tmp_path: Path,
) -> None:
    # Version 1 restored; version 2's writes (after the checkpoint) are void: undone when the offsets up to
    # the checkpoint are consecutive (control records count), kept when one is missing.
    task = Producer.of("job", "1", "t0")
    v1, v2 = write_headers(task, 1, 1), write_headers(task, 1, 2)
    commit, abort = commit_record(task, 1, 1), abort_record(task, 2, 1)
    records: dict[int, tuple[bytes | None, bytes | None]] = {
        0: (b"a", b"1"),
        1: (commit[0], commit[1]),
        2: (b"c", b"1"),  # checkpoint at 2
        3: (b"a", b"2"),
        4: (b"b", b"3"),
        5: (abort[0], abort[1]),  # the new start's abort record (generation 2 restored version 1)
    }
    headers = {0: v1, 1: commit[2], 2: v1, 3: v2, 4: v2, 5: abort[2]}
    consumer = FakeConsumer(records, high=6, headers=headers)
    manager, engine, producer = run(tmp_path, consumer, 2, FIVE_HOURS_AGO, exactly_once=True)
    assert dict(engine.all()) == {b"a": b"1", b"c": b"1"}
    assert producer.sent == [(b"a", b"1"), (b"b", None)] and manager.trimmed["s"] == 2

    del records[1]  # compacted (a commit record here, but a gap does not say what it was)
    consumer = FakeConsumer(records, high=6, headers=headers)
    manager, engine, producer = run(tmp_path / "gap", consumer, 2, FIVE_HOURS_AGO, exactly_once=True)
    assert dict(engine.all()) == {b"a": b"2", b"b": b"3", b"c": b"1"} and producer.sent == []


def _restore_with_reseed_on_gap(
    tmp_path: Path, records: dict[int, tuple[bytes | None, bytes | None]], high: int, checkpointed: int
) -> tuple[InMemoryStore, FakeProducer]:
    """A restore whose plan says `reseed_on_gap` (a checkpoint older than 0.9 x delete.retention.ms, the store
    restored from its exact local copy): here the in-memory store replays [0, checkpointed] instead."""
    context = TaskStoresContext(
        "job", "t0", 0, {"s": tmp_path / "s"}, {"s": {"factory": "inmemory", "changelog": "kafka.cl"}}
    )
    consumer = FakeConsumer(records, high=high)
    producer = FakeProducer(consumer)
    manager = ChangelogRestoreManager(context, {"s": SSP}, lambda system: consumer, producer)
    manager.init({"s": ChangelogMarker(SSP, checkpointed).encode()}, f"{int(time.time() * 1000)}-1")
    manager.actions["s"] = replace(manager.actions["s"], reseed_on_gap=True)
    manager.restore(threading.Event())
    manager.close()
    engine = context.engines["s"]
    assert isinstance(engine, InMemoryStore)
    return engine, producer


def test_an_old_checkpoint_rewrites_the_store_to_the_changelog_only_after_a_gap_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpointed: dict[int, tuple[bytes | None, bytes | None]] = {
        0: (b"a", b"1"),
        1: (b"b", b"1"),
        2: (b"c", b"1"),  # checkpoint at 2
    }
    # A whole tail (a delete of b included): undoing is enough, the changelog then holds the whole state.
    whole = {**checkpointed, 3: (b"a", b"2"), 4: (b"b", None), 5: (b"d", b"1")}
    engine, producer = _restore_with_reseed_on_gap(tmp_path / "whole", whole, 6, 2)
    assert dict(engine.all()) == {b"a": b"1", b"b": b"1", b"c": b"1"}
    assert producer.sent == [(b"a", b"1"), (b"b", b"1"), (b"d", None)]
    # Offset 4 gone (a tombstone of c past delete.retention.ms, which took c's checkpointed record with it):
    # every key not undone is written again, so that the changelog holds c again.
    with caplog.at_level("WARNING"):
        engine, producer = _restore_with_reseed_on_gap(
            tmp_path / "gap", {**checkpointed, 3: (b"a", b"2"), 5: (b"d", b"1")}, 6, 2
        )
    assert dict(engine.all()) == {b"a": b"1", b"b": b"1", b"c": b"1"}
    assert producer.sent[:2] == [(b"a", b"1"), (b"d", None)]
    assert sorted(producer.sent[2:]) == [(b"b", b"1"), (b"c", b"1")]
    assert any("gap at offset 4" in r.getMessage() for r in caplog.records)


def test_the_offset_check_sees_gaps_inside_a_batch_across_batches_and_at_the_end() -> None:
    def read(first: int, last: int, *batches: list[int]) -> int | None:
        check = restore_module._Consecutive(first, last)
        for offsets in batches:
            check.read([SimpleMessage("cl", 0, o, b"k", b"v") for o in offsets])
        check.complete()
        return check.gap_at

    assert read(3, 9, [3, 4, 5], [6, 7, 8, 9, 10]) is None
    assert read(3, 9, [3, 4, 6], [7, 8, 9]) == 5
    assert read(3, 9, [3, 4, 5], [7, 8, 9]) == 6
    assert read(3, 9, [3, 4, 5], [6, 7]) == 8  # the read ended early
    assert read(3, 9, [5, 6]) == 3
    assert read(3, 4, [3, 4, 9]) is None  # past `last` nothing counts
    assert read(3, 9, [0, 1, 2], [3, 4, 5, 6, 7, 8, 9]) is None  # before `first` nothing counts
