"""Helpers for tests of topics deleted and recreated (or truncated) while a job is down."""

from __future__ import annotations

import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from samsa.kafka import KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.stores.changelog.settings import ChangelogSettings


def recreate(
    admin: KafkaAdmin, topic: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    """Deletes `topic` and creates it again, empty (with `config`), once the deletion is through."""
    admin.delete_topics([topic])
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create_topic(topic, partitions, config)
            return
        except Exception:
            # The deletion is not through yet.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def recreate_changelog(admin: KafkaAdmin, changelog: str) -> None:
    """Deletes a one-partition changelog and creates it again, empty, as a start creates a missing one."""
    recreate(admin, changelog, 1, ChangelogSettings().topic_config())


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The end (high watermark) of one partition of `topic`."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
    try:
        return consumer.watermarks((topic, partition))[1]
    finally:
        consumer.close()


def produce_fresh(
    bootstrap: str, topic: str, rows: list[tuple[str, str]], partition: int | None = None
) -> None:
    """Produces on a new producer: a session's idempotent one keeps sequence numbers of the deleted topic's
    partition, which the recreated one refuses."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap})
    for key, value in rows:
        producer.send(topic, value.encode(), key=key.encode())
    producer.close()


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Moves the partition's low watermark up to `offset`, as retention does."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(30)
