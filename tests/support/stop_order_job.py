"""A counting task that fails on the word `boom`, and a commit pool whose timer commits run late: a failure
while a commit is in flight, for the tests of what a failing container closes when."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from samsa import IncomingMessageEnvelope, MessageCollector, StreamTask, TaskContext, TaskCoordinator
from samsa.stores.exceptions import StoreClosedError


class CountThenFailTask(StreamTask):
    """Counts each key in the store `counts`; raises on the key `boom` (when: `failed_at`)."""

    failed_at: list[float] = []

    def init(self, context: TaskContext) -> None:
        self.store: Any = context.store("counts")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        if envelope.key == "boom":
            CountThenFailTask.failed_at.append(time.monotonic())
            raise ValueError("boom")
        self.store.put(envelope.key, (self.store.get(envelope.key) or 0) + 1)


class LateCommits(ThreadPoolExecutor):
    """A commit pool: the first async phase (the start-up commit's, waited for by the start) runs at once,
    each later one `delay_s` late (a slow commit thread), or once `release` is set. Records what each late
    one committed, and when it ended."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(2, "commit")
        self.delay_s = delay_s
        self.submitted = 0
        self.release = threading.Event()
        self.late_submitted = threading.Event()
        #: The input offsets of each late async phase, when (time.monotonic()) it was submitted and ended.
        self.late_offsets: list[dict[Any, int]] = []
        self.late_submitted_at: list[float] = []
        self.late_ended: list[float] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        if self.submitted == 1:
            return super().submit(fn, *args, **kwargs)
        self.late_offsets.append(dict(args[0].offsets))  # the CommitResult of its sync phase
        self.late_submitted_at.append(time.monotonic())

        def late() -> Any:
            self.release.wait(self.delay_s)
            try:
                return fn(*args, **kwargs)
            finally:
                self.late_ended.append(time.monotonic())

        future = super().submit(late)
        self.late_submitted.set()
        return future


class RecordedClosedError(StoreClosedError):
    """A StoreClosedError that records the thread it was raised in (`raised_in`)."""

    raised_in: list[str] = []

    def __init__(self, name: str) -> None:
        super().__init__(name)
        RecordedClosedError.raised_in.append(threading.current_thread().name)
