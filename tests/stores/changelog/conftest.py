"""Changelog backend fixtures: a producer, a factory over one changelog topic, and a task's store context."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.kafka import KafkaProducer
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.settings import ChangelogSettings

STORE = "counts"

# The restore tests share a task driver (tests/support/changelog_task.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))


@pytest.fixture
def producer(kafka_bootstrap: str) -> Iterator[KafkaProducer]:
    p = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    yield p
    p.close()


@pytest.fixture
def changelog(topics: Callable[..., str]) -> str:
    """A fresh changelog topic configured as the admin creates them (compacted, 4 h compaction lag)."""
    return topics(1, ChangelogSettings().topic_config(), name="changelog")


@pytest.fixture
def factory(
    producer: KafkaProducer, kafka_bootstrap: str, changelog: str
) -> Iterator[ChangelogBackendFactory]:
    f = ChangelogBackendFactory(
        producer, lambda system: {"bootstrap.servers": kafka_bootstrap}, {STORE: ("kafka", changelog)}
    )
    yield f
    f.close()


def _task_context(tmp_path: Path, changelog: str, factory: str = "rocksdb") -> TaskStoresContext:
    return TaskStoresContext(
        job_key="job-1",
        task_name="Partition 0",
        changelog_partition=0,
        store_dirs={STORE: tmp_path / "job-1" / "Partition_0" / STORE},
        store_configs={STORE: {"factory": factory, "changelog": f"kafka.{changelog}"}},
    )


@pytest.fixture
def context(tmp_path: Path, changelog: str) -> TaskStoresContext:
    """Task `Partition 0` with one RocksDB store `counts` logged to `changelog`."""
    return _task_context(tmp_path, changelog)


@pytest.fixture
def memory_context(tmp_path: Path, changelog: str) -> TaskStoresContext:
    """The same task with `counts` an in-memory store."""
    return _task_context(tmp_path, changelog, "inmemory")
