"""What the user's task code raised, told with the notes on it and with the traceback of their own code."""

from __future__ import annotations

import inspect
import os
import signal
import traceback
from collections.abc import Callable
from pathlib import Path

from samsa.runtime.exceptions import UserCodeError

# Innermost frames kept whoever's they are: where the error was raised says what failed.
_TAIL = 3
_ROOT = str(Path(__file__).resolve().parents[1]) + os.sep
# Folders of the package that hold users' code, not Samsa's (jobs, tests, benchmarks).
_NOT_SAMSA = tuple(_ROOT + folder + os.sep for folder in ("examples", "tests", "bench"))

#: What the task's code raising counts as its failure. SystemExit and KeyboardInterrupt too: a task (or a
#: library it calls) calling sys.exit() would otherwise end the container as if it had finished, exit 0,
#: its partitions left unprocessed and not restarted.
USER_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit, KeyboardInterrupt)


def interrupted(error: BaseException) -> bool:
    """Whether `error`, raised in the task's code, may be a real Ctrl-C rather than the task's own doing: a
    KeyboardInterrupt while SIGINT raises one (Python's default handler: a TestRunner in a test session),
    which must go on interrupting. Under `samsa run` SIGINT stops the container gracefully and raises
    nothing, so a KeyboardInterrupt there is the task's own."""
    return (
        isinstance(error, KeyboardInterrupt) and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )


def call_task(
    task: str, call: str, function: Callable[..., object], *args: object, failed: str = "", then: str = ""
) -> None:
    """`function(*args)`: the code of task `task` that `call` names ("init()", "process() on in#0@7"). What it
    raises is its failure, a UserCodeError "task {task}: {failed}: {what it raised}{then}" (`failed` defaults
    to "{call} failed"); a real Ctrl-C goes on interrupting (`interrupted`). What it returns is `returned`'s
    to check."""
    try:
        result = function(*args)
    except USER_FAILURES as e:
        if interrupted(e):
            raise
        raise UserCodeError(f"task {task}: {failed or call + ' failed'}: {described(e)}{then}") from e
    if result is not None:
        returned(result, task, call)


def returned(result: object, task: str, call: str) -> None:
    """Raises UserCodeError when a task's method returned what an async or generator function returns (a
    lambda or partial of one passes the check at start): its code never ran. Called for results not None
    only, off the per-message path."""
    if inspect.isawaitable(result) or inspect.isgenerator(result) or inspect.isasyncgen(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # no "coroutine ... was never awaited" warning on top of the error
        method = call.split("(", 1)[0]
        raise UserCodeError(
            f"task {task}: {call} returned {type(result).__name__} {result!r} instead of doing its work: its "
            f"code never ran. Samsa runs {method}() synchronously and has no async tasks: make {method} a "
            "plain function (no async, no await, no yield) that does its work before it returns"
        )


def escaped(error: SystemExit | KeyboardInterrupt, where: str) -> UserCodeError:
    """The failure of `where` ("container 0") when `error` came out of the job's code outside the task's
    methods (whose own are UserCodeErrors already): a serde, a store engine, an adjunct store's extractor, a
    factory, or a library one of them calls. Left to go up, it would end the process as if the container
    had finished (exit 0, its partitions unprocessed and never restarted)."""
    what = "called sys.exit()" if isinstance(error, SystemExit) else "raised KeyboardInterrupt"
    tb, at = error.__traceback__, ""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:  # the innermost frame: the code that called sys.exit()
        at = f" in {tb.tb_frame.f_code.co_name}() at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
    return UserCodeError(
        f"{where}: the job's code outside its task's methods {what} ({described(error)}{at}): a serde, a "
        "store engine, an adjunct store's extractor, a factory, or a library one of them calls. A container "
        "does not stop that way: it fails, and a restart resumes from its last checkpoint; raise an "
        "exception there instead (a serde's is a bad input record, which task.deserialization.error.policy "
        "handles)"
    )


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
