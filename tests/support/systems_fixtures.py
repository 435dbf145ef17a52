"""Run a test module on Kafka and on the in-memory system: import both fixtures into the module.

    import systems_fixtures
    kafka_bootstrap = systems_fixtures.kafka_bootstrap
    kafka_admin = systems_fixtures.kafka_admin

Each test then runs twice, `[kafka]` on the session's broker and `[inmemory]` on a fresh in-memory broker:
in this process, or file-backed in a temporary directory when the test starts containers in subprocesses
(it asks for `subprocess_env`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from samsa.kafka import KafkaAdmin
from samsa.kafka.inmemory import forget

SYSTEMS = ["kafka", "inmemory"]


@pytest.fixture(params=SYSTEMS)
def kafka_bootstrap(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "kafka":
        yield request.getfixturevalue("broker_bootstrap")
        return
    if "subprocess_env" in request.fixturenames:
        yield f"inmemory://{tmp_path_factory.mktemp('inmemory-kafka')}"
        return
    url = f"inmemory://test-{uuid.uuid4().hex}"
    yield url
    forget(url)


@pytest.fixture
def kafka_admin(kafka_bootstrap: str) -> Iterator[KafkaAdmin]:
    admin = KafkaAdmin({"bootstrap.servers": kafka_bootstrap})
    yield admin
    admin.close()
