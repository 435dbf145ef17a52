"""Local deployment: runs a job's containers as supervised processes on this machine."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol, TypeVar

from samsa.deploy.exceptions import ForkServerError
from samsa.deploy.fork_server import ForkServer
from samsa.deploy.partition_watch import PartitionWatch, restarts_on_change
from samsa.deploy.restarts import CONFIG_ERROR_EXIT, NO_RESTART, RESTART_WINDOW_S, RestartBudget
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import pid_dir
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.job_model import JobModel
from samsa.runtime.partition_monitor import Changes
from samsa.runtime.run_lock import RunLock
from samsa.runtime.state import uses_s3

log = logging.getLogger(__name__)


#: glibc malloc settings for container processes (the environment's own win). Without them a container's
#: RSS crept by about 1 MB a minute for good (free memory fragmented in malloc's arenas by the commits'
#: flushes, checkpoints and 1 MiB transfer buffers): measured with commits every 200 ms, 1.0-1.4 MB/min
#: once RocksDB's block cache was full; 0.02 MB/min with both.
CONTAINER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_ARENA_MAX": "2"}

T = TypeVar("T")

# How often a start waiting on the broker looks whether it was asked to stop.
_STOP_POLL_S = 0.1
# The environment variable giving a supervised container its supervisor's pid, and how often the container
# looks whether that supervisor is still its parent.
SUPERVISOR_PID_ENV = "SAMSA_SUPERVISOR_PID"
_ORPHAN_POLL_S = 0.5


#: What a container's process imports before its job runs: the fork server loads them once for all.
CONTAINER_MODULES = (
    "samsa.cli",
    "samsa.deploy.local",
    "samsa.runtime.container",
    "samsa.runtime.coordinator",
    "samsa.runtime.state",
)


class ContainerProcess(Protocol):
    """A container's process: a fresh interpreter (`subprocess.Popen`) or one forked by the fork server."""

    @property
    def pid(self) -> int: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


@dataclass
class _Child:
    container_id: str
    restarts: RestartBudget
    process: ContainerProcess | None = None
    restart_at: float | None = None
    done: bool = False
    rc: int | None = None


class LocalSupervisor:
    """Starts `job.container.count` container processes, prefixes their logs and restarts crashed ones."""

    def __init__(self, job: JobConfig, container_args: Sequence[str], out: IO[str] | None = None) -> None:
        self.job = job
        self._container_args = list(container_args)
        self._out = out or sys.stdout
        self._out_lock = threading.Lock()
        self._stopping = False
        self._children: list[_Child] = []
        self._pumps: list[threading.Thread] = []
        self.failed = False
        #: A container stopped on a configuration error: the job stops, exit status 2 like a config error
        #: found before the containers start.
        self.config_error = False
        self._fork_server: ForkServer | None = None
        self._fork_failed = False  # a spawn failed: the fork server forks no more

    def stop(self) -> None:
        """Graceful stop of every container (signal-handler safe)."""
        self._stopping = True

    def _start_fork_server(self) -> None:
        """Starts the fork server (`deploy.local.fork.server`), loading while the job is prepared."""
        if not self.job.local_fork_server:
            return
        try:
            self._fork_server = ForkServer(
                CONTAINER_MODULES, uses_s3(self.job), {**CONTAINER_MALLOC_ENV, **os.environ}
            )
        except OSError as e:
            log.warning("cannot start the fork server (%s); containers start as fresh interpreters", e)

    def _stop_fork_server(self) -> None:
        if self._fork_server is not None:
            self._fork_server.close()
            self._fork_server = None

    def _spawn(self, child: _Child) -> None:
        argv = ["run", "--container-id", child.container_id, "--from-supervisor", *self._container_args]
        how = "forked"
        if self._fork_server is not None and not self._fork_failed:
            server = self._fork_server
            try:
                # Its parent is the fork server: the container's orphan watch looks at that one, which
                # exits when this supervisor is gone.
                child.process = server.spawn(
                    "samsa.cli:main", argv, {SUPERVISOR_PID_ENV: str(server.pid)}, name=child.container_id
                )
            except ForkServerError as e:
                log.warning("%s; containers start as fresh interpreters from now on", e)
                # Kept until the job ends all the same: the containers it forked are its children, and
                # they stop when it goes (their orphan watch looks at it).
                self._fork_failed = True
        if child.process is None:
            how = "fresh interpreter"
            # Own session: a terminal's Ctrl-C reaches only the supervisor, which stops containers in order.
            child.process = subprocess.Popen(
                [sys.executable, "-m", "samsa.cli", *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**CONTAINER_MALLOC_ENV, **os.environ, SUPERVISOR_PID_ENV: str(os.getpid())},
            )
        pump = threading.Thread(target=self._pump, args=(child.container_id, child.process), daemon=True)
        pump.start()
        self._pumps.append(pump)
        log.info("started container %s (pid %d, %s)", child.container_id, child.process.pid, how)

    def _pump(self, container_id: str, process: ContainerProcess) -> None:
        assert process.stdout is not None
        prefix = f"[container-{container_id}] "
        for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._out_lock:
                self._out.write(prefix + line + "\n")
                self._out.flush()

    def run(self) -> int:
        """Runs until every container has finished or a stop is requested; returns an exit code. A second
        supervisor of the job on this machine is refused at once."""
        lock = RunLock(pid_dir(self.job) / "supervisor.lock", f"job {self.job.job_key}")
        lock.acquire()
        try:
            self._start_fork_server()
            status = self._supervise()
            log.info("job %s stopped (exit %d)", self.job.job_key, status)
            return status
        finally:
            self._stop_fork_server()
            lock.release()

    def _supervise(self) -> int:
        while True:
            log.info("preparing job %s: checking its topics, publishing its job model", self.job.job_key)
            model = unless_stopped(JobCoordinator(self.job).prepare, lambda: self._stopping)
            if model is None:
                log.info("stopped before any container started")
                return 1 if self.failed else 0
            changes = self._run_model(model)
            if not changes or self._stopping or self.failed:
                return 2 if self.config_error else 1 if self.failed else 0
            if not restarts_on_change(self.job, changes):
                self.failed = True
                return 1

    def _run_model(self, model: JobModel) -> Changes:
        """Runs the model's containers until all have finished, a stop, or an input's partition count
        differs from the model's: then the containers are stopped and the changed streams returned."""
        self._children = [_Child(c.id, RestartBudget(self.job.max_restarts)) for c in model.containers]
        for child in self._children:
            self._spawn(child)
        changes: Changes = {}
        with PartitionWatch(self.job, model) as watch:
            while not self._stopping and not all(c.done for c in self._children):
                changes = watch.changed()
                if changes:
                    break
                now = time.monotonic()
                for child in self._children:
                    self._watch(child, now)
                time.sleep(0.1)
        self._stop_all()
        return changes

    def _watch(self, child: _Child, now: float) -> None:
        if child.done:
            return
        if child.process is None:
            if child.restart_at is not None and now >= child.restart_at:
                child.restart_at = None
                self._spawn(child)
            return
        rc = child.process.poll()
        if rc is None:
            return
        child.process = None
        if rc == 0:
            child.done, child.rc = True, 0
            log.info("container %s finished", child.container_id)
            return
        why = NO_RESTART.get(rc)
        if why is not None:
            # A restart would meet the same cause again: the job stops.
            log.error("container %s of job %s %s", child.container_id, self.job.job_key, why)
            child.done, child.rc = True, rc
            self.failed = True
            self.config_error = self.config_error or rc == CONFIG_ERROR_EXIT
            self._stopping = True
            return
        delay = child.restarts.next_delay(now)
        if delay is None:
            log.error(
                "container %s exited with %d and crashed %d times in %d s (deploy.local.max.restarts=%d); "
                "stopping the job: read its log above for the cause",
                child.container_id,
                rc,
                child.restarts.recent(now) + 1,
                int(RESTART_WINDOW_S),
                self.job.max_restarts,
            )
            child.done, child.rc = True, rc
            self.failed = True
            self._stopping = True
            return
        child.restart_at = now + delay
        log.warning("container %s exited with %d; restarting in %.1f s", child.container_id, rc, delay)

    def _stop_all(self) -> None:
        running = [c for c in self._children if c.process is not None and c.process.poll() is None]
        for child in running:
            assert child.process is not None
            child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.job.shutdown_ms / 1000
        for child in running:
            assert child.process is not None
            try:
                child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("container %s did not stop within task.shutdown.ms; killing it", child.container_id)
                child.process.kill()
                child.process.wait()
                self.failed = True
                continue
            if child.process.returncode not in (0, -signal.SIGTERM):
                self.failed = True
        for child in self._children:
            if child.process is not None:
                child.rc = child.process.returncode
        for pump in self._pumps:
            pump.join(timeout=5)  # the last lines of a container (a traceback) must reach the log


def unless_stopped(call: Callable[[], T], stopped: Callable[[], bool]) -> T | None:
    """`call()` on a thread of its own, waited for until it returns or `stopped()`: then None, and the
    call is abandoned (a start waiting on an unreachable broker would hold up Ctrl-C for its timeout)."""
    result: list[T] = []
    error: list[BaseException] = []
    done = threading.Event()

    def target() -> None:
        try:
            result.append(call())
        except BaseException as e:
            error.append(e)
        finally:
            done.set()

    # A daemon thread: an abandoned call does not keep the process alive.
    threading.Thread(target=target, name="samsa-start", daemon=True).start()
    while not done.wait(_STOP_POLL_S):
        if stopped():
            return None
    if error:
        raise error[0]
    return result[0]


def stop_when_orphaned(stop: Callable[[], None], poll_s: float = _ORPHAN_POLL_S) -> threading.Thread | None:
    """In a container the local supervisor started: calls `stop()` once when the supervisor is gone (killed
    with -9, say: the container is then re-parented, and its parent pid changes), so the container stops
    gracefully (final commit, lock released) instead of running on as an orphan that a new `samsa run` of
    the job would meet as "already running". The supervisor names itself in `SAMSA_SUPERVISOR_PID`; without
    it (a container run alone) nothing is watched and None is returned. A parent-pid watch rather than
    Linux's PR_SET_PDEATHSIG: it works on every POSIX system and needs no signal from the kernel."""
    named = os.environ.get(SUPERVISOR_PID_ENV)
    if not named:
        return None
    supervisor = int(named)

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(poll_s)
        log.warning(
            "the supervisor is gone (this container's parent, pid %d: the supervisor or its fork server); "
            "stopping gracefully",
            supervisor,
        )
        stop()

    thread = threading.Thread(target=watch, name="samsa-supervisor-watch", daemon=True)
    thread.start()
    return thread


def install_stop_handlers(stop: Any, logger: logging.Logger | None = None) -> None:
    """SIGINT and SIGTERM call `stop()` once; the work in hand finishes and state is committed. The line
    saying so goes to `logger`, by default the logger of the module `stop` comes from (the container's, the
    supervisor's), not this one's: a container's log should not read as if the supervisor stopped."""
    module = getattr(stop, "__module__", None)
    told = logger or (logging.getLogger(module) if module else log)

    def handler(signum: int, frame: object) -> None:
        told.info("received %s; stopping gracefully", signal.Signals(signum).name)
        stop()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
