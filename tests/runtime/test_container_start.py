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


def test_the_checkpoint_producer_registers_and_commits_without_waiting_on_connection_timers(
    job_config, topics, kafka_bootstrap
) -> None:
    # Every start registers the container's transactional checkpoint producer (init_transactions: the
    # fencing of older starts), and the start-up commit waits for its first transaction. With librdkafka's
    # sparse connections that waited for its connection timers: 53 ms at every start, 503 ms one in three.
    job = JobConfig(Config(job_config(f"kafka.{topics(1)}", topics(1))))
    container = Container(job, JobCoordinator(job).prepare().containers[0])
    config = container._checkpoint_client_config()
    assert config["transactional.id"] == f"samsa-checkpoint-{job.job_key}-container-0"
    topic = topics(1)
    took = []
    for _ in range(3):  # each a new start of the container
        producer = KafkaProducer(config)
        try:
            started = time.monotonic()
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"checkpoint", key=b"task", partition=0)
            producer.commit_transaction()
            took.append(time.monotonic() - started)
        finally:
            producer.close()
    assert min(took) < 0.04 and max(took) < 0.45, took
