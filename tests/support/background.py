"""Waiting for a condition, and running a job part (container, supervisor) in a thread, for tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: The least config a JobConfig accepts, for tests that need one but run no job.
MINIMAL_JOB = {
    "job.name": "x",
    "task.class": "m:C",
    "task.inputs": "kafka.x",
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "localhost:9092",
}


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Polls `predicate` until it holds; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


class Background:
    """`call(*args)` in a daemon thread; keeps what it returned or raised."""

    def __init__(self, call: Callable[..., Any], *args: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(call, *args), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[..., Any], *args: Any) -> None:
        try:
            self.result = call(*args)
        except BaseException as e:
            self.error = e

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
