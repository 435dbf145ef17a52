"""The local supervisor's fork server: containers forked from a process that loaded the runtime once."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from background import wait_for
from container_pids import container_pids
from count_job import WORDS, final_counts, s3_counts_job
from moto_server import FAKE_ENVIRONMENT

from samsa.deploy import local
from samsa.deploy.exceptions import ForkServerError
from samsa.deploy.fork_server import ForkServer, _orphan_status
from samsa.deploy.local import CONTAINER_MODULES, LocalSupervisor
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig

SUPPORT = str(Path(__file__).parents[1] / "support")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]), **extra}


@pytest.fixture
def server() -> Iterator[ForkServer]:
    server = ForkServer(CONTAINER_MODULES, False, _env())
    try:
        yield server
    finally:
        server.close()


def _spawn(server: ForkServer, entry: str, *argv: str, **env: str) -> Any:
    return server.spawn(f"fork_entries:{entry}", argv, env, sys_path=[SUPPORT], name="7")


def test_a_forked_process_gets_its_arguments_environment_and_output(server: ForkServer) -> None:
    process = _spawn(server, "report", "3", "x", FORK_TEST="given")
    output = process.stdout.read().decode()
    assert process.wait(10) == 3
    first, second = output.splitlines()
    seen = json.loads(first)
    assert seen["argv"] == ["3", "x"] and seen["env"] == "given"
    assert seen["ppid"] == server.pid and seen["pid"] == process.pid
    assert seen["sid"] == process.pid, "a session of its own: a terminal's Ctrl-C reaches only the supervisor"
    assert seen["preloaded"], "the container runtime came loaded from the server"
    assert seen["comm"] in (None, "samsa-c7"), "named after its container in `ps -e`, `top`"
    assert second == "to stderr", "stderr goes to the same pipe"
    assert "FORK_TEST" not in os.environ


def test_processes_run_side_by_side_and_each_status_reaches_its_own_handle(server: ForkServer) -> None:
    processes = [_spawn(server, "report", str(status)) for status in (0, 1, 78)]
    assert [p.wait(10) for p in processes] == [0, 1, 78]
    assert len({p.pid for p in processes}) == 3


def test_an_entry_that_raises_exits_1_with_its_traceback(server: ForkServer) -> None:
    process = _spawn(server, "fail")
    output = process.stdout.read().decode()
    assert process.wait(10) == 1
    assert "RuntimeError: the entry failed" in output


def test_a_broken_pipe_of_the_entry_is_its_own_failure_not_the_servers(server: ForkServer) -> None:
    process = _spawn(server, "broken_pipe")
    output = process.stdout.read().decode()
    assert process.wait(10) == 1, output
    assert "the task's own broken pipe" in output


def test_a_server_whose_supervisor_left_while_it_loaded_exits_quietly() -> None:
    server = ForkServer(CONTAINER_MODULES, False, _env())
    server.close()  # before it was ready: a job refused at its preparation
    assert server._process.returncode == 0, "no BrokenPipeError when it said it was ready"


def test_a_stop_sent_to_every_process_at_once_leaves_the_server_to_report_the_statuses(
    server: ForkServer,
) -> None:
    # systemd's control-group kill: SIGTERM to the supervisor, the server and the containers together.
    process = _spawn(server, "sleep")
    assert process.stdout.readline() == b"sleeping\n"
    os.kill(server.pid, signal.SIGTERM)
    os.kill(server.pid, signal.SIGINT)
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(10) == -signal.SIGTERM, "the status came from the server, not lost with it"
    assert not server.gone


def test_a_container_reparented_to_the_supervisor_is_reaped_with_its_own_status() -> None:
    # A supervisor running as pid 1 (a container image's entrypoint) inherits the orphans of a dead server.
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    deadline = time.monotonic() + 10
    status = None
    while status is None and time.monotonic() < deadline:
        status = _orphan_status(child.pid)
        time.sleep(0.01)
    assert status == 3


def test_a_container_left_a_zombie_of_another_parent_counts_as_exited() -> None:
    # `sh` runs a child it never waits for: once that child exits, it is a zombie until sh ends.
    holder = subprocess.Popen(
        ["sh", "-c", "sleep 0 & echo $!; exec sleep 30"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        zombie = int(holder.stdout.readline())
        deadline = time.monotonic() + 10
        status = None
        while status is None and time.monotonic() < deadline:
            status = _orphan_status(zombie)
            time.sleep(0.01)
        assert status == 1, "exited (its status is its parent's to read): counted as a crash"
    finally:
        holder.kill()
        holder.wait()


def test_a_signal_ends_a_forked_process_as_it_ends_a_popen_one(server: ForkServer) -> None:
    process = _spawn(server, "sleep")
    assert process.stdout.readline() == b"sleeping\n"
    assert process.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(0.2)
    process.send_signal(signal.SIGTERM)
    assert process.wait(10) == -signal.SIGTERM
    process.kill()  # exited: nothing is signalled (its pid may be another process's by now)


def test_the_server_gone_its_children_stop_and_count_as_crashed(server: ForkServer) -> None:
    process = _spawn(server, "sleep")
    assert process.stdout.readline() == b"sleeping\n"
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not server.gone and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.gone
    os.kill(process.pid, signal.SIGKILL)  # a container stops itself once re-parented; this one only sleeps
    assert process.wait(10) == 1, "its status went with the server: a crash"
    with pytest.raises(ForkServerError, match=r"gone|exited"):
        _spawn(server, "report", "0")


@pytest.mark.parametrize("warm_s3", [True, False])
def test_a_forked_container_makes_its_s3_client_from_the_models_the_server_parsed(warm_s3: bool) -> None:
    server = ForkServer(CONTAINER_MODULES, warm_s3, _env())
    try:
        process = _spawn(server, "s3_client")
        output = process.stdout.read().decode()
        assert process.wait(30) == 0, output
        assert json.loads(output.splitlines()[-1]) == {"warm": warm_s3}
    finally:
        server.close()


def test_a_server_whose_modules_started_a_thread_refuses_to_fork() -> None:
    server = ForkServer([*CONTAINER_MODULES, "fork_thread_module"], False, _env())
    try:
        with pytest.raises(ForkServerError, match="threads after loading"):
            server.wait_ready(60)
    finally:
        server.close()


def _job(tmp_path: Path, **extra: str) -> JobConfig:
    return JobConfig(
        Config(
            {
                "job.name": "fork",
                "task.class": "samsa_test_tasks:Echo",
                "task.inputs": "kafka.in",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "127.0.0.1:1",
                "job.logged.store.base.dir": str(tmp_path),
                "job.non-logged.store.base.dir": str(tmp_path),
                **extra,
            }
        )
    )


class _Popen:
    started: list[list[str]] = []

    def __init__(self, cmd: list[str], **kwargs: Any) -> None:
        _Popen.started.append(cmd)
        self.pid = 1
        self.stdout = io.BytesIO(b"")


def test_the_supervisor_starts_fresh_interpreters_when_the_fork_server_cannot_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    supervisor = LocalSupervisor(_job(tmp_path), [])
    supervisor._fork_server = ForkServer([*CONTAINER_MODULES, "fork_thread_module"], False, _env())
    _Popen.started = []
    monkeypatch.setattr(local.subprocess, "Popen", _Popen)
    supervisor._spawn(local._Child("0", local.RestartBudget(1)))
    assert _Popen.started and _Popen.started[0][1:4] == ["-m", "samsa.cli", "run"]
    assert supervisor._fork_failed, "given up for the rest of the run"
    _Popen.started = []
    supervisor._spawn(local._Child("1", local.RestartBudget(1)))
    assert len(_Popen.started) == 1, "the next container too"
    supervisor._stop_fork_server()
    assert "threads after loading" in caplog.text and "fresh interpreters" in caplog.text


def test_a_failed_fork_leaves_the_containers_the_server_forked_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ForkServer
) -> None:
    supervisor = LocalSupervisor(_job(tmp_path), [])
    supervisor._fork_server = server
    running = _spawn(server, "sleep")
    assert running.stdout.readline() == b"sleeping\n"

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ForkServerError("the fork server could not fork: [Errno 11] Resource temporarily unavailable")

    monkeypatch.setattr(server, "spawn", refused)
    _Popen.started = []
    monkeypatch.setattr(local.subprocess, "Popen", _Popen)
    supervisor._spawn(local._Child("1", local.RestartBudget(1)))
    assert _Popen.started, "the container that could not be forked started as a fresh interpreter"
    assert not server.gone, "the server is kept: the containers it forked are its children"
    with pytest.raises(subprocess.TimeoutExpired):
        running.wait(0.5)  # still running
    running.kill()
    assert running.wait(10) == -signal.SIGKILL


def test_the_fork_server_gets_the_containers_malloc_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    envs: list[dict[str, str]] = []

    class Started:
        def __init__(self, cmd: list[str], **kwargs: Any) -> None:
            envs.append(kwargs["env"])
            self.pid = 1

    monkeypatch.setattr(local, "ForkServer", lambda modules, warm, env: Started([], env=env))
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    supervisor = LocalSupervisor(_job(tmp_path), [])
    supervisor._start_fork_server()
    assert envs and envs[0]["MALLOC_MMAP_THRESHOLD_"] == "131072"


def test_deploy_local_fork_server_false_starts_no_fork_server(tmp_path: Path) -> None:
    supervisor = LocalSupervisor(_job(tmp_path, **{"deploy.local.fork.server": "false"}), [])
    supervisor._start_fork_server()
    assert supervisor._fork_server is None


def test_a_supervised_s3_job_restores_on_a_new_host_through_forked_containers(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    tmp_path: Path,
    s3_bucket: str,
    moto_endpoint: str,
    subprocess_env: dict[str, str],
) -> None:
    words, out = topics(2), topics(2)
    config = s3_counts_job(job_config, words, out, s3_bucket, moto_endpoint)
    sent = WORDS[:5] * 20
    env = {**subprocess_env, **FAKE_ENVIRONMENT}  # the credentials reach the containers through the server
    outputs = []
    for host in ("host-1", "host-2"):  # the second restores the first's snapshot from S3 into an empty dir
        produce(words, [(w, w) for w in sent])
        job_file = tmp_path / f"{host}.yaml"
        job_file.write_text(json.dumps({**config, "job.logged.store.base.dir": str(tmp_path / host)}))
        run = subprocess.run(
            [sys.executable, "-m", "samsa.cli", "run", "--until-caught-up", str(job_file)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        outputs.append(run.stdout + run.stderr)
        assert run.returncode == 0, outputs[-1]
    assert final_counts(read_topic(out)) == Counter(sent * 2)
    for output in outputs:
        assert output.count(", forked)") == 1, output  # one container, forked by the fork server
    assert "restored" in outputs[1]


_AS_SUBREAPER = """
import ctypes, os, sys
# The orphans of its descendants come to it, as to a supervisor running as pid 1 (PR_SET_CHILD_SUBREAPER,
# kept across exec).
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
    raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed")
os.execv(sys.executable, [sys.executable, "-m", "samsa.cli", "run", sys.argv[1]])
"""


@pytest.mark.parametrize("reaper", [False, True], ids=["plain", "as-pid-1"])
def test_the_job_goes_on_when_the_fork_server_dies(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    reaper: bool,
) -> None:
    inp, out = topics(2), topics(1)
    config = job_config(f"kafka.{inp}", out, **{"job.container.count": 2, "task.commit.ms": 500})
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    command = [sys.executable, "-c", _AS_SUBREAPER] if reaper else [sys.executable, "-m", "samsa.cli", "run"]
    with (tmp_path / "supervisor.log").open("w") as log:
        supervisor = subprocess.Popen(
            [*command, str(job_file)], env=subprocess_env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_for(lambda: len(container_pids(job)) == 2, 60, "two containers")
        produce(inp, [(str(i), str(i)) for i in range(100)])
        wait_for(lambda: len(read_topic(out)) >= 100, 60, "the first outputs")
        first = container_pids(job)
        (server,) = {_parent(pid) for pid in first.values()}
        os.kill(server, signal.SIGKILL)
        wait_for(
            lambda: (
                len(container_pids(job)) == 2 and not set(container_pids(job).values()) & set(first.values())
            ),
            60,
            "restarts",
        )
        produce(inp, [(str(i), str(i)) for i in range(100, 200)])
        wait_for(
            lambda: {r[3] for r in read_topic(out)} >= {str(i).encode() for i in range(200)},
            60,
            "every output",
        )
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
    text = (tmp_path / "supervisor.log").read_text()
    assert text.count("fresh interpreter)") == 2, text  # both restarted, as fresh interpreters
    if reaper:
        # Reaped by the supervisor with their own status: stopped as orphans, restarted.
        assert text.count("exited with 75; restarting") == 2, text


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
