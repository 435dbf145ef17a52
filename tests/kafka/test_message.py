"""RawMessage, SimpleMessage and the offset constants."""

from __future__ import annotations

import confluent_kafka

from samsa.kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, RawMessage, SimpleMessage
from samsa.kafka.message import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TIMESTAMP_NOT_AVAILABLE


def test_constants_match_librdkafka() -> None:
    assert (OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID) == (
        confluent_kafka.OFFSET_BEGINNING,
        confluent_kafka.OFFSET_END,
        confluent_kafka.OFFSET_INVALID,
    )
    assert (TIMESTAMP_NOT_AVAILABLE, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME) == (
        confluent_kafka.TIMESTAMP_NOT_AVAILABLE,
        confluent_kafka.TIMESTAMP_CREATE_TIME,
        confluent_kafka.TIMESTAMP_LOG_APPEND_TIME,
    )


def test_simple_message_reads_like_a_consumed_one() -> None:
    m: RawMessage = SimpleMessage("t", 3, 7, key=b"k", value=b"v", timestamp_ms=123, headers=[("h", b"1")])
    assert (m.topic(), m.partition(), m.offset(), m.key(), m.value()) == ("t", 3, 7, b"k", b"v")
    assert m.timestamp() == (TIMESTAMP_CREATE_TIME, 123)
    assert m.headers() == [("h", b"1")]
    assert m.error() is None
    assert SimpleMessage("t", 0, 0).timestamp() == (TIMESTAMP_NOT_AVAILABLE, -1)


def test_confluent_message_has_the_protocol_methods() -> None:
    real = confluent_kafka.Message(topic="t", partition=1, offset=2, key=b"k", value=b"v")
    for name in ("topic", "partition", "offset", "key", "value", "timestamp", "headers", "error"):
        assert callable(getattr(real, name))
    assert (real.topic(), real.partition(), real.offset(), real.error()) == ("t", 1, 2, None)
