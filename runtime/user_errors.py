"""What the user's task code raised, told with the notes on it and with the traceback of their own code."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from samsa.runtime.exceptions import UserCodeError

# Innermost frames kept whoever's they are: where the error was raised says what failed.
_TAIL = 3
_ROOT = str(Path(__file__).resolve().parents[1]) + os.sep
# Folders of the package that hold users' code, not Samsa's (jobs, tests, benchmarks).
_NOT_SAMSA = tuple(_ROOT + folder + os.sep for folder in ("examples", "tests", "bench"))


def described(error: BaseException) -> str:
    """`repr(error)` with the notes layers added to it (a store names itself and the call), for a message."""
    notes = [n for n in getattr(error, "__notes__", ()) if isinstance(n, str)]
    return "; ".join([repr(error), *notes])


def explain(error: BaseException, full: bool = False) -> str:
    """The error's message and notes; when the user's code failed, followed by what it raised with its
    traceback: the user's frames and the innermost few (`full`: every frame of the whole chain)."""
    told = [str(error), *(n for n in getattr(error, "__notes__", ()) if isinstance(n, str))]
    cause = _user_failure(error)
    if cause is None:
        return "\n".join(told)
    chain = traceback.TracebackException.from_exception(cause)
    lines = [line.rstrip("\n") for line in chain.format()] if full else _chain(chain)
    return "\n".join([*told, *lines])


def _user_failure(error: BaseException) -> BaseException | None:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, UserCodeError):
            return current.__cause__
        current = current.__cause__
    return None


def _chain(te: traceback.TracebackException) -> list[str]:
    lines: list[str] = []
    if te.__cause__ is not None:
        lines += _chain(te.__cause__)
        lines += ["", "The above exception was the direct cause of the following exception:", ""]
    elif te.__context__ is not None and not te.__suppress_context__:
        lines += _chain(te.__context__)
        lines += ["", "During handling of the above exception, another exception occurred:", ""]
    if te.stack:
        lines.append("Traceback (most recent call last):")
        lines += _frames(te.stack)
    lines += [line.rstrip("\n") for line in te.format_exception_only()]
    return lines


def _frames(stack: traceback.StackSummary) -> list[str]:
    """The frames from the user's outermost on, less Samsa's own between theirs and the innermost few."""
    ours = [_is_samsa(frame.filename) for frame in stack]
    first = ours.index(False) if False in ours else max(0, len(stack) - _TAIL)
    lines: list[str] = []
    skipped = 0
    for i in range(first, len(stack)):
        if ours[i] and i < len(stack) - _TAIL:
            skipped += 1
            continue
        if skipped:
            lines.append(f"  ... {skipped} frame(s) of Samsa ...")
            skipped = 0
        lines += [chunk.rstrip("\n") for chunk in traceback.StackSummary.from_list([stack[i]]).format()]
    return lines


def _is_samsa(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_ROOT) and not path.startswith(_NOT_SAMSA)
