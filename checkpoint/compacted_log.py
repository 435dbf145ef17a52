"""Reads the latest value of every key of a small compacted topic (checkpoints, job model)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from samsa.checkpoint.exceptions import CheckpointError
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer
from samsa.kafka.message import TIMESTAMP_NOT_AVAILABLE

# A compacted metadata topic is small; if it does not read to its end in this long, the broker is unwell.
_READ_TIMEOUT_S = 60.0


class LatestRecord(NamedTuple):
    """The last record of one key: its value (None for a tombstone), offset and timestamp."""

    key: bytes
    value: bytes | None
    offset: int
    # Epoch ms the record carries (append time or producer create time, as the topic is set); None if absent.
    timestamp: int | None


def read_latest(
    consumer_config: Mapping[str, Any], topic: str, timeout_s: float = _READ_TIMEOUT_S
) -> list[LatestRecord]:
    """The last record of each key of partition 0 of `topic`, read to its high watermark, in offset order."""
    consumer = KafkaConsumer(consumer_config)
    try:
        low, high = consumer.watermarks((topic, 0))
        if high <= low:
            return []
        consumer.assign({(topic, 0): OFFSET_BEGINNING})
        latest: dict[bytes, LatestRecord] = {}
        deadline = time.monotonic() + timeout_s
        done = False
        while not done:
            if time.monotonic() > deadline:
                raise CheckpointError(
                    f"reading {topic} to offset {high} took over {timeout_s}s; is the broker up?"
                )
            for msg in consumer.consume(1000, 0.5):
                key = msg.key()
                if key is not None:
                    ts_type, ts = msg.timestamp()
                    stamp = None if ts_type == TIMESTAMP_NOT_AVAILABLE or ts < 0 else ts
                    latest[key] = LatestRecord(key, msg.value(), msg.offset(), stamp)
                if msg.offset() >= high - 1:
                    done = True
            if not done and consumer.position([(topic, 0)]).get((topic, 0), -1) >= high:
                done = True  # the tail is transaction markers, not records
        return sorted(latest.values(), key=lambda r: r.offset)
    finally:
        consumer.close()
