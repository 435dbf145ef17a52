"""The Spark deployment on real Spark (local mode, one context for the module) and the real broker."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from background import MINIMAL_JOB, Background, wait_for
from count_job import WORDS, count_job, final_counts, run_cli
from topic_growth import grow, produce_new

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.deploy.control import ControlServer
from samsa.deploy.spark import Spark
from samsa.deploy.spark_supervisor import SparkSupervisor, spark_conf
from samsa.kafka import KafkaConsumer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config
from samsa.streams import SystemStream

SLOTS = 4
MONITOR_KEY = "job.coordinator.monitor-partition-change.frequency.ms"


@pytest.fixture(scope="module")
def spark() -> Iterator[Spark]:
    """One Spark context for the module (a start costs seconds): a slot per container of every test."""
    handle = Spark("samsa-test-deploy", f"local[{SLOTS},1]", spark_conf(JobConfig(Config(MINIMAL_JOB))))
    yield handle
    handle.stop()


@pytest.fixture
def changelog(kafka_admin, topics) -> Iterator[str]:
    """A changelog topic name: the job creates the topic (compacted, as it needs it); deleted afterwards."""
    name = f"{topics(1)}-changelog"
    yield name
    kafka_admin.delete_topics([name])


def _words(n: int, seed: int = 0) -> list[tuple[str, str]]:
    return [(WORDS[(i * 7 + seed) % len(WORDS)], "1") for i in range(n)]


def _checkpointed(job: JobConfig) -> dict[tuple[str, int], int]:
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    return {(s.stream, s.partition): o for cp in manager.read_last().values() for s, o in cp.offsets.items()}


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    with KafkaConsumer({"bootstrap.servers": bootstrap}) as consumer:
        return {(topic, p): consumer.watermarks((topic, p))[1] for p in range(partitions)}


def _running(supervisor: SparkSupervisor, count: int, min_epoch: int = 1) -> Callable[[], bool]:
    def check() -> bool:
        if supervisor.control is None:
            return False
        reports = supervisor.control.reports()
        running = [r for r in reports.values() if r.state == "running" and r.epoch >= min_epoch]
        return len(running) >= count

    return check


@pytest.mark.parametrize("deploy", ["local", "spark"])
def test_word_count_is_exact_and_the_same_on_spark_as_locally(
    deploy, spark, job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env, changelog
):
    words, out = topics(4), topics(1)
    config = count_job(
        job_config,
        words,
        out,
        **{"job.container.count": "2", "stores.counts.changelog": f"kafka.{changelog}", "job.deploy": deploy},
    )
    records = _words(400)
    produce(words, records)
    if deploy == "local":
        job_file = tmp_path / "job.yaml"
        job_file.write_text(json.dumps(config))
        result = run_cli(job_file, subprocess_env)
        assert result.returncode == 0, result.stderr[-3000:]
    else:
        supervisor = SparkSupervisor(JobConfig(Config(config)), until_caught_up=True, spark=spark)
        assert supervisor.run() == 0
        assert [s.starts for s in supervisor.slots] == [1, 1]
    assert final_counts(read_topic(out)) == dict(Counter(k for k, _ in records))


def test_kill_9_of_a_container_worker_restarts_it_and_sigterm_like_stop_commits_everything(
    spark, job_config, topics, produce, read_topic, kafka_bootstrap, changelog
):
    words, out = topics(4), topics(1)
    config = count_job(
        job_config,
        words,
        out,
        **{
            "job.container.count": "2",
            "stores.counts.changelog": f"kafka.{changelog}",
            "task.commit.ms": "300",
            "deploy.spark.heartbeat.timeout.ms": "5000",
        },
    )
    job = JobConfig(Config(config))
    supervisor = SparkSupervisor(job, spark=spark)
    run = Background(supervisor.run)
    try:
        wait_for(_running(supervisor, 2), 60, "two running containers")
        first = _words(300)
        produce(words, first)
        wait_for(lambda: len(read_topic(out)) >= 150, 60, "first outputs")
        assert supervisor.control is not None
        victim = supervisor.control.reports()["0"]
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_for(
            lambda: (
                supervisor.control is not None
                and supervisor.control.reports()["0"].epoch > victim.epoch
                and supervisor.control.reports()["0"].state == "running"
            ),
            30,
            "container 0 running again under a new epoch",
        )
        restarted_in = time.monotonic() - killed_at
        second = _words(200, seed=3)
        produce(words, second)
        truth = dict(Counter(k for k, _ in first + second))
        wait_for(lambda: final_counts(read_topic(out)) == truth, 60, "exact counts after the restart")
    finally:
        supervisor.stop()
        run.join(60)
    assert run.error is None and run.result == 0
    assert restarted_in < 15, f"restart took {restarted_in:.1f} s"
    assert supervisor.slots[0].starts == 2 and supervisor.slots[1].starts == 1
    # The graceful stop committed all it processed: each input partition's checkpoint is at its end.
    assert _checkpointed(job) == _ends(kafka_bootstrap, words, 4)


def test_a_container_failing_past_max_restarts_fails_the_job_with_its_last_error(
    spark, job_config, topics, produce
):
    words, out = topics(1), topics(1)
    config = job_config(
        f"kafka.{words}",
        out,
        task="samsa_test_tasks:FailingTask",
        **{"deploy.spark.max.restarts": "1", "task.commit.ms": "300"},
    )
    produce(words, [("k", "boom")])
    supervisor = SparkSupervisor(JobConfig(Config(config)), spark=spark)
    started = time.monotonic()
    assert supervisor.run() == 1
    assert time.monotonic() - started < 60
    slot = supervisor.slots[0]
    assert slot.starts == 2  # the first run and one restart
    assert slot.error is not None and "boom" in slot.error


def test_a_container_failing_on_a_config_error_ends_the_job_without_a_restart(
    spark, job_config, topics, produce
):
    # The task's init() asks for a store the config does not define: every restart would fail the same way.
    words, out = topics(1), topics(1)
    config = job_config(
        f"kafka.{words}", out, task="samsa_test_tasks:CountTask", **{"deploy.spark.max.restarts": "5"}
    )
    produce(words, [("k", "1")])
    supervisor = SparkSupervisor(JobConfig(Config(config)), spark=spark)
    started = time.monotonic()
    assert supervisor.run() == 2, "a configuration error: exit status 2, as under the local supervisor"
    assert time.monotonic() - started < 60
    slot = supervisor.slots[0]
    assert slot.starts == 1, "a config error was restarted"
    assert slot.error is not None and "counts" in slot.error


def test_sigterm_on_the_driver_stops_every_container_with_a_final_commit(
    job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env, kafka_bootstrap
):
    words, out = topics(2), topics(1)
    config = count_job(job_config, words, out, **{"job.container.count": "2", "task.commit.ms": "60000"})
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    produce(words, _words(200))
    log = (tmp_path / "driver.log").open("w")
    driver = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "run", "--deploy", "spark", str(job_file)],
        env=subprocess_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: (tmp_path / "driver.log").read_text().count("running tasks") >= 2, 120, "two containers"
        )
        wait_for(lambda: len(read_topic(out)) == 200, 60, "every word counted")
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=90) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
        log.close()
    text = (tmp_path / "driver.log").read_text()
    assert "[container-0]" in text and "[container-1]" in text
    assert "asked it to stop" in text
    # task.commit.ms is a minute: only the stop's own commit can have checkpointed the inputs' ends.
    assert _checkpointed(job) == _ends(kafka_bootstrap, words, 2)


def test_a_partition_added_while_the_job_runs_on_spark_is_read_after_the_driver_restarts_the_job(
    spark, broker_bootstrap, job_config, topics, produce, read_topic, caplog: pytest.LogCaptureFixture
):
    inp, out = topics(2), topics(1)
    config = job_config(
        f"kafka.{inp}",
        out,
        **{
            "job.container.count": "2",
            "task.commit.ms": "500",
            "systems.kafka.samza.offset.default": "upcoming",
            MONITOR_KEY: "500",
        },
    )
    supervisor = SparkSupervisor(JobConfig(Config(config)), spark=spark)
    with caplog.at_level(logging.INFO, "samsa.deploy"):
        run = Background(supervisor.run)
        try:
            wait_for(_running(supervisor, 2), 60, "two running containers")
            produce(inp, [("k", "a"), ("k", "b")], partition=0)
            wait_for(lambda: len(read_topic(out)) == 2, 60, "the first outputs")
            grow(broker_bootstrap, inp, 3)
            produce_new(broker_bootstrap, inp, ["new-0", "new-1", "new-2"], partition=2)
            wait_for(lambda: len(read_topic(out)) == 5, 90, "the new partition's messages processed")
        finally:
            supervisor.stop()
            run.join(60)
    assert run.error is None and run.result == 0
    assert f"kafka.{inp}: 2 -> 3 partitions" in caplog.text
    assert "restarting the job with a new job model" in caplog.text
    assert supervisor.model is not None
    assert supervisor.model.partition_counts() == {SystemStream("kafka", inp): 3}
    # The new model's containers are the second start of each on the same control server: the next epoch.
    assert supervisor.control is not None
    assert {c: r.epoch for c, r in supervisor.control.reports().items()} == {"0": 2, "1": 2}
    # Stopped with a final commit, then restarted: nothing lost, nothing processed twice.
    outputs = Counter((k.decode(), v.decode()) for _, _, k, v in read_topic(out))
    assert outputs == Counter(
        {("0:0", "a"): 1, ("0:1", "b"): 1, ("2:0", "new-0"): 1, ("2:1", "new-1"): 1, ("2:2", "new-2"): 1}
    )


def test_a_job_with_durable_stores_on_spark_stops_failed_when_an_input_grows(
    spark, broker_bootstrap, job_config, topics, changelog, caplog: pytest.LogCaptureFixture
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
            "stores.counts.changelog": f"kafka.{changelog}",
            MONITOR_KEY: "500",
        },
    )
    supervisor = SparkSupervisor(JobConfig(Config(config)), spark=spark)
    with caplog.at_level(logging.INFO, "samsa.deploy"):
        run = Background(supervisor.run)
        try:
            wait_for(_running(supervisor, 1), 60, "the container running")
            grow(broker_bootstrap, inp, 3)
            run.join(60)
        finally:
            supervisor.stop()
            run.join(60)
    assert run.error is None and run.result == 1
    assert f"kafka.{inp}: 2 -> 3 partitions" in caplog.text
    assert "durable stores (counts)" in caplog.text and "docs/running.md" in caplog.text
    assert "restarting the job" not in caplog.text
    # Its container stopped gracefully (final commit), once.
    assert [s.starts for s in supervisor.slots] == [1]
    assert supervisor.control is not None and supervisor.control.reports()["0"].state == "stopped"


def test_warming_workers_for_an_s3_job_runs_on_spark(spark: Spark) -> None:
    # The warm-up's function travels to the workers with its argument (pickled), imports boto3 there.
    spark.warm_up(2, warm_s3=True)


def test_a_container_that_lost_a_stalled_driver_is_started_again_and_counts_stay_exact(
    spark, job_config, topics, produce, read_topic, changelog, monkeypatch: pytest.MonkeyPatch
):
    # The driver stalls past the heartbeat timeout (a VM freeze, an overloaded host): its control server
    # answers nothing for a while. The container stops, its task ends without an error; the driver runs on.
    stall_until = [0.0]
    handle = ControlServer._handle

    def stalling(self: ControlServer, *args: Any) -> Any:
        while time.monotonic() < stall_until[0]:
            time.sleep(0.05)
        return handle(self, *args)

    monkeypatch.setattr(ControlServer, "_handle", stalling)
    words, out = topics(1), topics(1)
    config = count_job(
        job_config,
        words,
        out,
        **{
            "stores.counts.changelog": f"kafka.{changelog}",
            "task.commit.ms": "300",
            "deploy.spark.heartbeat.timeout.ms": "1500",
        },
    )
    supervisor = SparkSupervisor(JobConfig(Config(config)), spark=spark)
    run = Background(supervisor.run)
    try:
        wait_for(_running(supervisor, 1), 60, "a running container")
        first = _words(100)
        produce(words, first)
        wait_for(lambda: len(read_topic(out)) >= 100, 60, "first outputs")
        stall_until[0] = time.monotonic() + 4
        wait_for(
            lambda: (
                supervisor.control is not None
                and supervisor.control.reports()["0"].epoch > 1
                and supervisor.control.reports()["0"].state == "running"
            ),
            60,
            "container 0 started again under a new epoch",
        )
        second = _words(100, seed=5)
        produce(words, second)
        truth = dict(Counter(k for k, _ in first + second))
        wait_for(lambda: final_counts(read_topic(out)) == truth, 60, "exact counts after the stall")
    finally:
        supervisor.stop()
        run.join(60)
    assert run.error is None and run.result == 0
    assert supervisor.slots[0].starts == 2
