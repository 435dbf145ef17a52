"""Crash points for failure tests: `SAMSA_CRASH_AT=<point>` SIGKILLs the process when it gets there.

With `SAMSA_CRASH_ONCE=<file>` it crashes only while that file does not exist (and creates it first), so a
restarted container runs on; `SAMSA_CRASH_SKIP=<n>` passes the point n times first (the start-up commit
is one). Points: `after-snapshot` (sync phase done), `after-upload` (before the
checkpoint record), `after-checkpoint` (record durable, before cleanup).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

_POINT = os.environ.get("SAMSA_CRASH_AT")
_ONCE = os.environ.get("SAMSA_CRASH_ONCE")
_skip = int(os.environ.get("SAMSA_CRASH_SKIP", "0"))


def crash_point(name: str) -> None:
    """Dies like `kill -9` here when the environment asks for it; does nothing otherwise."""
    global _skip
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
