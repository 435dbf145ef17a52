"""Retries with jittered exponential backoff, bounded by elapsed time (the only importer of `tenacity`)."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from typing import TypeVar

import tenacity

T = TypeVar("T")

_log = logging.getLogger(__name__)


def retry_call(
    fn: Callable[[], T],
    *,
    retriable: Callable[[BaseException], bool],
    max_duration_s: float,
    what: str,
    bound_key: str | None = None,
    initial_delay_s: float = 0.1,
    max_delay_s: float = 10.0,
    factor: float = 2.0,
    jitter: float = 1.0,
    max_attempts: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: Callable[[], float] = random.random,
) -> T:
    """Calls `fn` until it returns, retrying the errors `retriable` accepts, and returns its result.

    The n-th retry waits `min(max_delay_s, initial_delay_s * factor**(n-1))`, less a random part of it:
    `jitter` 1.0 is full jitter (anywhere from 0 to the delay), 0.1 takes off at most a tenth, 0 none. No
    retry starts once `max_duration_s` has passed since the first call (`math.inf`: no time bound) or after
    `max_attempts` calls, and no wait runs past that time. The last error is re-raised as is, as is at once
    any error `retriable` refuses. Each retry is logged at WARNING, naming `what` and, under a time bound,
    the time left before giving up and `bound_key`, the config key that sets `max_duration_s`.
    """
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter {jitter} is not between 0 and 1")
    if max_attempts is not None and max_attempts < 1:
        raise ValueError(f"max_attempts {max_attempts} is below 1")
    deadline = clock() + max_duration_s

    def stop(state: tenacity.RetryCallState) -> bool:
        out_of_attempts = max_attempts is not None and state.attempt_number >= max_attempts
        return out_of_attempts or clock() >= deadline

    def wait(state: tenacity.RetryCallState) -> float:
        delay = min(max_delay_s, initial_delay_s * factor ** (state.attempt_number - 1))
        delay *= 1.0 - jitter * rng()
        return max(0.0, min(delay, deadline - clock()))

    def log_retry(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        # A bound of minutes (S3's default is 15) must say so, or a dead endpoint looks like a hang.
        left = "" if math.isinf(max_duration_s) else f"; giving up in {span(max(0.0, deadline - clock()))}"
        _log.warning(
            "%s failed (attempt %d: %s: %s); retrying in %.2f s%s%s",
            what,
            state.attempt_number,
            type(error).__name__,
            error,
            state.next_action.sleep if state.next_action is not None else 0.0,
            left,
            f" ({bound_key})" if left and bound_key else "",
        )

    retrying = tenacity.Retrying(
        stop=stop,
        wait=wait,
        retry=tenacity.retry_if_exception(retriable),
        before_sleep=log_retry,
        sleep=sleep,
        reraise=True,
    )
    return retrying(fn)


def span(seconds: float) -> str:
    """A duration as people read it: `14m20s`, `1h05m`, `42s`, `0.5s`."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
