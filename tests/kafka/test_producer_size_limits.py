"""A record too large: refused by the producer's own message.max.bytes or by the topic's max.message.bytes,
each error naming the limit actually hit, its key, and the record's size and topic."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.exceptions import InvalidConfigError
from samsa.kafka import KafkaProducer, MessageTooLargeError, ProducerDeliveryError

TopicFactory = Callable[..., str]


def test_a_record_over_the_producers_limit_names_that_limit_not_the_topics(
    topics: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topics(1, config={"max.message.bytes": "20000000"})
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 1_200_000})
    producer.name_settings("systems.big.producer.")
    try:
        with pytest.raises(MessageTooLargeError) as caught:
            producer.send(topic, b"x" * 1_500_000, key=b"key", headers=[("h", b"vv")])
        text = str(caught.value)
        assert f"topic {topic!r}" in text
        assert "The record is 1500006 bytes" in text
        assert "message.max.bytes=1200000" in text and "systems.big.producer.message.max.bytes" in text
        assert "the topic's max.message.bytes must allow it too" in text
        assert isinstance(caught.value, InvalidConfigError)
        assert unmendable_exit(caught.value) == CONFIG_ERROR_EXIT
        producer.send(topic, b"small", partition=0)  # refused before queueing: the producer goes on
    finally:
        producer.close()


def test_without_a_named_system_the_key_is_given_as_a_pattern(
    topics: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topics(1)
    key = r"systems\.<sys>\.producer\.message\.max\.bytes"
    with (
        KafkaProducer({"bootstrap.servers": kafka_bootstrap}) as producer,
        pytest.raises(MessageTooLargeError, match=key),
    ):
        producer.send(topic, b"x" * 1_100_000)


def test_a_record_the_broker_refuses_names_the_topics_limit_and_the_topics_note(
    topics: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topics(1, config={"max.message.bytes": "200"})
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    producer.name_settings("systems.kafka.producer.")
    producer.note_topic(
        topic, "It is the changelog of store 's': raise stores.s.changelog.kafka.max.message.bytes."
    )
    producer.send(topic, b"x" * 1000, partition=0)
    producer.send(topic, b"y" * 1000, partition=0)
    with pytest.raises(MessageTooLargeError) as caught:
        producer.flush(10)
    text = str(caught.value)
    assert caught.value.partition == 0 and f"topic {topic!r} partition 0" in text
    assert "The broker refused the record (1000 bytes" in text
    assert f"kafka-configs --alter --entity-type topics --entity-name {topic}" in text
    assert "stores.s.changelog.kafka.max.message.bytes" in text
    assert "systems.kafka.producer" not in text, "the producer's own limit was not the one hit"
    assert unmendable_exit(caught.value) == CONFIG_ERROR_EXIT
    with pytest.raises(ProducerDeliveryError):
        producer.close(1)


def test_a_counted_failure_keeps_its_kind_and_advice() -> None:
    first = MessageTooLargeError("t", 0, "MSG_SIZE_TOO_LARGE", "too large", advice="Raise X.")
    later = first.counted(3)
    assert isinstance(later, MessageTooLargeError) and later.failures == 3
    assert "Raise X." in str(later) and "2 more message(s) failed too" in str(later)
