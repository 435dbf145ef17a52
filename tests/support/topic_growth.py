"""Growing a topic's partition count on the broker, and producing to a partition it just gained."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewPartitions

from samsa.kafka import KafkaProducer


def grow(bootstrap: str, topic: str, partitions: int) -> None:
    """Adds partitions to a topic (the broker's admin API; Samsa itself never does)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, partitions)]).values():
        future.result(30)


def produce_new(bootstrap: str, topic: str, values: list[str], partition: int) -> None:
    """Produces on a new producer: a kept one knows the topic's partitions from before it grew."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap})
    try:
        for value in values:
            producer.send(topic, value.encode(), key=b"k", partition=partition)
        producer.flush()
    finally:
        producer.close()
