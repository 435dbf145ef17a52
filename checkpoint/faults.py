"""Crash points for failure tests: named places in a commit where a test can make the container die.

Two ways to crash. In a subprocess test, `SAMSA_CRASH_AT=<point>` SIGKILLs the process when it gets there:
with `SAMSA_CRASH_ONCE=<file>` only while that file does not exist (it is created first), so a restarted
container runs on; `SAMSA_CRASH_SKIP=<n>` passes the point n times first (the start-up commit is one). In
one process (the deterministic scheduler), `install_crash_hook(hook)` replaces the environment: the hook
sees every point and may raise `SimulatedCrash`, which the container turns into a kill -9 of itself.

Points, in commit order: `before-snapshot` (offsets captured, nothing flushed), `after-snapshot` (sync
phase done: stores and outputs flushed, local checkpoints taken), `after-upload` (backends uploaded,
marker files written, no checkpoint record), `after-checkpoint` (record durable, before cleanup),
`after-cleanup` (the commit is over).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

COMMIT_POINTS = ("before-snapshot", "after-snapshot", "after-upload", "after-checkpoint", "after-cleanup")

CrashHook = Callable[[str], None]

_POINT = os.environ.get("SAMSA_CRASH_AT")
_ONCE = os.environ.get("SAMSA_CRASH_ONCE")
_skip = int(os.environ.get("SAMSA_CRASH_SKIP", "0"))
_hook: CrashHook | None = None


class SimulatedCrash(BaseException):
    """An in-process kill -9 at a crash point. A BaseException, so no `except Exception` of the task or the
    commit path takes it for a failure to record: it unwinds to the container, which then dies without a
    final commit, a flush or a close (`Container.crash`)."""

    def __init__(self, point: str) -> None:
        super().__init__(f"simulated crash at {point}")
        self.point = point


def install_crash_hook(hook: CrashHook | None) -> CrashHook | None:
    """Makes `hook` see every crash point instead of the environment (None: back to the environment);
    returns the hook it replaces."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def crash_point(name: str) -> None:
    """Dies here when the installed hook or the environment asks for it; does nothing otherwise."""
    global _skip
    if _hook is not None:
        _hook(name)
        return
    if name != _POINT:
        return
    if _skip > 0:
        _skip -= 1
        return
    if _ONCE:
        marker = Path(_ONCE)
        if marker.exists():
            return
        marker.write_text(name)
    os.kill(os.getpid(), signal.SIGKILL)
