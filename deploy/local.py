"""Local deployment: runs a job's containers as supervised processes on this machine."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from samsa.deploy.restarts import RESTART_WINDOW_S, RestartBudget
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator

log = logging.getLogger(__name__)


@dataclass
class _Child:
    container_id: str
    restarts: RestartBudget
    process: subprocess.Popen[bytes] | None = None
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

    def stop(self) -> None:
        """Graceful stop of every container (signal-handler safe)."""
        self._stopping = True

    def _spawn(self, child: _Child) -> None:
        cmd = [
            sys.executable,
            "-m",
            "samsa.cli",
            "run",
            "--container-id",
            child.container_id,
            "--from-supervisor",
            *self._container_args,
        ]
        # Own session: a terminal's Ctrl-C reaches only the supervisor, which stops containers in order.
        child.process = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=os.environ.copy(),
        )
        pump = threading.Thread(target=self._pump, args=(child.container_id, child.process), daemon=True)
        pump.start()
        self._pumps.append(pump)
        log.info("started container %s (pid %d)", child.container_id, child.process.pid)

    def _pump(self, container_id: str, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        prefix = f"[container-{container_id}] "
        for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._out_lock:
                self._out.write(prefix + line + "\n")
                self._out.flush()

    def run(self) -> int:
        """Runs until every container has finished or a stop is requested; returns an exit code."""
        model = JobCoordinator(self.job).prepare()
        self._children = [_Child(c.id, RestartBudget(self.job.max_restarts)) for c in model.containers]
        for child in self._children:
            self._spawn(child)
        while not self._stopping and not all(c.done for c in self._children):
            now = time.monotonic()
            for child in self._children:
                self._watch(child, now)
            time.sleep(0.1)
        self._stop_all()
        return 1 if self.failed else 0

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


def install_stop_handlers(stop: Any) -> None:
    """SIGINT and SIGTERM call `stop()` once; the work in hand finishes and state is committed."""

    def handler(signum: int, frame: object) -> None:
        log.info("received %s; stopping gracefully", signal.Signals(signum).name)
        stop()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
