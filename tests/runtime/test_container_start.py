"""A container at start: its heap frozen while the loop runs, a checkpoint producer ready at once."""

from __future__ import annotations

import gc
import time
import uuid
from pathlib import Path

from samsa_test_tasks import HeapProbeTask

from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.inmemory.registry import forget
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator


def test_the_startup_heap_is_frozen_while_the_loop_runs_and_unfrozen_after(tmp_path: Path) -> None:
    url = f"inmemory://heap-{uuid.uuid4().hex[:8]}"
    try:
        with KafkaAdmin({"bootstrap.servers": url}) as admin:
            admin.create_topic("in", 1)
        producer = KafkaProducer({"bootstrap.servers": url})
        for i in range(5):
            producer.send("in", str(i).encode(), key=b"k")
        producer.close()
        job = JobConfig(
            Config(
                {
                    "job.name": "heap",
                    "task.class": "samsa_test_tasks:HeapProbeTask",
                    "task.inputs": "kafka.in",
                    "systems.kafka.samza.factory": "inmemory",
                    "systems.kafka.bootstrap.servers": url,
                    "systems.kafka.samza.offset.default": "oldest",
                    "job.logged.store.base.dir": str(tmp_path),
                    "job.non-logged.store.base.dir": str(tmp_path),
                }
            )
        )
        model = JobCoordinator(job).prepare().containers[0]
        HeapProbeTask.FROZEN.clear()
        before = gc.get_freeze_count()
        Container(job, model, until_caught_up=True).run()
        assert len(HeapProbeTask.FROZEN) == 5
        # Everything alive when the loop started is frozen (far more than the test's own objects)...
        assert min(HeapProbeTask.FROZEN) > before + 10_000
        # ...and handed back to the collector once the loop ends.
        assert gc.get_freeze_count() == before
    finally:
        forget(url)


def test_the_checkpoint_producer_delivers_its_first_record_without_waiting_for_a_producer_id(
    job_config, topics, kafka_bootstrap
) -> None:
    # A new idempotent producer holds its records until librdkafka has a producer id (a 500 ms timer,
    # often twice): the start-up commit, which waits for its checkpoint records, paid that at every start.
    job = JobConfig(Config(job_config(f"kafka.{topics(1)}", topics(1))))
    container = Container(job, JobCoordinator(job).prepare().containers[0])
    config = container._checkpoint_client_config()
    assert config.get("enable.idempotence") is False
    topic = topics(1)
    producer = KafkaProducer(config)
    try:
        started = time.monotonic()
        producer.send(topic, b"checkpoint", key=b"task", partition=0)
        producer.flush()
        assert time.monotonic() - started < 0.45
    finally:
        producer.close()
