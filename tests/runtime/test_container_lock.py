"""One start of a container per machine: a second is refused naming the first; a crash or kill frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.kafka import KafkaAdmin
from samsa.kafka.inmemory.registry import forget
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, pid_dir
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.exceptions import ContainerError
from samsa.runtime.run_lock import RunLock


def test_a_held_lock_refuses_a_second_holder_naming_the_first(tmp_path: Path) -> None:
    path = tmp_path / "container-0.lock"
    first = RunLock(path, "container 0 of job j-1")
    first.acquire()
    with pytest.raises(ContainerError) as refused:
        RunLock(path, "container 0 of job j-1").acquire()
    message = str(refused.value)
    assert "container 0 of job j-1 is already running here" in message
    assert f"pid {os.getpid()}" in message and str(path) in message and "stop it first" in message
    first.release()
    second = RunLock(path, "container 0 of job j-1")
    second.acquire()  # released: free again
    second.release()


def test_a_waiting_lock_gets_it_once_the_holder_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "container-0.lock"
    first = RunLock(path, "c")
    first.acquire()
    threading.Timer(0.3, first.release).start()
    second = RunLock(path, "c")
    second.acquire(wait_s=10)
    second.release()


def test_a_killed_holder_leaves_a_stale_file_that_blocks_nothing(tmp_path: Path) -> None:
    path = tmp_path / "container-0.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, time; from samsa.runtime.run_lock import RunLock; "
            f"lock = RunLock(pathlib.Path({str(path)!r}), 'c'); lock.acquire(); print('locked', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(ContainerError, match=f"pid {holder.pid}"):
            RunLock(path, "c").acquire()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert path.read_text() == f"{holder.pid}\n"  # the dead holder's file is still there...
    lock = RunLock(path, "c")
    lock.acquire()  # ...and the OS released its lock
    lock.release()


@pytest.fixture
def inmemory_job(tmp_path: Path) -> Iterator[JobConfig]:
    url = f"inmemory://lock-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin({"bootstrap.servers": url}) as admin:
        admin.create_topic("in", 1)
    yield JobConfig(
        Config(
            {
                "job.name": "locked",
                "task.class": "samsa_test_tasks:EchoTask",
                "task.inputs": "kafka.in",
                "test.output": "in",
                "systems.kafka.samza.factory": "inmemory",
                "systems.kafka.bootstrap.servers": url,
                "job.logged.store.base.dir": str(tmp_path),
                "job.non-logged.store.base.dir": str(tmp_path),
            }
        )
    )
    forget(url)


def test_a_second_start_of_a_running_container_is_refused_and_a_crash_frees_it(
    inmemory_job: JobConfig,
) -> None:
    model = JobCoordinator(inmemory_job).prepare().containers[0]
    running = Container(inmemory_job, model)
    assert running.start() is not None
    pid_file = pid_dir(inmemory_job) / "container-0.pid"
    with pytest.raises(ContainerError) as refused:
        Container(inmemory_job, model).start()
    assert f"container 0 of job {inmemory_job.job_key} is already running here (pid {os.getpid()}" in str(
        refused.value
    )
    assert pid_file.read_text() == f"{os.getpid()}\n", "the refused start left the running one's pid file"
    assert (pid_dir(inmemory_job) / "container-0.lock").read_text() == f"{os.getpid()}\n"  # lines, for cat
    running.crash()  # like kill -9: the restart must not be blocked
    restarted = Container(inmemory_job, model)
    assert restarted.start() is not None
    restarted.finish()
    again = Container(inmemory_job, model)  # a finished container let go too
    assert again.start() is not None
    again.crash()


def test_a_waiting_lock_asked_to_stop_gives_up_without_the_lock_and_without_an_error(tmp_path: Path) -> None:
    path = tmp_path / "container-0.lock"
    holder = RunLock(path, "c")
    holder.acquire()
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    assert RunLock(path, "c").acquire(wait_s=30, stopped=stop.is_set) is False
    assert time.monotonic() - started < 5
    holder.release()


@pytest.mark.parametrize("driven", [False, True], ids=["supervised", "spark"])
def test_a_container_stopped_while_waiting_for_the_lock_starts_nothing_and_is_not_already_running(
    inmemory_job: JobConfig, driven: bool
) -> None:
    model = JobCoordinator(inmemory_job).prepare().containers[0]
    running = Container(inmemory_job, model)
    assert running.start() is not None
    # A supervised container waits for an orphan's lock; a Spark start (an epoch) for the fenced older start.
    waiting = Container(inmemory_job, model, epoch=1 if driven else None, lock_wait_s=30)
    threading.Timer(0.3, waiting.stop).start()
    started = time.monotonic()
    assert waiting.start() is None  # a stop, not ContainerAlreadyRunningError (exit 80)
    assert time.monotonic() - started < 10
    running.crash()
