"""Shared test fixtures: one Kafka broker per session and fresh, self-deleting topics per test."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping

import pytest

from samsa.kafka.admin import KafkaAdmin
from samsa.kafka.embedded import EmbeddedBroker
from samsa.kafka.producer import KafkaProducer

TopicFactory = Callable[..., str]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Anything that needs the broker is an integration test: `-m "not integration"` runs the fast layer.
    for item in items:
        if "kafka_bootstrap" not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("kafka_bootstrap", "kafka") == "kafka":
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def broker_bootstrap() -> Iterator[str]:
    """Bootstrap servers: $KAFKA_BOOTSTRAP when set, else an embedded noida-db broker for the session."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture(scope="session")
def kafka_bootstrap(broker_bootstrap: str) -> str:
    """The broker's bootstrap servers (modules that import systems_fixtures also run on the in-memory one)."""
    return broker_bootstrap


@pytest.fixture(scope="session")
def session_producers(broker_bootstrap: str) -> Iterator[dict[str, KafkaProducer]]:
    """Producers kept for the session, per broker (the `produce` fixture's): a new idempotent producer that
    sends at once waits ~0.5 s for its producer id (bench/producer_start.py), and tests produce hundreds of
    times. Closed before the broker stops."""
    producers: dict[str, KafkaProducer] = {}
    yield producers
    for producer in producers.values():
        producer.close()


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> Iterator[KafkaAdmin]:
    admin = KafkaAdmin({"bootstrap.servers": kafka_bootstrap})
    yield admin
    admin.close()


@pytest.fixture
def topics(kafka_admin: KafkaAdmin, request: pytest.FixtureRequest) -> Iterator[TopicFactory]:
    """Factory `topics(n_partitions=1, config=None, name=None) -> name`: a new topic, deleted after the test.

    Names get a uuid suffix so tests never share data. Keep topics small: the dev broker rewrites all
    retained data every few seconds.
    """
    created: list[str] = []
    default_prefix = re.sub(r"[^a-zA-Z0-9._-]", "_", request.node.name)[:60]

    def make(n_partitions: int = 1, config: Mapping[str, str] | None = None, name: str | None = None) -> str:
        topic = f"{name or default_prefix}-{uuid.uuid4().hex[:10]}"
        kafka_admin.create_topic(topic, n_partitions, config)
        created.append(topic)
        return topic

    yield make
    kafka_admin.delete_topics(created)
