"""A stop says that it ended: each container that it stopped after its final commit, the supervisor that the
job stopped and with which status; the signal line is logged by the module of what it stops."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from background import MINIMAL_JOB

from samsa.deploy import local
from samsa.deploy.local import LocalSupervisor, install_stop_handlers
from samsa.deploy.restarts import CONFIG_ERROR_EXIT
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.job_model import ContainerModel, JobModel


def test_a_graceful_stop_logs_that_the_container_stopped_after_its_final_commit(
    job_config: Any, topics: Any, produce: Any, caplog: pytest.LogCaptureFixture
) -> None:
    words = topics(2)
    produce(words, [(None, "a")], partition=0)
    job = JobConfig(Config(job_config(f"kafka.{words}", topics(1))))
    container = Container(job, JobCoordinator(job).prepare().container("0"))
    caplog.set_level(logging.INFO, logger="samsa.runtime.container")
    loop = container.start()
    assert loop is not None
    container.stop()  # as SIGTERM does
    loop.run()
    container.finish()
    lines = [r for r in caplog.records if "final commit" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (logging.INFO, "container 0 stopped after its final commit (tasks: Partition 0, Partition 1)")
    ]


def test_a_run_until_caught_up_says_so_in_its_stop_line(
    job_config: Any, topics: Any, produce: Any, run_job: Any, caplog: pytest.LogCaptureFixture
) -> None:
    words = topics(1)
    produce(words, [(None, "a")])
    caplog.set_level(logging.INFO, logger="samsa.runtime.container")
    run_job(job_config(f"kafka.{words}", topics(1)))
    assert (
        "container 0 stopped after its final commit (caught up with its inputs) (tasks: Partition 0)"
        in caplog.text
    )


class _Exited:
    """A container process that has exited with `rc`."""

    def __init__(self, rc: int) -> None:
        self.returncode = rc

    def poll(self) -> int:
        return self.returncode


@pytest.mark.parametrize(("rc", "status"), [(0, 0), (CONFIG_ERROR_EXIT, 2)])
def test_the_supervisor_logs_that_the_job_stopped_with_its_status(
    rc: int, status: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    state = {"job.non-logged.store.base.dir": str(tmp_path), "job.logged.store.base.dir": str(tmp_path)}
    job = JobConfig(Config({**MINIMAL_JOB, **state}))
    model = JobModel("fingerprint", (ContainerModel("0", ()),))
    monkeypatch.setattr(local.JobCoordinator, "prepare", lambda self: model)
    supervisor = LocalSupervisor(job, [])

    def spawn(child: Any) -> None:
        child.process = _Exited(rc)

    monkeypatch.setattr(supervisor, "_spawn", spawn)
    caplog.set_level(logging.INFO, logger="samsa.deploy.local")
    assert supervisor.run() == status
    assert caplog.records[-1].getMessage() == f"job {job.job_key} stopped (exit {status})"
    assert caplog.records[-1].levelno == logging.INFO


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _stop_of(module: str, stopped: list[bool]) -> Any:
    def stop() -> None:
        stopped.append(True)

    stop.__module__ = module
    return stop


@pytest.mark.usefixtures("restored_handlers")
def test_the_sigterm_line_comes_from_the_module_of_what_it_stops(caplog: pytest.LogCaptureFixture) -> None:
    stopped: list[bool] = []
    caplog.set_level(logging.INFO)
    install_stop_handlers(_stop_of("samsa.runtime.container", stopped))
    signal.raise_signal(signal.SIGTERM)
    assert stopped == [True]
    (record,) = [r for r in caplog.records if "stopping gracefully" in r.getMessage()]
    assert (record.name, record.getMessage()) == (
        "samsa.runtime.container",
        "received SIGTERM; stopping gracefully",
    )


@pytest.mark.usefixtures("restored_handlers")
def test_a_logger_given_to_the_stop_handlers_gets_the_signal_line(caplog: pytest.LogCaptureFixture) -> None:
    stopped: list[bool] = []
    caplog.set_level(logging.INFO)
    install_stop_handlers(_stop_of("elsewhere", stopped), logging.getLogger("samsa.runtime.container"))
    signal.raise_signal(signal.SIGINT)
    assert stopped == [True]
    (record,) = [r for r in caplog.records if "stopping gracefully" in r.getMessage()]
    assert (record.name, record.getMessage()) == (
        "samsa.runtime.container",
        "received SIGINT; stopping gracefully",
    )
