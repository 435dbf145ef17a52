"""Marks of records that tell one incarnation of a topic from another: a topic deleted and recreated holds,
at the same offset, another record (Kafka topic ids would tell too, but not every broker returns them)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from samsa.kafka.consumer import KafkaConsumer
from samsa.kafka.message import RawMessage
from samsa.streams import SystemStreamPartition

# How long a start waits for the one record it reads back to check a mark.
_MARK_READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RecordMark:
    """What identifies the record at `offset` of a partition: its timestamp and, when known, a digest of
    its key and value. A topic deleted and recreated holds, at the same offset, another record."""

    offset: int
    timestamp: int  # epoch ms
    digest: str | None = None

    @classmethod
    def of(cls, msg: RawMessage) -> RecordMark:
        """The mark of a consumed record."""
        return cls(msg.offset(), msg.timestamp()[1], _digest(msg))

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "timestamp": self.timestamp, "digest": self.digest}

    @classmethod
    def from_json(cls, value: object) -> RecordMark | None:
        """The mark `to_json` wrote; None for anything else (a file of an older Samsa has none)."""
        if not isinstance(value, dict):
            return None
        offset, timestamp, digest = value.get("offset"), value.get("timestamp"), value.get("digest")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (offset, timestamp)):
            return None
        if digest is not None and not isinstance(digest, str):
            return None
        assert isinstance(offset, int) and isinstance(timestamp, int)
        return cls(offset, timestamp, digest)


def _digest(msg: RawMessage) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (msg.key(), msg.value()):
        # Length-prefixed, a null apart from an empty one: no two (key, value) pairs feed the same bytes.
        h.update(b"\xff" if part is None else len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def differs(
    mark: RecordMark,
    found: RecordMark,
    record: str = "the last record the store read",
    whose: str = "the store read",
) -> str | None:
    """Why `found`, the record now at `mark.offset` (or the next one after it), is not the marked one;
    None when it is. `record` and `whose` name the marked record and who saw it, for the message."""
    if found.offset != mark.offset:
        return (
            f"offset {mark.offset}, {record}, is gone (the next record is at "
            f"{found.offset}: compacted away, or the topic was recreated)"
        )
    if found.timestamp != mark.timestamp:
        return (
            f"the record at offset {mark.offset} has timestamp {found.timestamp}, the one {whose} had "
            f"{mark.timestamp}"
        )
    if mark.digest is not None and found.digest is not None and found.digest != mark.digest:
        return f"the record at offset {mark.offset} has another key or value than the one {whose}"
    return None


def read_marks(
    consumer: KafkaConsumer,
    positions: Mapping[SystemStreamPartition, int],
    purpose: str,
    timeout_s: float = _MARK_READ_TIMEOUT_S,
) -> dict[SystemStreamPartition, RecordMark]:
    """The mark of the first record at or after each offset of `positions`, all read at once with
    `consumer` (which must be unassigned; it is left so). `purpose` says why, for the timeout's error."""
    if not positions:
        return {}
    by_tp = {(ssp.stream, ssp.partition): ssp for ssp in positions}
    marks: dict[SystemStreamPartition, RecordMark] = {}
    consumer.assign({(ssp.stream, ssp.partition): offset for ssp, offset in positions.items()})
    try:
        deadline = time.monotonic() + timeout_s
        while len(marks) < len(positions):
            for msg in consumer.consume(max(1, len(positions)), 0.2):
                ssp = by_tp.get((msg.topic(), msg.partition()))
                if ssp is not None and ssp not in marks:
                    marks[ssp] = RecordMark.of(msg)
            if len(marks) < len(positions) and time.monotonic() >= deadline:
                missing = ", ".join(f"{s} at offset {positions[s]}" for s in positions if s not in marks)
                raise TimeoutError(
                    f"could not read {missing} within {timeout_s:.0f} s to {purpose}; is the broker up?"
                )
    finally:
        consumer.unassign()
    return marks


def mark_problem(consumer: KafkaConsumer, ssp: SystemStreamPartition, mark: RecordMark) -> str | None:
    """Why the partition does not hold, at the mark's offset, the marked record (its topic was deleted and
    recreated, or the record compacted away); None when it does, or when it expired (below the partition's
    low watermark: nothing to compare). Reads the one record with `consumer`, which must be unassigned."""
    tp = (ssp.stream, ssp.partition)
    low, high = consumer.watermarks(tp)
    if mark.offset < low:
        return None
    if mark.offset >= high:
        return f"offset {mark.offset}, the last record the store read, is past the partition's end {high}"
    found = read_marks(
        consumer,
        {ssp: mark.offset},
        "check that the topic is the one the adjunct store was built from",
    )[ssp]
    return differs(mark, found)
