"""Errors a restart cannot mend end the job: the container's exit status says so, and the local supervisor
stops instead of restarting it with backoff."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from samsa import OutgoingMessage
from samsa.cli import _error_status
from samsa.deploy.local import LocalSupervisor, _Child
from samsa.deploy.restarts import ALREADY_RUNNING_EXIT, CONFIG_ERROR_EXIT, RestartBudget
from samsa.runtime.collector import ExactlyOnceCollector
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import (
    ConfigError,
    ContainerAlreadyRunningError,
    UndeclaredOutputError,
    UserCodeError,
)
from samsa.runtime.run_lock import RunLock
from samsa.runtime.validation import check_job
from samsa.serde.registry import SerdeRegistry

_CONTAINER = argparse.Namespace(container_id="0")


def _eos_config(**extra: str) -> dict[str, str]:
    config = {
        "job.name": "eos",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.eos-in",
        "task.outputs": "kafka.eos-out",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "systems.other.samza.factory": "kafka",
        "systems.other.bootstrap.servers": "localhost:9093",
        "job.processing.guarantee": "exactly_once",
    }
    return {**config, **{k.replace("__", "."): v for k, v in extra.items()}}


def test_a_send_outside_task_outputs_under_exactly_once_exits_as_a_config_error() -> None:
    config = Config(_eos_config())
    collector = ExactlyOnceCollector(
        JobConfig(config),
        {},
        SerdeRegistry(config),
        object(),
        object(),
        "Partition 0",  # type: ignore[arg-type]
    )
    with pytest.raises(
        UndeclaredOutputError, match=r"kafka\.elsewhere, which task\.outputs does not list"
    ) as info:
        collector.send(OutgoingMessage("kafka", "elsewhere", value=b"x"))
    # As the run loop reports it: process() failed, caused by the send.
    try:
        raise UserCodeError("task Partition 0: process() failed") from info.value
    except UserCodeError as wrapped:
        assert _error_status(_CONTAINER, wrapped) == CONFIG_ERROR_EXIT


def test_an_exactly_once_sink_on_another_system_fails_validation_before_any_container_starts() -> None:
    job = JobConfig(Config(_eos_config(task__outputs="kafka.eos-out,other.sink")))
    with pytest.raises(ConfigError, match=r"other\.sink is an exactly-once sink on system 'other'") as info:
        check_job(job)
    assert "systems.other.streams.sink.samza.intermediate=true" in str(info.value)
    assert _error_status(_CONTAINER, info.value) == CONFIG_ERROR_EXIT


def test_an_intermediate_output_on_another_system_passes_validation() -> None:
    extra = {
        "task__outputs": "kafka.eos-out,other.link",
        "systems__other__streams__link__samza__intermediate": "true",
    }
    check_job(JobConfig(Config(_eos_config(**extra))))


def test_a_container_refused_by_its_lock_exits_with_the_already_running_status(tmp_path: Path) -> None:
    path = tmp_path / "container-0.lock"
    holder = RunLock(path, "container 0 of job j-1")
    holder.acquire()
    try:
        with pytest.raises(ContainerAlreadyRunningError, match=r"already running here \(pid \d+") as info:
            RunLock(path, "container 0 of job j-1").acquire()
    finally:
        holder.release()
    assert _error_status(_CONTAINER, info.value) == ALREADY_RUNNING_EXIT
    # The supervisor itself (no container id) still exits 2.
    assert _error_status(argparse.Namespace(container_id=None), info.value) == 2


class _Exited:
    def __init__(self, rc: int) -> None:
        self.rc = rc

    def poll(self) -> int:
        return self.rc


def test_the_local_supervisor_ends_the_job_instead_of_restarting_a_container_already_running(
    caplog: Any,
) -> None:
    job = JobConfig(Config({**_eos_config(), "job.processing.guarantee": "at_least_once"}))
    supervisor = LocalSupervisor(job, [])
    child = _Child("0", RestartBudget(10), process=_Exited(ALREADY_RUNNING_EXIT))  # type: ignore[arg-type]
    supervisor._watch(child, 100.0)
    assert child.done and child.rc == ALREADY_RUNNING_EXIT
    assert child.restart_at is None
    assert supervisor.failed and supervisor._stopping
    assert "another process on this machine runs it" in caplog.text
    assert "restarting" not in caplog.text
