"""Fast unit tests of the Kafka layer: config defaults, messages, error texts, consume error policy."""

from __future__ import annotations

import logging
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, Message
from samsa.exceptions import SamsaError
from samsa.kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    KafkaConsumer,
    KafkaSystemError,
    ProducerDeliveryError,
    SimpleMessage,
    TopicMismatchError,
    TopicNotFoundError,
    client_config,
)
from samsa.kafka.config import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS, with_defaults
from samsa.kafka.embedded import BrokerStartError, noida_binary


def test_offset_constants_match_librdkafka() -> None:
    assert (OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID) == (
        confluent_kafka.OFFSET_BEGINNING,
        confluent_kafka.OFFSET_END,
        confluent_kafka.OFFSET_INVALID,
    )


def test_client_config_overrides_win() -> None:
    conf = client_config("h:1", {"linger.ms": 50})
    assert conf == {"bootstrap.servers": "h:1", "linger.ms": 50}
    assert client_config("h:1") == {"bootstrap.servers": "h:1"}


def test_defaults_apply_unless_given() -> None:
    merged = with_defaults({"enable.partition.eof": True, "x": 1}, CONSUMER_DEFAULTS)
    assert merged["enable.partition.eof"] is True
    assert merged["enable.auto.commit"] is False
    assert merged["queued.max.messages.kbytes"] == 16384
    assert merged["x"] == 1
    assert with_defaults({}, PRODUCER_DEFAULTS)["partitioner"] == "murmur2_random"


def test_simple_message_is_a_raw_message() -> None:
    m = SimpleMessage("t", 3, 7, key=b"k", value=b"v", timestamp_ms=123, headers=[("h", b"1")])
    assert (m.topic(), m.partition(), m.offset(), m.key(), m.value()) == ("t", 3, 7, b"k", b"v")
    assert m.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, 123)
    assert m.headers() == [("h", b"1")]
    assert m.error() is None
    assert SimpleMessage("t", 0, 0).timestamp()[0] == confluent_kafka.TIMESTAMP_NOT_AVAILABLE


def test_errors_derive_from_samsa_error_and_name_the_topic() -> None:
    e = TopicMismatchError("orders", "partitions", 8, 4, "Recreate it.")
    assert isinstance(e, KafkaSystemError) and isinstance(e, SamsaError)
    assert "'orders'" in str(e) and "8" in str(e) and "4" in str(e) and "Recreate it." in str(e)
    d = ProducerDeliveryError("out", 2, "MSG_SIZE_TOO_LARGE", "too big", failures=3)
    assert "'out'" in str(d) and "partition 2" in str(d) and "MSG_SIZE_TOO_LARGE" in str(d)
    assert "2 more" in str(d)
    assert "'a', 'b'" in str(TopicNotFoundError(["b", "a"]))


def test_noida_binary_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(BrokerStartError, match=r"noida-db==0\.2\.3"):
        noida_binary()


class _FakeConfluentConsumer:
    """Stands in for confluent_kafka.Consumer: hands out a prepared batch once."""

    def __init__(self, batch: list[Message]) -> None:
        self.batch = batch

    def consume(self, n: int, timeout: float) -> list[Message]:
        out, self.batch = self.batch[:n], self.batch[n:]
        return out

    def poll(self, timeout: float) -> Message | None:
        return None

    def close(self) -> None:
        pass


def _consumer_with(batch: list[Message]) -> KafkaConsumer:
    consumer = KafkaConsumer({"bootstrap.servers": "127.0.0.1:1"})
    real: Any = consumer._consumer
    real.close()
    consumer._consumer = _FakeConfluentConsumer(batch)  # type: ignore[assignment]
    return consumer


def _msg(offset: int, error: KafkaError | None = None, topic: str | None = "t") -> Message:
    return Message(topic=topic, partition=1, offset=offset, value=b"v%d" % offset, error=error)


def test_consume_drops_partition_eof() -> None:
    eof = KafkaError(KafkaError._PARTITION_EOF, "eof")
    consumer = _consumer_with([_msg(0), _msg(1, eof), _msg(2)])
    assert [m.offset() for m in consumer.consume(10, 0)] == [0, 2]


def test_consume_raises_on_partition_error_naming_it() -> None:
    err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied")
    consumer = _consumer_with([_msg(0), _msg(1, err, topic="secret")])
    with pytest.raises(KafkaSystemError, match=r"topic 'secret' partition 1.*TOPIC_AUTHORIZATION_FAILED"):
        consumer.consume(10, 0)


def test_consume_raises_on_fatal_error() -> None:
    err = KafkaError(KafkaError._FATAL, "boom", fatal=True)
    consumer = _consumer_with([_msg(0, err, topic=None)])
    with pytest.raises(KafkaSystemError, match="boom"):
        consumer.consume(10, 0)


def test_consume_logs_transient_error(caplog: pytest.LogCaptureFixture) -> None:
    err = KafkaError(KafkaError._TRANSPORT, "broker went away")
    consumer = _consumer_with([_msg(0), _msg(1, err, topic=None)])
    with caplog.at_level(logging.WARNING, logger="samsa.kafka.consumer"):
        assert [m.offset() for m in consumer.consume(10, 0)] == [0]
    assert "broker went away" in caplog.text


def test_consume_empty_after_timeout() -> None:
    assert _consumer_with([]).consume(10, 0.01) == []
