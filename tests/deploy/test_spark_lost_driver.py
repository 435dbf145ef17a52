"""The Spark driver starts again a container that stopped for want of word from it, and names Spark's reason
for a crash rather than Py4J's wrapper line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from background import MINIMAL_JOB

from samsa.deploy.control import ControlServer
from samsa.deploy.restarts import RestartBudget
from samsa.deploy.spark_supervisor import SparkSupervisor, _Slot, spark_reason
from samsa.deploy.spark_task import ContainerOutcome
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.job_model import ContainerModel, JobModel


class _Spark:
    """Runs each container's task by returning the next outcome given."""

    def __init__(self, outcomes: list[ContainerOutcome]) -> None:
        self.outcomes = outcomes
        self.calls = 0

    def run_task(self, group: str, description: str, func: Any, payload: Any, preferred: Any = ()) -> Any:
        self.calls += 1
        return self.outcomes.pop(0)

    def place_of(self, stage_id: int, task_attempt_id: int) -> None:
        return None


@pytest.fixture
def supervisor() -> Iterator[SparkSupervisor]:
    job = JobConfig(Config({**MINIMAL_JOB, "deploy.spark.heartbeat.timeout.ms": "4000"}))
    supervisor = SparkSupervisor(job)
    supervisor.model = JobModel("fingerprint", (ContainerModel("0", ()),))
    supervisor.control = ControlServer(b"secret")
    supervisor.control.start()
    try:
        yield supervisor
    finally:
        supervisor.control.close()


def test_a_container_that_lost_a_driver_which_runs_on_is_started_again(
    supervisor: SparkSupervisor, caplog: pytest.LogCaptureFixture
) -> None:
    # The driver stalled past the heartbeat timeout (or was cut off from the executor): the container stopped
    # cleanly, its task ended without an error; the job is not done.
    spark = _Spark([ContainerOutcome("0", 1, False, lost_driver=True), ContainerOutcome("0", 2, False)])
    slot = _Slot("0", RestartBudget(5))
    supervisor._supervise(spark, slot)  # type: ignore[arg-type]
    assert spark.calls == 2, "started again"
    assert slot.outcome is not None and slot.outcome.epoch == 2
    assert "no word from the driver for 4000 ms" in caplog.text
    assert not supervisor.failed


def test_a_container_that_lost_the_driver_while_the_job_stops_is_done(supervisor: SparkSupervisor) -> None:
    class Stopping(_Spark):
        def run_task(self, *args: Any, **kwargs: Any) -> Any:
            supervisor._stopping = True  # the job was stopped while the container ran
            return super().run_task(*args, **kwargs)

    spark = Stopping([ContainerOutcome("0", 1, False, lost_driver=True)])
    slot = _Slot("0", RestartBudget(5))
    supervisor._supervise(spark, slot)  # type: ignore[arg-type]
    assert spark.calls == 1, "not started again: the job is stopping"
    assert not supervisor.failed


def test_spark_reason_is_the_stage_failure_not_py4js_wrapper() -> None:
    text = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 "
        "times, most recent failure: Lost task 0.0 in stage 3.0 (TID 5) (127.0.0.1 executor driver): "
        "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"
    )
    reason = spark_reason(text)
    assert reason.startswith("Job aborted due to stage failure:")
    assert "Python worker exited unexpectedly (crashed)" in reason
    assert spark_reason("x" * 1000).endswith("...") and len(spark_reason("x" * 1000)) == 400
    assert spark_reason("") == ""
