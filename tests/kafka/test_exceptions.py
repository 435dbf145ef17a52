"""Kafka errors: all SamsaErrors, and their messages name what is at fault and the fix."""

from __future__ import annotations

from samsa.exceptions import SamsaError
from samsa.kafka import (
    BrokerStartError,
    KafkaSystemError,
    ProducerDeliveryError,
    TopicMismatchError,
    TopicNotFoundError,
    TransactionError,
)


def test_hierarchy() -> None:
    for cls in (
        TopicNotFoundError,
        TopicMismatchError,
        ProducerDeliveryError,
        BrokerStartError,
        TransactionError,
    ):
        assert issubclass(cls, KafkaSystemError)
    assert issubclass(KafkaSystemError, SamsaError)


def test_mismatch_names_topic_values_and_fix() -> None:
    e = TopicMismatchError("orders", "partitions", 8, 4, "Recreate it.")
    assert (e.topic, e.expected, e.actual) == ("orders", 8, 4)
    assert str(e) == "Topic 'orders' has partitions=4 but partitions=8 is required. Recreate it."


def test_delivery_error_names_topic_partition_and_broker_error() -> None:
    e = ProducerDeliveryError("out", 2, "MSG_SIZE_TOO_LARGE", "Broker: Message size too large", failures=3)
    assert "'out' partition 2" in str(e) and "MSG_SIZE_TOO_LARGE" in str(e) and "2 more" in str(e)
    assert "(no partition)" in str(ProducerDeliveryError("out", -1, "X", "y"))


def test_not_found_lists_every_missing_topic_sorted() -> None:
    e = TopicNotFoundError(["b", "a"], "h:9092")
    assert e.topics == ["a", "b"]
    assert "'a', 'b'" in str(e) and "h:9092" in str(e)


def test_not_found_says_how_to_create_a_topic_where_kafka_topics_is_not_at_hand() -> None:
    # The README's job on the embedded broker (or an inmemory: system) has no kafka-topics tool.
    text = str(TopicNotFoundError(["words", "wordcount-counts"], "127.0.0.1:9092"))
    assert "kafka-topics --create" in text
    assert (
        "samsa.kafka.KafkaAdmin({'bootstrap.servers': '127.0.0.1:9092'}).create_topic('wordcount-counts', "
        "<partitions>)" in text
    )
    assert "embedded dev broker and the inmemory system" in text


def test_transaction_error_advice() -> None:
    abortable = TransactionError("commit_transaction", "X", requires_abort=True, retriable=False, fatal=False)
    assert "Abort the transaction" in str(abortable) and abortable.requires_abort
    fatal = TransactionError(
        "commit_transaction", "fenced", requires_abort=False, retriable=False, fatal=True
    )
    assert "new one" in str(fatal)
