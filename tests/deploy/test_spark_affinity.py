"""Host affinity on `local-cluster` (separate executor JVMs): containers land on their preferred executor."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from background import MINIMAL_JOB, Background, wait_for
from count_job import WORDS, count_job, final_counts

from samsa.deploy.spark import Spark, probe, spark_conf
from samsa.deploy.spark_supervisor import SparkSupervisor
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig

EXECUTORS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[Spark]:
    """Three executors of one core each, in JVMs of their own (the probe's `local-cluster` recipe)."""
    handle = Spark(
        "samsa-test-affinity",
        f"local-cluster[{EXECUTORS},1,1024]",
        spark_conf(JobConfig(Config(MINIMAL_JOB))),
    )
    handle.await_executors(EXECUTORS)
    yield handle
    handle.stop()


def test_a_task_runs_on_the_executor_it_prefers(cluster):
    places = {}
    for executor in ("2", "0", "1", "2"):
        attempt = cluster.run_task("affinity", "probe", probe, None, [f"executor_127.0.0.1_{executor}"])
        place = cluster.place_of(attempt.stage_id, attempt.task_attempt_id)
        assert place is not None
        places[executor] = place
        assert place.executor_id == executor
    assert places["2"].location == "executor_127.0.0.1_2"


def test_a_restarted_container_goes_back_to_its_executor(cluster, job_config, topics, produce, read_topic):
    words, out = topics(4), topics(1)
    config = count_job(job_config, words, out, **{"job.container.count": "2", "task.commit.ms": "300"})
    supervisor = SparkSupervisor(JobConfig(Config(config)), spark=cluster)
    run = Background(supervisor.run)

    def running(epoch: int) -> bool:
        reports = supervisor.control.reports() if supervisor.control else {}
        return (
            len(reports) == 2
            and all(r.state == "running" for r in reports.values())
            and (reports["0"].epoch == epoch)
        )

    try:
        wait_for(lambda: running(1), 90, "two running containers")
        assert supervisor.control is not None
        first = supervisor.control.reports()["0"]
        before = cluster.place_of(first.info["stage_id"], first.info["task_attempt_id"])
        assert before is not None
        produce(words, [(WORDS[i % len(WORDS)], "1") for i in range(200)])
        wait_for(lambda: len(read_topic(out)) >= 200, 60, "the words counted")
        os.kill(first.pid, signal.SIGKILL)
        wait_for(lambda: running(2), 60, "container 0 restarted")
        second = supervisor.control.reports()["0"]
        after = cluster.place_of(second.info["stage_id"], second.info["task_attempt_id"])
        # A free executor was there too (three executors, two containers): the preference chose.
        assert after == before
        assert supervisor.slots[0].place == before
        expected = {w: sum(1 for i in range(200) if WORDS[i % len(WORDS)] == w) for w in set(WORDS)}
        wait_for(lambda: final_counts(read_topic(out)) == expected, 60, "exact counts")
    finally:
        supervisor.stop()
        run.join(60)
    assert run.error is None and run.result == 0
