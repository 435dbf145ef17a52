"""Reads the latest value of every key of a small compacted topic (checkpoints, job model)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from samsa.checkpoint.exceptions import CheckpointError
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer

# A compacted metadata topic is small; if it does not read to its end in this long, the broker is unwell.
_READ_TIMEOUT_S = 60.0


def read_latest(consumer_config: Mapping[str, Any], topic: str) -> list[tuple[bytes, bytes | None, int]]:
    """(key, latest value, offset) for each key of partition 0 of `topic`, read to its high watermark."""
    consumer = KafkaConsumer(consumer_config)
    try:
        low, high = consumer.watermarks((topic, 0))
        if high <= low:
            return []
        consumer.assign({(topic, 0): OFFSET_BEGINNING})
        latest: dict[bytes, tuple[bytes | None, int]] = {}
        deadline = time.monotonic() + _READ_TIMEOUT_S
        done = False
        while not done:
            if time.monotonic() > deadline:
                raise CheckpointError(
                    f"reading {topic} to offset {high} took over {_READ_TIMEOUT_S}s; is the broker up?"
                )
            for msg in consumer.consume(1000, 0.5):
                key = msg.key()
                if key is not None:
                    latest[key] = (msg.value(), msg.offset())
                if msg.offset() >= high - 1:
                    done = True
            if not done and consumer.position([(topic, 0)]).get((topic, 0), -1) >= high:
                done = True  # the tail is transaction markers, not records
        return [(k, v, o) for k, (v, o) in latest.items()]
    finally:
        consumer.close()
