"""An executor that runs nothing by itself: submitted work waits in a queue until a driver runs it."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class DeferredWork(Future[Any]):
    """Queued work (a commit's async phase); asking for its result runs it on the asking thread."""

    def __init__(
        self, executor: DeterministicExecutor, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> None:
        super().__init__()
        self._executor = executor
        self._fn = fn
        self._args = args
        owner = getattr(fn, "__self__", None)
        #: What the work is, for traces: the task whose commit it is when it is a commit phase.
        self.label = str(getattr(owner, "task_name", getattr(fn, "__name__", "work")))

    def result(self, timeout: float | None = None) -> Any:
        self._executor.run(self)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._executor.run(self)
        return super().exception(timeout)


class DeterministicExecutor(Executor):
    """Queues submitted work; `run_next`/`run` execute it on the caller's thread, in the order a driver
    picks. Work not run for a while is a stalled commit thread; `discard` is the work a crash kills."""

    def __init__(self) -> None:
        self.queue: list[DeferredWork] = []
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._shut:
            raise RuntimeError("cannot submit work to a shut-down DeterministicExecutor")
        if kwargs:
            raise TypeError("DeterministicExecutor.submit takes positional arguments only")
        work = DeferredWork(self, fn, args)
        self.queue.append(work)
        return work

    def run(self, work: DeferredWork) -> None:
        """Runs `work` now if it is still queued; an exception it raises propagates (and is its result)."""
        if work not in self.queue:
            return
        self.queue.remove(work)
        if not work.set_running_or_notify_cancel():
            return
        try:
            value = work._fn(*work._args)
        except BaseException as e:
            work.set_exception(e)
            raise
        work.set_result(value)

    def run_next(self, index: int = 0) -> DeferredWork:
        """Runs the `index`-th queued work; returns it."""
        work = self.queue[index]
        self.run(work)
        return work

    def discard(self) -> None:
        """Cancels all queued work: what a process crash does to its threads' pending work."""
        queued, self.queue = self.queue, []
        for work in queued:
            work.cancel()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Like a thread pool's: with `wait`, the queued work runs first (in submission order)."""
        if cancel_futures:
            self.discard()
        while wait and self.queue:
            self.run_next()
        self._shut = True
