"""Fixtures of the serde tests: a fake schema registry served over real HTTP."""

from collections.abc import Iterator

import pytest

from samsa.serde.testing import FakeSchemaRegistry


@pytest.fixture
def fake_registry() -> Iterator[FakeSchemaRegistry]:
    with FakeSchemaRegistry() as registry:
        yield registry
