"""Headers as confluent-kafka takes them, on Kafka and on both in-memory brokers alike: a dict or (key, value)
pairs, a str value sent as UTF-8 (so it reads back as bytes everywhere), other value types refused; and
the producer's partition count of a topic."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa import StreamTask
from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.kafka.inmemory import forget
from samsa.testing import Message, TestRunner


@pytest.fixture(
    params=[pytest.param("kafka", marks=pytest.mark.integration), "inmemory-process", "inmemory-file"]
)
def bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "kafka":
        yield request.getfixturevalue("broker_bootstrap")
        return
    if request.param == "inmemory-file":
        yield f"inmemory://{tmp_path / 'broker'}"
        return
    url = f"inmemory://headers-{uuid.uuid4().hex}"
    yield url
    forget(url)


@pytest.fixture
def topic(bootstrap: str) -> Iterator[str]:
    """A new topic of 2 partitions, deleted after the test."""
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    name = f"header-forms-{uuid.uuid4().hex[:10]}"
    admin.create_topic(name, 2)
    yield name
    admin.delete_topics([name])
    admin.close()


@pytest.fixture
def producer(bootstrap: str) -> Iterator[KafkaProducer]:
    p = KafkaProducer({"bootstrap.servers": bootstrap})
    yield p
    p.close()


def _headers_read_back(bootstrap: str, topic: str, count: int) -> list[Any]:
    """The headers of the first `count` records of partition 0, in order."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
    try:
        consumer.assign({(topic, 0): OFFSET_BEGINNING})
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            got += [m.headers() for m in consumer.consume(100, 0.2)]
        return got
    finally:
        consumer.close()


def test_dict_headers_and_str_values_read_back_as_kafka_gives_them(
    bootstrap: str, topic: str, producer: KafkaProducer
) -> None:
    producer.send(topic, b"v", b"k", 0, {"h": b"1", "s": "str", "n": None})  # type: ignore[dict-item]
    producer.send(topic, b"v", b"k", 0, [("s", "é"), ("h", b"2")])  # type: ignore[list-item]
    producer.send(topic, b"v", b"k", 0, (("t", b"3"),))
    producer.flush()
    assert _headers_read_back(bootstrap, topic, 3) == [
        [("h", b"1"), ("s", b"str"), ("n", None)],
        [("s", "é".encode()), ("h", b"2")],
        [("t", b"3")],
    ]


def test_a_header_value_of_another_type_is_refused_at_the_send(topic: str, producer: KafkaProducer) -> None:
    with pytest.raises(
        TypeError, match="expected header value to be None, binary, or unicode string, not int"
    ):
        producer.send(topic, b"v", b"k", 0, [("h", 1)])  # type: ignore[list-item]


def test_a_header_pair_given_as_a_list_is_refused_at_the_send(topic: str, producer: KafkaProducer) -> None:
    # confluent-kafka takes tuples only: a test on the in-memory system must not pass what Kafka refuses.
    with pytest.raises(TypeError, match=r"Headers are expected to be a list of \(key, value\) tuples"):
        producer.send(topic, b"v", b"k", 0, [["h", b"1"]])  # type: ignore[list-item]


def test_no_headers_read_back_as_none(bootstrap: str, topic: str, producer: KafkaProducer) -> None:
    producer.send(topic, b"v", b"k", 0, [])
    producer.send(topic, b"v", b"k", 0, {})
    producer.send(topic, b"v", b"k", 0)
    producer.flush()
    assert _headers_read_back(bootstrap, topic, 3) == [None, None, None]


def test_the_producer_reads_a_topics_partition_count(topic: str, producer: KafkaProducer) -> None:
    assert producer.partition_count(topic) == 2


def test_an_in_memory_topic_that_does_not_exist_has_no_partition_count() -> None:
    url = f"inmemory://headers-{uuid.uuid4().hex}"
    try:
        with KafkaProducer({"bootstrap.servers": url}) as p:
            started = time.monotonic()
            assert p.partition_count("nowhere") is None
            assert time.monotonic() - started < 1
    finally:
        forget(url)


class RecordHeaders(StreamTask):
    """Records each input's headers."""

    seen: list[Any] = []

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        RecordHeaders.seen.append(envelope.headers)


def test_a_test_runner_input_with_str_header_values_reaches_the_task_as_bytes() -> None:
    RecordHeaders.seen.clear()
    with TestRunner.of(RecordHeaders) as runner:
        runner.add_input("in", [Message("v", key="k", headers=[("s", "str"), ("b", b"1")])]).run(timeout=10)  # type: ignore[list-item]
    assert [list(h or ()) for h in RecordHeaders.seen] == [[("s", b"str"), ("b", b"1")]]
