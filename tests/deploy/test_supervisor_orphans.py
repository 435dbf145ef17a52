"""Containers of a local supervisor killed with -9 stop gracefully instead of running on as orphans."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from background import wait_for
from container_pids import container_pids

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.deploy.local import SUPERVISOR_PID_ENV, stop_when_orphaned
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config


def test_a_container_whose_supervisor_is_gone_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = threading.Event()
    monkeypatch.setenv(SUPERVISOR_PID_ENV, str(os.getppid()))
    watch = stop_when_orphaned(stopped.set, poll_s=0.01)
    assert watch is not None
    assert not stopped.wait(0.3), "stopped while its supervisor still runs"
    # Re-parented: the parent pid is no longer the supervisor's.
    monkeypatch.setattr(os, "getppid", lambda: 1)
    assert stopped.wait(5), "not stopped once its supervisor was gone"
    watch.join(5)
    assert not watch.is_alive()


def test_a_container_run_alone_watches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SUPERVISOR_PID_ENV, raising=False)
    assert stop_when_orphaned(lambda: None) is None


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting for its new parent to reap it counts)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_kill_9_of_the_supervisor_stops_its_containers_with_a_final_commit(
    job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env
):
    inp, out = topics(2), topics(1)
    config = job_config(f"kafka.{inp}", out, **{"job.container.count": 2, "task.commit.ms": 60000})
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    with (tmp_path / "supervisor.log").open("w") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli", "run", str(job_file)],
            env=subprocess_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        containers: dict[str, int] = {}
        try:
            wait_for(lambda: len(container_pids(job)) == 2, 60, "two containers")
            containers = container_pids(job)
            manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
            produce(inp, [(str(i), str(i)) for i in range(200)])
            wait_for(lambda: len(read_topic(out)) >= 200, 60, "every input processed")
            supervisor.send_signal(signal.SIGKILL)
            supervisor.wait(10)
            wait_for(lambda: all(_gone(pid) for pid in containers.values()), 60, "the orphans to stop")
        finally:
            for pid in containers.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert not container_pids(job), "the containers removed their pid files (a graceful stop)"
    # The final commits (task.commit.ms is a minute away) checkpointed everything the containers processed.
    wait_for(
        lambda: sum(o for cp in manager.read_last().values() for o in cp.offsets.values()) == 200,
        30,
        "the final commits to cover every input",
    )
