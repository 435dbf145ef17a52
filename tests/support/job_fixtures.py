"""Fixtures for runtime tests against the real broker: job configs, producing, reading, running."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.kafka.inmemory import is_inmemory
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator, coordinator_topic

SUPPORT = Path(__file__).resolve().parent
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """Environment for container subprocesses: the test tasks importable."""
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SUPPORT), env.get("PYTHONPATH", "")) if p)
    return env


@pytest.fixture
def job_config(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, tmp_path: Path
) -> Iterator[Callable[..., dict[str, str]]]:
    """Factory of job-config dicts with a unique job name; deletes the job's internal topics afterwards."""
    made: list[dict[str, str]] = []

    def make(
        inputs: str, output: str, task: str = "samsa_test_tasks:EchoTask", **extra: Any
    ) -> dict[str, str]:
        config = {
            "job.name": f"test-{uuid.uuid4().hex[:8]}",
            "task.class": task,
            "task.inputs": inputs,
            "test.output": output,
            "task.commit.ms": "1000",
            "systems.kafka.samza.factory": "inmemory" if is_inmemory(kafka_bootstrap) else "kafka",
            "systems.kafka.bootstrap.servers": kafka_bootstrap,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "string",
            "systems.kafka.samza.offset.default": "oldest",
            "job.non-logged.store.base.dir": str(tmp_path / "state"),
            "job.logged.store.base.dir": str(tmp_path / "state"),
        }
        config.update({k.replace("__", "."): str(v) for k, v in extra.items()})
        made.append(config)
        return config

    yield make
    internal = []
    for config in made:
        job = JobConfig(Config(config))
        internal += [checkpoint_topic(job.name, job.id), coordinator_topic(job), f"samsa-dlq-{job.job_key}"]
    existing = kafka_admin.partition_counts(internal)
    kafka_admin.delete_topics([t for t, n in existing.items() if n is not None])


@pytest.fixture
def produce(kafka_bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., None]:
    """produce(topic, [(key, value), ...], partition=None): string keys/values, flushed."""
    # In-memory systems are one per test (and need no broker): only a broker's producer is kept.
    shared = not is_inmemory(kafka_bootstrap)
    kept: dict[str, KafkaProducer] = request.getfixturevalue("session_producers") if shared else {}

    def send(
        topic: str, records: list[tuple[str | bytes | None, str | bytes | None]], partition: int | None = None
    ) -> None:
        producer = kept.pop(kafka_bootstrap, None) or KafkaProducer({"bootstrap.servers": kafka_bootstrap})
        try:
            for key, value in records:
                k = key.encode() if isinstance(key, str) else key
                v = value.encode() if isinstance(value, str) else value
                producer.send(topic, v, key=k, partition=partition)
            producer.flush()
        except BaseException:
            # A failure sticks to a producer: the next call starts afresh; this one is dropped unflushed.
            with contextlib.suppress(Exception):
                producer.close(0)
            raise
        if shared:
            kept[kafka_bootstrap] = producer
        else:
            producer.close()

    return send


@pytest.fixture
def read_topic(kafka_bootstrap: str) -> Callable[..., list[tuple[int, int, bytes | None, bytes | None]]]:
    """read_topic(topic) -> [(partition, offset, key, value)] of everything up to the high watermark."""

    def read(topic: str, headers: bool = False) -> list[Any]:
        consumer = KafkaConsumer({"bootstrap.servers": kafka_bootstrap})
        admin = KafkaAdmin({"bootstrap.servers": kafka_bootstrap})
        try:
            partitions = admin.require_topics([topic])[topic]
            ends = {(topic, p): consumer.watermarks((topic, p))[1] for p in range(partitions)}
            consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
            out: list[Any] = []
            remaining = {tp for tp, end in ends.items() if end > 0}
            deadline = time.monotonic() + 30
            while remaining and time.monotonic() < deadline:
                for m in consumer.consume(1000, 0.2):
                    row = (m.partition(), m.offset(), m.key(), m.value())
                    out.append((*row, m.headers()) if headers else row)
                    if m.offset() >= ends[(topic, m.partition())] - 1:
                        remaining.discard((topic, m.partition()))
            assert not remaining, f"could not read {topic} to its end"
            return out
        finally:
            consumer.close()
            admin.close()

    return read


def run_in_process(
    config: Mapping[str, str], container_id: str | None = None, until_caught_up: bool = True
) -> list[Container]:
    """Runs each container (or one) of the job in this process, one after another, until caught up."""
    job = JobConfig(Config(config))
    model = JobCoordinator(job).prepare()
    ran = []
    for c in model.containers:
        if container_id is None or c.id == container_id:
            container = Container(job, c, until_caught_up=until_caught_up)
            container.run()
            ran.append(container)
    return ran


@pytest.fixture
def run_job() -> Callable[..., list[Container]]:
    return run_in_process
