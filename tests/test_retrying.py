"""retry_call: backoff, jitter, time and attempt bounds, what is retried, what is re-raised, logging."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import pytest

from samsa.retrying import retry_call, span


class Transient(Exception):
    pass


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(times: int, result: str = "ok", error: type[Exception] = Transient) -> Callable[[], str]:
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise error(f"failure {calls['n']}")
        return result

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, Transient)


def call(fn: Callable[[], str], time: FakeTime, **kwargs: object) -> str:
    options: dict[str, object] = {
        "retriable": is_transient,
        "max_duration_s": 60.0,
        "what": "test op",
        "sleep": time.sleep,
        "clock": time.clock,
        "jitter": 0.0,
    }
    options.update(kwargs)
    return retry_call(fn, **options)  # type: ignore[arg-type]


def test_first_success_never_sleeps() -> None:
    time = FakeTime()
    assert call(failing(0), time) == "ok"
    assert time.sleeps == []


def test_delays_grow_exponentially_up_to_the_cap() -> None:
    time = FakeTime()
    fn = failing(6)
    assert call(fn, time, initial_delay_s=0.1, max_delay_s=1.0) == "ok"
    assert time.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert fn.calls["n"] == 7  # type: ignore[attr-defined]


def test_full_jitter_draws_below_the_delay() -> None:
    time = FakeTime()
    draws = iter([0.5, 0.0, 0.99])
    call(failing(3), time, initial_delay_s=1.0, jitter=1.0, rng=lambda: next(draws))
    assert time.sleeps == pytest.approx([0.5, 2.0, 0.04])


def test_proportional_jitter_takes_off_at_most_its_fraction() -> None:
    time = FakeTime()
    call(failing(2), time, initial_delay_s=1.0, jitter=0.1, rng=lambda: 1.0)
    assert time.sleeps == pytest.approx([0.9, 1.8])


def test_non_retriable_error_is_raised_at_once() -> None:
    time = FakeTime()
    fn = failing(5, error=KeyError)
    with pytest.raises(KeyError, match="failure 1"):
        call(fn, time)
    assert fn.calls["n"] == 1  # type: ignore[attr-defined]
    assert time.sleeps == []


def test_time_budget_reraises_the_last_error_itself() -> None:
    time = FakeTime()
    start = time.now
    fn = failing(1000)
    with pytest.raises(Transient, match=r"failure \d+") as info:
        call(fn, time, max_duration_s=5.0, initial_delay_s=1.0, max_delay_s=2.0)
    # Waits 1, 2, 2 (5 s spent, the last wait cut to what was left): 4 calls, the last error re-raised.
    assert time.sleeps == pytest.approx([1.0, 2.0, 2.0])
    assert time.now - start == pytest.approx(5.0)
    assert str(info.value) == "failure 4"
    assert type(info.value) is Transient


def test_no_wait_runs_past_the_deadline() -> None:
    time = FakeTime()
    with pytest.raises(Transient):
        call(failing(1000), time, max_duration_s=2.5, initial_delay_s=1.0, max_delay_s=10.0)
    assert time.sleeps == pytest.approx([1.0, 1.5])


def test_attempt_bound() -> None:
    time = FakeTime()
    fn = failing(10)
    with pytest.raises(Transient, match="failure 3"):
        call(fn, time, max_attempts=3)
    assert fn.calls["n"] == 3  # type: ignore[attr-defined]
    assert call(failing(2), FakeTime(), max_attempts=3) == "ok"


def test_each_retry_is_logged_naming_what(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="samsa.retrying"):
        call(failing(2), FakeTime(), what="put of blob b1")
    retries = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(retries) == 2
    assert all("put of blob b1" in r.getMessage() for r in retries)
    assert "failure 1" in retries[0].getMessage()


def test_a_retry_under_a_time_bound_says_when_it_gives_up_and_the_key_that_sets_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = FakeTime()
    with caplog.at_level(logging.WARNING, logger="samsa.retrying"):
        call(failing(1), time, max_duration_s=900.0, bound_key="x.retry.ms")
        call(failing(1), time, max_duration_s=math.inf, bound_key="x.retry.ms")
    bounded, unbounded = (r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert bounded.endswith("retrying in 0.10 s; giving up in 15m00s (x.retry.ms)"), bounded
    assert "giving up" not in unbounded and "x.retry.ms" not in unbounded


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.25, "0.2s"), (42.4, "42s"), (860, "14m20s"), (3900, "1h05m")]
)
def test_spans_read_as_people_write_them(seconds: float, text: str) -> None:
    assert span(seconds) == text


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="jitter"):
        call(failing(0), FakeTime(), jitter=1.5)
    with pytest.raises(ValueError, match="max_attempts"):
        call(failing(0), FakeTime(), max_attempts=0)


def test_real_sleep_and_clock_by_default() -> None:
    fn = failing(2)
    assert retry_call(fn, retriable=is_transient, max_duration_s=5.0, initial_delay_s=0.001, what="t") == "ok"
    assert fn.calls["n"] == 3  # type: ignore[attr-defined]
