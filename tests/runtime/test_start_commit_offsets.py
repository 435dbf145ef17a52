"""The start-up commit of a job without durable stores: written when an input partition starts where no
checkpoint says (samza.offset.default, a stream new to task.inputs), so that a crash before the first timer
commit resumes there; left out when every partition resumes from its checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from background import wait_for
from container_pids import container_pids

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.kafka.inmemory.registry import forget
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator


@pytest.fixture
def url() -> Iterator[str]:
    found = f"inmemory://start-commit-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin({"bootstrap.servers": found}) as admin:
        admin.create_topic("a", 1)
        admin.create_topic("b", 1)
        admin.create_topic("out", 1)
    try:
        yield found
    finally:
        forget(found)


def _job(url: str, tmp_path: Path, inputs: str, default: str = "oldest") -> JobConfig:
    return JobConfig(
        Config(
            {
                "job.name": "startcommit",
                "task.class": "samsa_test_tasks:EchoTask",
                "task.inputs": inputs,
                "test.output": "out",
                "task.commit.ms": "60000",
                "systems.kafka.samza.factory": "inmemory",
                "systems.kafka.bootstrap.servers": url,
                "systems.kafka.samza.key.serde": "string",
                "systems.kafka.samza.msg.serde": "string",
                "systems.kafka.samza.offset.default": default,
                "job.logged.store.base.dir": str(tmp_path),
                "job.non-logged.store.base.dir": str(tmp_path),
            }
        )
    )


def _checkpoint_records(job: JobConfig) -> int:
    """How many task checkpoint records the job's checkpoint topic holds (not its owner record)."""
    consumer = KafkaConsumer({"bootstrap.servers": job.systems["kafka"].bootstrap_servers})
    try:
        consumer.assign({(checkpoint_topic(job.name, job.id), 0): OFFSET_BEGINNING})
        keys = [record.key() or b"" for record in consumer.consume(1000, timeout=1)]
    finally:
        consumer.close()
    return sum(1 for key in keys if json.loads(key)["taskName"])


def _commits_at_start(job: JobConfig) -> int:
    """Starts the job's container and says how many checkpoint records it wrote before its loop ran (the
    start-up commit's); then runs it to the end of its inputs and stops it (its final commit)."""
    model = JobCoordinator(job).prepare().containers[0]
    before = _checkpoint_records(job)
    container = Container(job, model, until_caught_up=True)
    loop = container.start()
    assert loop is not None
    written = _checkpoint_records(job) - before
    loop.run()
    container.finish()
    return written


def _produce(url: str, topic: str, values: list[str]) -> None:
    producer = KafkaProducer({"bootstrap.servers": url})
    for value in values:
        producer.send(topic, value.encode(), key=b"k")
    producer.close()


def test_a_stateless_first_start_commits_where_it_starts_and_a_resumed_one_does_not(
    url: str, tmp_path: Path
) -> None:
    _produce(url, "a", ["0", "1"])
    # No checkpoint yet: the partition starts at samza.offset.default, sealed by a start-up commit.
    assert _commits_at_start(_job(url, tmp_path, "kafka.a")) > 0
    # Every partition resumes from its checkpoint and no store is durable: no extra commit.
    _produce(url, "a", ["2"])
    assert _commits_at_start(_job(url, tmp_path, "kafka.a")) == 0
    # A stream new to task.inputs starts at samza.offset.default: sealed again.
    _produce(url, "b", ["3"])
    assert _commits_at_start(_job(url, tmp_path, "kafka.a,kafka.b")) > 0


def test_an_adjunct_store_stream_needs_no_start_up_commit(url: str, tmp_path: Path) -> None:
    """An adjunct store's stream starts where its store says (an in-memory store: its oldest offset), so a
    commit would not move where a restart begins: it alone writes none."""
    config = {
        **_job(url, tmp_path, "kafka.a").config,
        "stores.ref.factory": "inmemory",
        "stores.ref.key.serde": "string",
        "stores.ref.msg.serde": "string",
        "stores.ref.adstore.input": "kafka.b",
    }
    _produce(url, "a", ["0", "1"])
    _produce(url, "b", ["x", "y"])
    counts = [_commits_at_start(JobConfig(Config(config))) for _ in range(3)]
    assert counts[0] > 0 and counts[1:] == [0, 0], counts


def test_a_new_upcoming_job_killed_before_its_first_commit_processes_every_message_after_its_start(
    job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env
) -> None:
    # `upcoming` resolves to the end of the partition at the first start; without a start-up commit the
    # restart after a crash resolved it again, past the messages written meanwhile and never processed.
    inp, out = topics(2), topics(1)
    produce(inp, [("k", "before-start")])
    marker = tmp_path / "killed"
    config = job_config(
        f"kafka.{inp}",
        out,
        **{
            "task.commit.ms": 60000,
            "systems.kafka.samza.offset.default": "upcoming",
            "job.coordinator.monitor-partition-change.frequency.ms": -1,
            "test.kill.at.value": "5",
            "test.kill.marker": str(marker),
        },
    )
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    log_path = tmp_path / "supervisor.log"
    log = log_path.open("w")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "run", str(job_file)],
        env=subprocess_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: "running tasks" in log_path.read_text(), 60, "the container running")
        first = container_pids(job)["container-0"]
        produce(inp, [(f"k{i}", str(i)) for i in range(12)])
        wait_for(marker.exists, 60, "the container killed at message 5 (before its first commit)")
        wait_for(lambda: log_path.read_text().count("running tasks") == 2, 60, "the restarted container")
        assert container_pids(job)["container-0"] != first
        produce(inp, [("k", "after-restart")])
        wait_for(lambda: b"after-restart" in {r[3] for r in read_topic(out)}, 60, "the restart's output")
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0
    finally:
        if supervisor.poll() is None:
            os.kill(supervisor.pid, signal.SIGKILL)
            supervisor.wait()
        log.close()
    processed = {r[3] for r in read_topic(out)}
    never = sorted(i for i in range(12) if str(i).encode() not in processed)
    assert not never, f"messages written after the job started that were never processed: {never}"
    assert b"before-start" not in processed
