"""Fixtures of the in-memory system's tests: a fresh broker in each mode (in-process and file-backed)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.kafka import KafkaAdmin, KafkaConsumer, KafkaProducer, KafkaSystemError
from samsa.kafka.inmemory import forget


@pytest.fixture(params=["process", "file"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """inmemory://NAME (this process) or inmemory:///DIR (file-backed), empty."""
    if request.param == "file":
        yield f"inmemory://{tmp_path / 'broker'}"
        return
    name = f"inmemory://unit-{uuid.uuid4().hex}"
    yield name
    forget(name)


@pytest.fixture
def admin(url: str) -> Iterator[KafkaAdmin]:
    a = KafkaAdmin({"bootstrap.servers": url})
    yield a
    a.close()


@pytest.fixture
def clients(url: str) -> Iterator[Callable[..., Any]]:
    """clients(kind, **config) -> a KafkaConsumer or KafkaProducer on the broker, closed after the test."""
    made: list[Any] = []

    def make(kind: str, **config: Any) -> Any:
        conf = {"bootstrap.servers": url, **{k.replace("_", "."): v for k, v in config.items()}}
        client = KafkaConsumer(conf) if kind == "consumer" else KafkaProducer(conf)
        made.append(client)
        return client

    yield make
    for client in made:
        # A fenced producer refuses to flush on close; the test already checked what it needed.
        with contextlib.suppress(KafkaSystemError):
            client.close()
