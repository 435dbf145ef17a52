"""Input partitions added while a job runs: the local supervisor notices (every
job.coordinator.monitor-partition-change.frequency.ms), stops the containers with a final commit and
restarts the job with a new job model; a job with durable stores stops instead, failed (as Samza)."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pytest
from background import MINIMAL_JOB, wait_for
from topic_growth import grow, produce_new

from samsa.kafka import TopicNotFoundError
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.partition_monitor import (
    FREQUENCY_KEY,
    PartitionCountMonitor,
    describe,
    durable_stores,
    monitor_interval_s,
)
from samsa.streams import SystemStream

A = SystemStream("kafka", "a")
B = SystemStream("kafka", "b")


class _Counts:
    """A fetch returning the counts given, one per call (the last one again), raising an exception given."""

    def __init__(self, *answers: Mapping[SystemStream, int] | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.done = threading.Event()

    def __call__(self) -> Mapping[SystemStream, int]:
        self.calls += 1
        answer = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        if len(self.answers) == 1:
            self.done.set()
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_the_monitor_reports_the_first_stream_whose_partition_count_changed() -> None:
    fetch = _Counts({A: 2, B: 1}, {A: 2, B: 1}, {A: 3, B: 1})
    monitor = PartitionCountMonitor({A: 2, B: 1}, fetch, 0.01).start()
    wait_for(lambda: bool(monitor.changes), 10, "a change")
    assert monitor.changes == {A: (2, 3)}
    assert describe(monitor.changes) == "kafka.a: 2 -> 3 partitions"
    calls = fetch.calls
    threading.Event().wait(0.1)
    assert fetch.calls == calls, "the watch ends at the first change"


def test_the_monitor_keeps_looking_while_the_broker_is_away_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fetch = _Counts(RuntimeError("broker away"), RuntimeError("broker away"), {A: 2}, {A: 2})
    with caplog.at_level(logging.WARNING, "samsa.runtime.partition_monitor"):
        monitor = PartitionCountMonitor({A: 2}, fetch, 0.01).start()
        fetch.done.wait(10)
        threading.Event().wait(0.05)
        monitor.stop()
    assert not monitor.changes
    (record,) = caplog.records
    assert "broker away" in record.getMessage()
    assert "job.coordinator.monitor-partition-change.frequency.ms" in record.getMessage()


def test_an_input_deleted_while_the_job_runs_is_named_as_deleted_once_not_given_start_up_advice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = TopicNotFoundError(["a"], "broker:9092")
    fetch = _Counts({A: 2, B: 1}, gone, gone, gone, {A: 2, B: 1})
    with caplog.at_level(logging.WARNING, "samsa.runtime.partition_monitor"):
        monitor = PartitionCountMonitor({A: 2, B: 1}, fetch, 0.01).start()
        fetch.done.wait(10)
        threading.Event().wait(0.05)
        monitor.stop()
    assert not monitor.changes, "a deleted input is no partition change: the job keeps running"
    (record,) = caplog.records
    message = record.getMessage()
    assert "input stream kafka.a was deleted while the job ran" in message
    assert "its 2 partitions receive nothing" in message
    assert "recreate topic 'a' with 2 partitions" in message and "remove kafka.a from task.inputs" in message
    assert "Create them first" not in message


def test_the_frequency_key_is_samzas_and_minus_one_turns_the_monitor_off() -> None:
    key = "job.coordinator.monitor-partition-change.frequency.ms"
    assert monitor_interval_s(JobConfig(Config(MINIMAL_JOB))) == 60.0
    assert monitor_interval_s(JobConfig(Config({**MINIMAL_JOB, key: "500"}))) == 0.5
    assert monitor_interval_s(JobConfig(Config({**MINIMAL_JOB, key: "-1"}))) is None


@pytest.mark.parametrize(("value", "interval"), [("true", 0.5), ("false", None)])
def test_samzas_switch_turns_the_monitor_off_with_false(value: str, interval: float | None) -> None:
    """A ported Samza job sets `job.coordinator.monitor-partition-change` (off by default in Samza): true
    keeps the watch Samsa runs anyway, false turns it off."""
    keys = {"job.coordinator.monitor-partition-change": value, FREQUENCY_KEY: "500"}
    assert monitor_interval_s(JobConfig(Config({**MINIMAL_JOB, **keys}))) == interval


def test_durable_stores_are_those_with_a_backup() -> None:
    stores = {
        "stores.logged.factory": "rocksdb",
        "stores.logged.changelog": "kafka.logged-changelog",
        "stores.scratch.factory": "inmemory",
    }
    assert durable_stores(JobConfig(Config({**MINIMAL_JOB, **stores}))) == ["logged"]


# -- the supervisor on the broker ---------------------------------------------------------------------
def _start(
    config: dict[str, str], tmp_path: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], Path]:
    job_file = tmp_path / "job.yaml"  # JSON is YAML
    job_file.write_text(json.dumps(config))
    log = tmp_path / "supervisor.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli", "run", str(job_file)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, log


def test_a_partition_added_while_the_job_runs_is_read_after_the_supervisor_restarts_the_job(
    broker_bootstrap, job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env
):
    inp, out = topics(2), topics(1)
    config = job_config(
        f"kafka.{inp}",
        out,
        **{
            "job.container.count": "2",
            "task.commit.ms": "500",
            "systems.kafka.samza.offset.default": "upcoming",
            "job.coordinator.monitor-partition-change.frequency.ms": "500",
        },
    )
    supervisor, log = _start(config, tmp_path, subprocess_env)
    try:
        wait_for(lambda: "running tasks" in log.read_text(), 60, "the containers running")
        produce(inp, [("k", "a"), ("k", "b")], partition=0)
        wait_for(lambda: len(read_topic(out)) == 2, 60, "the first outputs")
        grow(broker_bootstrap, inp, 3)
        produce_new(broker_bootstrap, inp, ["new-0", "new-1", "new-2"], partition=2)
        wait_for(lambda: len(read_topic(out)) == 5, 60, "the new partition's messages processed")
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0, log.read_text()
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    text = log.read_text()
    assert f"kafka.{inp}: 2 -> 3 partitions" in text
    assert "restarting the job with a new job model" in text
    # Stopped with a final commit, then restarted: nothing lost, nothing processed twice.
    outputs = Counter((k.decode(), v.decode()) for _, _, k, v in read_topic(out))
    assert outputs == Counter(
        {("0:0", "a"): 1, ("0:1", "b"): 1, ("2:0", "new-0"): 1, ("2:1", "new-1"): 1, ("2:2", "new-2"): 1}
    )


def test_a_job_with_durable_stores_stops_failed_when_an_input_grows(
    broker_bootstrap, kafka_admin, job_config, topics, tmp_path: Path, subprocess_env
):
    inp, out = topics(2), topics(1)
    config = job_config(
        f"kafka.{inp}",
        out,
        task="samsa_test_tasks:CountTask",
        **{
            "stores.counts.factory": "inmemory",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "integer",
            "stores.counts.changelog": f"kafka.{inp}-changelog",
            "job.coordinator.monitor-partition-change.frequency.ms": "500",
        },
    )
    supervisor, log = _start(config, tmp_path, subprocess_env)
    try:
        wait_for(lambda: "running tasks" in log.read_text(), 60, "the containers running")
        grow(broker_bootstrap, inp, 3)
        assert supervisor.wait(timeout=60) == 1, log.read_text()
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
        kafka_admin.delete_topics([f"{inp}-changelog"])
    text = log.read_text()
    assert f"kafka.{inp}: 2 -> 3 partitions" in text
    assert "durable stores (counts)" in text and "docs/running.md" in text
    assert "restarting the job" not in text
