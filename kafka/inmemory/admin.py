"""The in-memory admin client: the part of confluent_kafka's AdminClient that samsa.kafka.KafkaAdmin calls."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin._config import ConfigEntry, ConfigResource
from confluent_kafka.admin._metadata import ClusterMetadata, PartitionMetadata, TopicMetadata
from confluent_kafka.cimpl import NewTopic

from samsa.kafka.inmemory.log import Log, error, unknown_topic
from samsa.kafka.inmemory.registry import broker


def cluster_metadata(log: Log, topic: str | None) -> ClusterMetadata:
    """The broker's topics (or the one named) as confluent-kafka's list_topics answers."""
    meta = ClusterMetadata()
    meta.cluster_id = log.url  # type: ignore[assignment]
    for name, count in log.partition_counts().items():
        if topic is not None and name != topic:
            continue
        t = TopicMetadata()
        t.topic = name
        for p in range(count):
            pm = PartitionMetadata()
            pm.id = p
            t.partitions[p] = pm
        meta.topics[name] = t
    return meta


def _done(value: object = None, exc: KafkaException | None = None) -> Future[Any]:
    future: Future[Any] = Future()
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)
    return future


class InMemoryAdminClient:
    """Topic administration of an in-memory broker; every call completes before its futures are returned."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._log = broker(str(config["bootstrap.servers"]))

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return cluster_metadata(self._log, topic)

    def create_topics(self, new_topics: list[NewTopic], **kwargs: Any) -> dict[str, Future[Any]]:
        out = {}
        for new in new_topics:
            name, count = new.topic, new.num_partitions
            if count < 1:
                failure = error(KafkaError.INVALID_PARTITIONS, f"topic {name!r}: {count} partitions")
                out[name] = _done(exc=failure)
            elif self._log.create_topic(name, count, {k: str(v) for k, v in (new.config or {}).items()}):
                out[name] = _done()
            else:
                exists = error(KafkaError.TOPIC_ALREADY_EXISTS, f"Topic {name!r} already exists.")
                out[name] = _done(exc=exists)
        return out

    def delete_topics(self, topics: list[str], **kwargs: Any) -> dict[str, Future[Any]]:
        return {
            name: _done() if self._log.delete_topic(name) else _done(exc=unknown_topic(name, self._log.url))
            for name in topics
        }

    def describe_configs(
        self, resources: list[ConfigResource], **kwargs: Any
    ) -> dict[ConfigResource, Future[Any]]:
        out = {}
        for resource in resources:
            config = self._log.topic_config(resource.name)
            if config is None:
                out[resource] = _done(exc=unknown_topic(resource.name, self._log.url))
            else:
                out[resource] = _done({k: ConfigEntry(k, v) for k, v in config.items()})
        return out

    def poll(self, timeout: float = 0) -> int:
        return 0
