"""Samsa's Kafka layer: the only code that talks to confluent_kafka (consumer, producer, admin)."""

from samsa.kafka.admin import KafkaAdmin
from samsa.kafka.config import client_config
from samsa.kafka.consumer import KafkaConsumer
from samsa.kafka.exceptions import (
    BrokerStartError,
    KafkaConfigError,
    KafkaSystemError,
    MessageTooLargeError,
    ProducerDeliveryError,
    TopicMismatchError,
    TopicNotFoundError,
    TransactionError,
)
from samsa.kafka.message import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    RawMessage,
    SimpleMessage,
    TopicPartition,
)
from samsa.kafka.producer import KafkaProducer

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "BrokerStartError",
    "KafkaAdmin",
    "KafkaConfigError",
    "KafkaConsumer",
    "KafkaProducer",
    "KafkaSystemError",
    "MessageTooLargeError",
    "ProducerDeliveryError",
    "RawMessage",
    "SimpleMessage",
    "TopicMismatchError",
    "TopicNotFoundError",
    "TopicPartition",
    "TransactionError",
    "client_config",
]
