"""KafkaConsumer against the real broker: explicit offsets, pause/resume, seek, watermarks, timestamps."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from samsa.kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaConsumer,
    KafkaProducer,
    KafkaSystemError,
    RawMessage,
    TopicPartition,
)

TopicFactory = Callable[..., str]


@pytest.fixture
def producer(kafka_bootstrap: str) -> Iterator[KafkaProducer]:
    p = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    yield p
    p.close()


@pytest.fixture
def consumer(kafka_bootstrap: str) -> Iterator[KafkaConsumer]:
    c = KafkaConsumer({"bootstrap.servers": kafka_bootstrap})
    yield c
    c.close()


def _read(consumer: KafkaConsumer, n: int, timeout: float = 10) -> list[RawMessage]:
    got: list[RawMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got.extend(consumer.consume(500, 0.2))
    return got


def _fill(producer: KafkaProducer, topic: str, partitions: int, per_partition: int) -> None:
    for p in range(partitions):
        for i in range(per_partition):
            producer.send(topic, b"%d-%d" % (p, i), key=b"k%d" % i, partition=p, headers=[("i", b"%d" % i)])
    producer.flush()


def test_round_trip_four_partitions_from_explicit_offsets(
    topics: TopicFactory, producer: KafkaProducer, consumer: KafkaConsumer
) -> None:
    topic = topics(4)
    _fill(producer, topic, 4, 10)
    start = {(topic, 0): 0, (topic, 1): 3, (topic, 2): 9, (topic, 3): OFFSET_BEGINNING}
    consumer.assign(start)
    assert sorted(consumer.assignment()) == sorted(start)
    msgs = _read(consumer, 10 + 7 + 1 + 10)
    by_partition: dict[int, list[int]] = {}
    for m in msgs:
        assert m.topic() == topic and m.error() is None
        assert m.value() == b"%d-%d" % (m.partition(), m.offset())
        assert m.key() == b"k%d" % m.offset()
        assert m.headers() == [("i", b"%d" % m.offset())]
        assert m.timestamp()[1] > 0
        by_partition.setdefault(m.partition(), []).append(m.offset())
    assert by_partition == {0: list(range(10)), 1: list(range(3, 10)), 2: [9], 3: list(range(10))}
    assert consumer.position([(topic, 0), (topic, 2)]) == {(topic, 0): 10, (topic, 2): 10}
    assert consumer.consume(100, 0.05) == []


def test_consume_returns_as_soon_as_one_message_is_there(
    topics: TopicFactory, producer: KafkaProducer, consumer: KafkaConsumer
) -> None:
    topic = topics(1)
    consumer.assign({(topic, 0): 0})
    assert consumer.consume(1000, 0.2) == []
    producer.send(topic, b"one", partition=0)
    producer.flush()
    started = time.monotonic()
    msgs = consumer.consume(1000, 5.0)
    assert [m.value() for m in msgs] == [b"one"]
    assert time.monotonic() - started < 2.0  # not the full timeout


def test_a_new_consumer_reads_from_the_beginning_without_librdkafkas_500_ms_wait(
    topics: TopicFactory, producer: KafkaProducer, kafka_bootstrap: str
) -> None:
    # Assigned at a logical offset before it knows the leader, librdkafka resolves the offset only on a
    # 500 ms retry timer; `assign` asks for the topic's metadata first. So the first message comes well
    # inside that timer (a regression waits at least 500 ms whatever the machine's speed).
    topic = topics(1)
    _fill(producer, topic, 1, 3)
    fresh = KafkaConsumer({"bootstrap.servers": kafka_bootstrap})
    try:
        started = time.monotonic()
        fresh.assign({(topic, 0): OFFSET_BEGINNING})
        first: list[RawMessage] = []
        while not first and time.monotonic() - started < 5:
            first = fresh.consume(10, 0.01)
        assert [m.offset() for m in first] == [0, 1, 2]
        assert time.monotonic() - started < 0.45
    finally:
        fresh.close()


def test_pause_and_resume(topics: TopicFactory, producer: KafkaProducer, consumer: KafkaConsumer) -> None:
    topic = topics(2)
    _fill(producer, topic, 2, 5)
    a: TopicPartition = (topic, 0)
    b: TopicPartition = (topic, 1)
    consumer.assign({a: 0, b: 0})
    consumer.pause([a])
    consumer.seek(a, 0)  # drop anything prefetched before the pause
    first = _read(consumer, 5, timeout=1.5)
    assert {m.partition() for m in first} == {1}
    assert len(first) == 5
    consumer.resume([a])
    rest = _read(consumer, 5)
    assert [(m.partition(), m.offset()) for m in rest] == [(0, i) for i in range(5)]


def test_seek_rewinds_and_skips(
    topics: TopicFactory, producer: KafkaProducer, consumer: KafkaConsumer
) -> None:
    topic = topics(1)
    _fill(producer, topic, 1, 10)
    tp = (topic, 0)
    consumer.assign({tp: 0})
    assert len(_read(consumer, 10)) == 10
    consumer.seek(tp, 4)
    assert [m.offset() for m in _read(consumer, 6)] == [4, 5, 6, 7, 8, 9]
    consumer.seek(tp, 8)
    assert [m.offset() for m in _read(consumer, 2)] == [8, 9]


def test_position_before_reading_is_invalid(topics: TopicFactory, consumer: KafkaConsumer) -> None:
    topic = topics(1)
    consumer.assign({(topic, 0): 0})
    assert consumer.position([(topic, 0)]) == {(topic, 0): OFFSET_INVALID}


def test_watermarks_live_and_cached(
    topics: TopicFactory, producer: KafkaProducer, consumer: KafkaConsumer
) -> None:
    topic = topics(2)
    _fill(producer, topic, 1, 7)
    assert consumer.watermarks((topic, 0)) == (0, 7)
    assert consumer.watermarks((topic, 1)) == (0, 0)
    assert consumer.watermarks((topic, 0), cached=True)[1] == OFFSET_INVALID  # nothing fetched yet
    consumer.assign({(topic, 0): 0})
    _read(consumer, 7)
    assert consumer.watermarks((topic, 0), cached=True)[1] == 7


def test_offsets_for_times(topics: TopicFactory, producer: KafkaProducer, consumer: KafkaConsumer) -> None:
    topic = topics(2)
    base = int(time.time() * 1000) - 60_000
    for i in range(5):
        producer.send(topic, b"x", partition=0, timestamp=base + i * 1000)
    producer.flush()
    tp0, tp1 = (topic, 0), (topic, 1)
    assert consumer.offsets_for_times([tp0, tp1], base - 10) == {tp0: 0, tp1: 0}
    assert consumer.offsets_for_times([tp0], base + 2500) == {tp0: 3}
    assert consumer.offsets_for_times([tp0], base + 4000) == {tp0: 4}
    # No message at/after the timestamp: the high watermark, where the next message will land.
    assert consumer.offsets_for_times([tp0], base + 10_000) == {tp0: 5}


# -- the error policy of consume(), with a fake confluent consumer --------------------------------------


class _FakeConfluentConsumer:
    """Stands in for confluent_kafka.Consumer: `queued` is ready now, `arriving` comes during a poll wait."""

    def __init__(self, queued: list[Message]) -> None:
        self.queued = queued
        self.arriving: list[Message] = []

    def consume(self, n: int, timeout: float) -> list[Message]:
        out, self.queued = self.queued[:n], self.queued[n:]
        return out

    def poll(self, timeout: float) -> Message | None:
        self.queued += self.arriving
        self.arriving = []
        return self.queued.pop(0) if self.queued else None

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


def test_consume_waits_for_the_first_message_then_takes_the_rest() -> None:
    consumer = _consumer_with([])
    assert consumer.consume(10, 0.01) == []
    fake: Any = consumer._consumer
    fake.arriving = [_msg(0), _msg(1), _msg(2)]
    assert [m.offset() for m in consumer.consume(2, 1.0)] == [0, 1]
    assert [m.offset() for m in consumer.consume(2, 0)] == [2]
