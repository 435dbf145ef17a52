"""The watchdog: reports a task whose process() call does not return."""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samsa.runtime.run_loop import RunLoop

log = logging.getLogger(__name__)

# Asked to stop, a container still in a chunk this long has its stack logged before it may be killed.
STOP_REPORT_S = 1.0
# The longest pause between two looks (a small threshold looks more often).
_MAX_TICK_S = 1.0
_MIN_TICK_S = 0.02


def _chunk_codes() -> tuple[CodeType, frozenset[CodeType]]:
    """The run loop's chunk method (`RunLoop._process`), and those of it that hold the message in hand."""
    from samsa.runtime.run_loop import RunLoop

    inner = (RunLoop._process, RunLoop._fan_out, RunLoop._process_eos, RunLoop._process_one)
    return RunLoop._process.__code__, frozenset(f.__code__ for f in inner)


class _Step:
    """A process() call of the run loop seen in progress: its chunk's frame, the (task, offset) in hand,
    and when the watchdog first saw it."""

    __slots__ = ("frame", "held", "since", "stop_told", "warned")

    def __init__(self, frame: FrameType, since: float, held: tuple[str | None, int | None]) -> None:
        self.frame = frame
        self.held = held
        self.since = since
        self.warned = since  # when it was last warned about (`since`: not yet)
        self.stop_told = False  # the stop asked for waits on it: said once, with the stack


class StepWatchdog:
    """Looks at the run loop's thread every second, off its hot path (the loop records nothing: the
    watchdog finds the chunk in the thread's stack): a call, the same message in hand, older than `warn_s`
    is a process() that does not return, warned about once, then again every `warn_s` while it lasts, and
    told when it moves on."""

    def __init__(
        self,
        name: str,
        loop: RunLoop,
        warn_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`name` says whose loop it is ("container 0"); `clock` is a test's."""
        self._name = name
        self._loop = loop
        self._warn_s = warn_s
        self._clock = clock
        self._chunk, self._holders = _chunk_codes()
        self._step: _Step | None = None
        self._stop_asked = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Starts the looking thread (a daemon: it never holds the process alive)."""
        tick = min(_MAX_TICK_S, max(_MIN_TICK_S, self._warn_s / 4))
        # The thread holds the watchdog weakly: a container dropped without being closed (a test's) is not
        # kept alive by it, with its loop and Kafka clients, until the process ends.
        self._thread = threading.Thread(
            target=_watch, args=(weakref.ref(self), self._done, tick), name="samsa-watchdog", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Ends the looking thread (idempotent), telling a chunk it warned about that has ended since."""
        self._done.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * _MAX_TICK_S)
        step = self._step
        if step is not None and step.warned > step.since:
            try:
                self.check()  # the loop stopped or failed once the call returned: "moved on" comes first
            except Exception as e:
                log.debug("%s: the watchdog's last look failed: %r", self._name, e)
        self._step = None

    def stopping(self) -> None:
        """The container is asked to stop: a chunk in progress for over a second is reported at the next
        look, with its stack, before a supervisor may kill the container (safe from a signal handler)."""
        self._stop_asked = True

    def stuck_seconds(self, task: str) -> float:
        """How long `task` has been in the process() call in progress (0 when it is in none)."""
        step = self._step
        if step is None:
            return 0.0
        where = self._where(step.frame)
        return max(0.0, self._clock() - step.since) if where is not None and where[0] == task else 0.0

    def check(self) -> None:
        """One look at the loop's thread."""
        now = self._clock()
        frame = self._chunk_frame()
        held = self._in_hand(frame, self._top()) if frame is not None else (None, None)
        step = self._step
        # A chunk is many calls (it ends at the next commit or window at the latest): one that moved to
        # another message is not stuck, however long the chunk has run.
        if step is not None and (step.frame is not frame or (held[1] is not None and held != step.held)):
            if step.warned > step.since:
                where = self._where(step.frame)
                log.info(
                    "%s: task %s moved on after %.0f s in process() on %s",
                    self._name,
                    step.held[0] or (where[0] if where else "?"),
                    now - step.since,
                    where[1] if where else "its input",
                )
            step = self._step = None
        if frame is None or self._done.is_set():
            return
        if step is None:
            self._step = _Step(frame, now, held)
            return
        age = now - step.since
        if age >= self._warn_s and now - step.warned >= self._warn_s:
            step.warned = now
            self._warn(step, age, frame, stopping=False)
        elif self._stop_asked and not step.stop_told and age >= STOP_REPORT_S:
            step.stop_told = True
            self._warn(step, age, frame, stopping=True)

    def _chunk_frame(self) -> FrameType | None:
        """The frame of the chunk the loop's thread is in, if any."""
        thread = self._loop.thread
        if thread is None:
            return None
        frame: FrameType | None = sys._current_frames().get(thread)
        while frame is not None:
            # One thread may drive several loops (the TestRunner's containers): this loop's chunk only.
            if frame.f_code is self._chunk and frame.f_locals.get("self") is self._loop:
                return frame
            frame = frame.f_back
        return None

    def _top(self) -> FrameType | None:
        """The loop thread's innermost frame now."""
        thread = self._loop.thread
        return None if thread is None else sys._current_frames().get(thread)

    def _where(self, chunk: FrameType) -> tuple[str, str] | None:
        """(task, stream#partition) of a chunk's frame."""
        buf: Any = chunk.f_locals.get("buf")
        if buf is None:
            return None
        return buf.task.name, f"{buf.ssp.stream}#{buf.ssp.partition}"

    def _in_hand(self, chunk: FrameType, top: FrameType | None) -> tuple[str | None, int | None]:
        """The task and offset of the message in hand: from the innermost of the loop's frames that hold
        one (a broadcast partition's message is in one task's hands at a time)."""
        frame = top
        while frame is not None:
            if frame.f_code in self._holders:
                names = frame.f_locals
                ti, env, offset = names.get("ti"), names.get("env"), names.get("offset")
                if frame.f_code.co_name == "_process_one" and env is not None:
                    return getattr(ti, "name", None), getattr(env, "offset", None)
                if isinstance(offset, int):
                    return None, offset
            if frame is chunk:
                break
            frame = frame.f_back
        return None, None

    def _warn(self, step: _Step, age: float, chunk: FrameType, stopping: bool) -> None:
        where = self._where(chunk)
        buf: Any = chunk.f_locals.get("buf")
        top = self._top()
        task, offset = self._in_hand(chunk, top)
        begun: int | None = None
        try:
            begun = buf.messages[buf.pos].offset()
        except Exception:  # the partition's buffer changed meanwhile: no chunk start to name
            begun = None
        name = task or (where[0] if where else "?")
        took = f"{age:.0f}" if age >= 10 else f"{age:.1f}"
        place = where[1] if where else "its input"
        at = f" at offset {offset}" if offset is not None else ""
        if begun is not None and begun != offset:
            at += f" (the chunk began at offset {begun})"
        stack = "".join(traceback.format_stack(top)) if top is not None else "  (not available)\n"
        if stopping:
            log.warning(
                "%s: asked to stop while task %s has been in process() on %s%s for %s s; it stops once "
                "that call returns, and a supervisor kills it after task.shutdown.ms. The loop thread's "
                "stack:\n%s",
                self._name,
                name,
                place,
                at,
                took,
                stack.rstrip("\n"),
            )
            return
        log.warning(
            "%s: task %s has been in process() on %s%s for %s s (task.process.warn.ms=%d): a blocking "
            "call in process() (a request without a timeout, a lock, an endless loop) holds the container's "
            "only loop thread, and the job cannot commit meanwhile; give the call a timeout. The loop "
            "thread's stack:\n%s",
            self._name,
            name,
            place,
            at,
            took,
            round(self._warn_s * 1000),
            stack.rstrip("\n"),
        )


def _watch(ref: weakref.ref[StepWatchdog], done: threading.Event, tick: float) -> None:
    """The looking thread: a look every `tick` until closed, or until the watchdog is gone."""
    while not done.wait(tick):
        watchdog = ref()
        if watchdog is None:
            return
        try:
            watchdog.check()
        except Exception as e:  # a look gone wrong must not end the watch, nor the container
            log.debug("%s: the watchdog's look failed: %r", watchdog._name, e)
        del watchdog
