"""When the local supervisor stops at once: a config error in a container, a stop while it prepares, a
second supervisor of the job."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from background import MINIMAL_JOB, wait_for

from samsa.deploy import local
from samsa.deploy.local import LocalSupervisor
from samsa.deploy.restarts import CONFIG_ERROR_EXIT, FENCED_EXIT
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import pid_dir
from samsa.runtime.exceptions import ContainerError
from samsa.runtime.job_model import ContainerModel, JobModel
from samsa.runtime.run_lock import RunLock


def _job(tmp_path: Path, **extra: str) -> JobConfig:
    state = {"job.non-logged.store.base.dir": str(tmp_path), "job.logged.store.base.dir": str(tmp_path)}
    return JobConfig(Config({**MINIMAL_JOB, **state, **extra}))


class _Exited:
    """A container process that has exited with `rc`."""

    def __init__(self, rc: int) -> None:
        self.returncode = rc

    def poll(self) -> int:
        return self.returncode


def _supervisor(
    job: JobConfig, monkeypatch: pytest.MonkeyPatch, rc: int
) -> tuple[LocalSupervisor, list[str]]:
    model = JobModel("fingerprint", (ContainerModel("0", ()),))
    monkeypatch.setattr(local.JobCoordinator, "prepare", lambda self: model)
    supervisor = LocalSupervisor(job, [])
    spawned: list[str] = []

    def spawn(child: Any) -> None:
        spawned.append(child.container_id)
        if len(spawned) > 1:
            supervisor.stop()  # restarted: the test has failed; end the run
        child.process = _Exited(rc)

    monkeypatch.setattr(supervisor, "_spawn", spawn)
    return supervisor, spawned


def test_a_container_stopped_by_a_config_error_stops_the_job_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    supervisor, spawned = _supervisor(_job(tmp_path), monkeypatch, CONFIG_ERROR_EXIT)
    assert supervisor.run() == 2
    assert spawned == ["0"]
    assert re.search(r"container 0 of job \S+ stopped on a configuration error", caplog.text)


def test_a_container_fenced_by_a_newer_start_of_it_ends_the_job_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A restart would fence the newer start in turn: the two would take the container from each other.
    job = _job(tmp_path)
    supervisor, spawned = _supervisor(job, monkeypatch, FENCED_EXIT)
    assert supervisor.run() == 1
    assert spawned == ["0"]
    assert f"container 0 of job {job.job_key} was fenced by a newer start of it" in caplog.text


def test_a_container_crashing_otherwise_is_still_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    supervisor, spawned = _supervisor(_job(tmp_path), monkeypatch, 2)
    assert supervisor.run() == 0  # stopped by the test's spawn once it restarted
    assert spawned == ["0", "0"]


def test_a_stop_while_the_job_is_prepared_ends_the_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = threading.Event()
    monkeypatch.setattr(local.JobCoordinator, "prepare", lambda self: released.wait(30))
    supervisor = LocalSupervisor(_job(tmp_path), [])
    threading.Timer(0.2, supervisor.stop).start()
    started = time.monotonic()
    try:
        assert supervisor.run() == 0
        assert time.monotonic() - started < 2
    finally:
        released.set()


def test_a_second_supervisor_of_the_job_is_refused_at_once(tmp_path: Path) -> None:
    job = _job(tmp_path)
    running = RunLock(pid_dir(job) / "supervisor.lock", "the first")
    running.acquire()
    try:
        with pytest.raises(ContainerError, match=rf"job {job.job_key} is already running here \(pid \d+"):
            LocalSupervisor(job, []).run()
    finally:
        running.release()


@pytest.mark.parametrize("args", [[], ["--container-id", "0"]], ids=["supervisor", "one-container"])
def test_ctrl_c_while_the_broker_is_unreachable_stops_the_start_within_a_second(
    tmp_path: Path, args: list[str]
) -> None:
    config = {
        **MINIMAL_JOB,
        "task.class": "samsa_test_tasks:EchoTask",
        "systems.kafka.bootstrap.servers": "127.0.0.1:1",  # nothing listens: the start waits on it
        "job.non-logged.store.base.dir": str(tmp_path),
        "job.logged.store.base.dir": str(tmp_path),
    }
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    support = str(Path(__file__).resolve().parents[1] / "support")
    run = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {support!r}); from samsa.cli import main; "
            f"sys.exit(main(['run', *{args!r}, {str(job_file)!r}]))",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.stdout is not None
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(run.stdout or ()), daemon=True).start()
    try:
        # The stop handlers are set by then, and the start waits on the broker.
        wait_for(lambda: any("preparing job" in line for line in lines), 30, "the start")
        run.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        run.wait(timeout=30)
        took = time.monotonic() - stopped
    finally:
        if run.poll() is None:
            run.kill()
    time.sleep(0.2)  # the last lines
    output = "".join(lines)
    assert "stopping gracefully" in output, output
    assert took < 2, f"stopped {took:.1f} s after SIGINT"
    assert run.returncode == 0, output


def test_a_task_asking_in_init_for_an_undefined_store_stops_the_job_at_once(
    job_config, topics, tmp_path: Path, subprocess_env
) -> None:
    config = job_config(
        f"kafka.{topics(1)}", topics(1), task="samsa_test_tasks:CountTask", **{"deploy.local.max.restarts": 1}
    )  # CountTask reads store "counts", which the job does not define
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", str(job_file)],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "no store named 'counts'" in output and "stopped on a configuration error" in output, output
    assert "restarting" not in output
    assert 'context.store("counts")' in output, "the user's line is shown"


def test_containers_get_the_malloc_settings_unless_the_environment_has_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without them a container's RSS crept about 1 MB a minute for good (glibc arenas fragmented).
    envs: list[dict[str, str]] = []

    class Started:
        def __init__(self, cmd: list[str], **kwargs: Any) -> None:
            envs.append(kwargs["env"])
            self.pid = 1
            self.stdout = io.BytesIO(b"")  # the output pump ends at once

    monkeypatch.setattr(local.subprocess, "Popen", Started)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    supervisor = LocalSupervisor(_job(tmp_path), [])
    supervisor._spawn(local._Child("0", local.RestartBudget(1)))
    assert envs[0]["MALLOC_MMAP_THRESHOLD_"] == "131072"
    assert envs[0]["MALLOC_ARENA_MAX"] == "4"  # the user's own setting wins
