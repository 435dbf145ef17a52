"""The Spark driver without Spark: a bad master refused before the start, a stop during Spark's start acted
on at once, a lost Spark JVM reported once and never restarted through."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from background import MINIMAL_JOB

from samsa.deploy import spark_supervisor
from samsa.deploy.control import ControlServer
from samsa.deploy.exceptions import SparkJvmLostError
from samsa.deploy.restarts import RestartBudget
from samsa.deploy.spark_supervisor import SparkSupervisor, _Slot
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.job_model import ContainerModel, JobModel

MODEL = JobModel("test", (ContainerModel("0", ()), ContainerModel("1", ())))


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[2]",
        "local[*]",
        "local[2,3]",
        "local[*, 4]",
        "local-cluster[2, 1, 1024]",
        "spark://10.0.0.1:7077",
        "spark://a:7077,b:7077",
        "yarn",
        "k8s://https://10.0.0.1:6443",
    ],
)
def test_every_master_form_spark_takes_is_taken(master: str) -> None:
    assert JobConfig(Config({**MINIMAL_JOB, "deploy.spark.master": master})).spark_master == master


@pytest.mark.parametrize(
    "master", ["bogus://x", "mesos://h:5050", "local[]", "local[two]", "spark://", "Yarn"]
)
def test_a_master_spark_would_refuse_is_refused_naming_the_key_before_the_job_starts(master: str) -> None:
    with pytest.raises(ConfigError, match=r"deploy\.spark\.master=.* is not a Spark master URL"):
        JobConfig(Config({**MINIMAL_JOB, "deploy.spark.master": master}))


class _StartingSpark:
    """A Spark whose start takes long enough for a SIGTERM to arrive meanwhile."""

    def __init__(self, on_start: Any) -> None:
        on_start()
        self.calls: list[str] = []

    def await_executors(self, count: int) -> None:
        self.calls.append("await_executors")

    def warm_up(self, workers: int, warm_s3: bool = False) -> None:
        self.calls.append("warm_up")

    def slots(self) -> int:
        return 2

    def stop(self) -> None:
        self.calls.append("stop")


def test_a_stop_while_spark_starts_ends_the_job_before_its_containers_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    supervisor = SparkSupervisor(JobConfig(Config(MINIMAL_JOB)))
    started: list[_StartingSpark] = []

    def spark(app_name: str, master: str, conf: Any) -> _StartingSpark:
        started.append(_StartingSpark(supervisor.stop))  # the SIGTERM handler's call, during the start
        return started[0]

    class Prepared:
        def __init__(self, job: JobConfig) -> None:
            pass

        def prepare(self) -> JobModel:
            return MODEL

    def no_model(*args: Any) -> Any:
        raise AssertionError("no container may be started after the stop")

    monkeypatch.setattr(spark_supervisor, "Spark", spark)
    monkeypatch.setattr(spark_supervisor, "JobCoordinator", Prepared)
    monkeypatch.setattr(SparkSupervisor, "_run_model", no_model)
    with caplog.at_level(logging.INFO, logger="samsa.deploy.spark_supervisor"):
        assert supervisor.run() == 0
    assert started[0].calls == ["stop"]
    assert "stopped while Spark started" in caplog.text


def test_a_stop_while_the_job_model_is_prepared_starts_no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor = SparkSupervisor(JobConfig(Config(MINIMAL_JOB)))

    class Prepared:
        def __init__(self, job: JobConfig) -> None:
            pass

        def prepare(self) -> JobModel:
            supervisor.stop()  # the SIGTERM handler's call, while the topics are checked
            return MODEL

    def no_spark(*args: Any) -> Any:
        raise AssertionError("no Spark may be started after the stop")

    monkeypatch.setattr(spark_supervisor, "Spark", no_spark)
    monkeypatch.setattr(spark_supervisor, "JobCoordinator", Prepared)
    assert supervisor.run() == 0


@pytest.fixture
def supervisor() -> Iterator[SparkSupervisor]:
    supervisor = SparkSupervisor(JobConfig(Config(MINIMAL_JOB)))
    supervisor.model = MODEL
    supervisor.control = ControlServer(b"secret")
    supervisor.control.start()
    try:
        yield supervisor
    finally:
        supervisor.control.close()


def test_a_lost_jvm_fails_the_job_without_a_restart_through_its_gateway(supervisor: SparkSupervisor) -> None:
    class LostSpark:
        calls = 0

        def run_task(self, *args: Any, **kwargs: Any) -> Any:
            LostSpark.calls += 1
            raise SparkJvmLostError("Spark's JVM (pid 42) exited unexpectedly (killed by SIGKILL)")

        def place_of(self, stage_id: int, task_attempt_id: int) -> None:
            return None

    slots = [_Slot("0", RestartBudget(5)), _Slot("1", RestartBudget(5))]
    for slot in slots:
        supervisor._supervise(LostSpark(), slot)  # type: ignore[arg-type]
    assert LostSpark.calls == 1, "the first loss stops the job: no other container is started or restarted"
    assert supervisor.failed and supervisor.jvm_lost is not None
    assert "pid 42" in str(supervisor.jvm_lost)
