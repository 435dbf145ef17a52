"""A task's callback scheduler (Samza's CallbackScheduler): timers by key, fired by the run loop."""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from samsa.runtime.exceptions import TaskError
from samsa.runtime.task import ScheduledCallback

# A timer is due half a millisecond before its timestamp: a test's clock moved by whole milliseconds in
# float seconds may land an ulp short of it, and must still fire it.
_EARLY_MS = 0.5


def epoch_offset(clock: Callable[[], float]) -> float:
    """What to add to `clock()` for epoch seconds. A driver's virtual clock (a test's) already reads as epoch
    seconds, as the in-memory system's record times do; the default monotonic clock is tied to the wall
    clock once, so a timer fires after its delay however the wall clock is set meanwhile (as Samza's)."""
    return time.time() - time.monotonic() if clock is time.monotonic else 0.0


class TaskTimers:
    """One task's pending callbacks, at most one per key, earliest first; `next_due` is the earliest's time
    by the loop's clock (seconds), which the run loop waits for like its window timer."""

    __slots__ = ("_clock", "_heap", "_offset", "_pending", "_seq", "next_due", "on_sooner", "task_name")

    def __init__(self, task_name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.task_name = task_name
        self._clock = clock
        self._offset = epoch_offset(clock)
        #: key -> (timestamp ms, sequence number, callback).
        self._pending: dict[Any, tuple[float, int, ScheduledCallback]] = {}
        # (timestamp ms, sequence number, key): a replaced or deleted key's entry stays until it surfaces.
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = 0
        self.next_due = math.inf
        #: Told the new `next_due` when a schedule brings it forward (the run loop's wake-up).
        self.on_sooner: Callable[[float], None] | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def now_ms(self) -> int:
        return round((self._clock() + self._offset) * 1000)

    def schedule(self, key: Any, timestamp_ms: float, callback: ScheduledCallback) -> None:
        try:
            hash(key)
        except TypeError:
            raise TaskError(
                f"task {self.task_name}: scheduler key {key!r} is not hashable: a timer is kept by its key; "
                "use a str, int or tuple key"
            ) from None
        if (
            isinstance(timestamp_ms, bool)
            or not isinstance(timestamp_ms, int | float)
            or not math.isfinite(timestamp_ms)
        ):
            raise TaskError(
                f"task {self.task_name}: scheduler key {key!r}: timestamp_ms={timestamp_ms!r} is not a "
                "finite number; give epoch milliseconds, e.g. context.scheduler.now_ms() + 30_000"
            )
        if not callable(callback):
            raise TaskError(
                f"task {self.task_name}: scheduler key {key!r}: callback {callback!r} is not callable; "
                "give a function taking (key, collector, coordinator)"
            )
        self._seq += 1
        self._pending[key] = (timestamp_ms, self._seq, callback)
        heapq.heappush(self._heap, (timestamp_ms, self._seq, key))
        if len(self._heap) > 2 * len(self._pending) + 64:
            self._compact()  # a key re-scheduled at every message leaves an entry each time
        due = self._due(timestamp_ms)
        if due < self.next_due:
            self.next_due = due
            if self.on_sooner is not None:
                self.on_sooner(due)

    def delete(self, key: Any) -> None:
        try:
            removed = self._pending.pop(key, None)
        except TypeError:
            return  # unhashable: never scheduled
        if removed is not None:
            self._settle()

    # Samza's names, for a ported task.
    schedule_callback = schedule
    delete_callback = delete

    def due(self, now: float) -> Iterator[tuple[Any, ScheduledCallback]]:
        """Takes the callbacks due at `now` (the loop's clock) one by one, earliest timestamp first, each
        removed before it is handed out (so it may schedule its key again); what is scheduled meanwhile
        waits for the next call, so a callback scheduling itself in the past cannot hold this call. It is due
        at once, though: the run loop processes a chunk of input between two calls (`RunLoop._owed`)."""
        last = self._seq
        pending = self._pending
        while self._heap:  # not held in a local: a callback's schedules may compact it
            timestamp, seq, key = self._heap[0]
            entry = pending.get(key)
            if entry is None or entry[1] != seq:
                heapq.heappop(self._heap)  # replaced or deleted
                continue
            if seq > last or self._due(timestamp) > now:
                break
            heapq.heappop(self._heap)
            del pending[key]
            self._settle()
            yield key, entry[2]
        self._settle()

    def _due(self, timestamp_ms: float) -> float:
        return (timestamp_ms - _EARLY_MS) / 1000 - self._offset

    def _settle(self) -> None:
        """Drops the stale entries on top and sets `next_due` from the earliest pending callback."""
        heap, pending = self._heap, self._pending
        while heap:
            _, seq, key = heap[0]
            entry = pending.get(key)
            if entry is not None and entry[1] == seq:
                self.next_due = self._due(heap[0][0])
                return
            heapq.heappop(heap)
        self.next_due = math.inf

    def _compact(self) -> None:
        self._heap = [(timestamp, seq, key) for key, (timestamp, seq, _) in self._pending.items()]
        heapq.heapify(self._heap)
