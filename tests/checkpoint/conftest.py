"""Job fixtures (configs, producing, reading, running) shared by the runtime, deploy and checkpoint tests, and
a checkpoint manager on a fresh checkpoint topic of the session broker."""

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce, read_topic, run_job, subprocess_env

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.kafka import KafkaProducer

__all__ = ["job_config", "produce", "read_topic", "run_job", "subprocess_env"]


@pytest.fixture
def manager(kafka_bootstrap: str, topics: Callable[..., str]) -> Iterator[KafkaCheckpointManager]:
    """A checkpoint manager of a fresh compacted checkpoint topic (a module's own `manager` overrides it)."""
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    topic = topics(1, {"cleanup.policy": "compact"})
    yield KafkaCheckpointManager(topic, {"bootstrap.servers": kafka_bootstrap}, producer)
    producer.close()
