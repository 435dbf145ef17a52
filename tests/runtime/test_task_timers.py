"""A task's callback scheduler (`context.scheduler`): one timer per key, earliest first, epoch-ms times."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from samsa.runtime.config.config import Config
from samsa.runtime.exceptions import TaskError
from samsa.runtime.metrics import MetricsRegistry
from samsa.runtime.task_instance import TaskContextImpl
from samsa.runtime.timers import TaskTimers


class Clock:
    """A virtual clock in epoch seconds, as the TestRunner's."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _recorder(log: list[Any]) -> Any:
    def callback(key: Any, collector: Any, coordinator: Any) -> None:
        log.append(key)

    return callback


def _fire(timers: TaskTimers, now: float) -> list[Any]:
    """Runs what is due at `now` as the run loop does; the keys in the order called."""
    log: list[Any] = []
    for key, callback in timers.due(now):
        callback(key, None, None)
        log.append(key)
    return log


def test_the_context_has_a_scheduler_following_the_containers_clock() -> None:
    clock = Clock(1_234.5)
    context = TaskContextImpl(
        "Partition 0",
        "0",
        Config({}),
        frozenset(),
        None,  # type: ignore[arg-type]
        MetricsRegistry(),
        clock=clock,
    )
    assert isinstance(context.scheduler, TaskTimers)
    assert context.scheduler.now_ms() == 1_234_500
    clock.now += 0.25
    assert context.scheduler.now_ms() == 1_234_750


def test_due_callbacks_run_in_timestamp_order_ties_in_scheduling_order() -> None:
    clock = Clock()
    timers = TaskTimers("t", clock)
    for key, at in [
        ("c", 1_000_300),
        ("a", 1_000_100),
        ("b2", 1_000_200),
        ("b1", 1_000_200),
        ("d", 1_000_400),
    ]:
        timers.schedule(key, at, _recorder([]))
    assert timers.next_due == pytest.approx(1_000.1, abs=0.001)
    assert _fire(timers, 1_000.05) == []
    assert _fire(timers, 1_000.3) == ["a", "b2", "b1", "c"]
    assert len(timers) == 1 and timers.next_due == pytest.approx(1_000.4, abs=0.001)


def test_scheduling_a_key_again_replaces_its_timer_and_callback() -> None:
    first: list[Any] = []
    second: list[Any] = []
    timers = TaskTimers("t", Clock())
    timers.schedule("k", 1_000_100, _recorder(first))
    timers.schedule("k", 1_000_500, _recorder(second))  # later: the earlier time is gone
    assert len(timers) == 1
    assert _fire(timers, 1_000.2) == []
    assert timers.next_due == pytest.approx(1_000.5, abs=0.001)
    assert _fire(timers, 1_000.5) == ["k"]
    assert first == [] and second == ["k"]


def test_delete_drops_the_pending_timer() -> None:
    timers = TaskTimers("t", Clock())
    timers.schedule("k", 1_000_100, _recorder([]))
    timers.schedule("j", 1_000_200, _recorder([]))
    timers.delete("k")
    timers.delete("never scheduled")
    timers.delete(["unhashable"])
    assert timers.next_due == pytest.approx(1_000.2, abs=0.001)
    timers.delete_callback("j")  # Samza's name
    assert timers.next_due == math.inf and len(timers) == 0
    assert _fire(timers, 2_000.0) == []


def test_a_timestamp_reached_by_whole_milliseconds_fires_despite_float_rounding() -> None:
    clock = Clock()
    timers = TaskTimers("t", clock)
    timers.schedule_callback("k", timers.now_ms() + 300, _recorder([]))  # Samza's name
    timers.schedule("later", timers.now_ms() + 301, _recorder([]))
    for _ in range(3):
        clock.now += 0.1  # 1000.0 + 0.1 + 0.1 + 0.1 is 1000.3000000000001 or a hair under
    assert _fire(timers, clock()) == ["k"]


def test_a_callback_may_schedule_its_key_again_and_what_it_schedules_for_now_waits_a_round() -> None:
    timers = TaskTimers("t", Clock())
    calls: list[Any] = []

    def again(key: Any, collector: Any, coordinator: Any) -> None:
        calls.append(key)
        timers.schedule(key, 0, again)  # in the past: due at once, but not in this round

    timers.schedule("k", 1_000_000, again)
    assert _fire(timers, 1_000.0) == ["k"]
    assert len(timers) == 1 and timers.next_due <= 1_000.0
    assert _fire(timers, 1_000.0) == ["k"]


def test_a_callback_deleting_a_due_key_stops_it() -> None:
    timers = TaskTimers("t", Clock())

    def first(key: Any, collector: Any, coordinator: Any) -> None:
        timers.delete("second")

    timers.schedule("first", 1_000_000, first)
    timers.schedule("second", 1_000_001, _recorder([]))
    assert _fire(timers, 1_000.5) == ["first"]
    assert len(timers) == 0 and timers.next_due == math.inf


def test_a_key_rescheduled_at_every_message_keeps_the_queue_small() -> None:
    timers = TaskTimers("t", Clock())
    for i in range(10_000):
        timers.schedule(f"k{i % 3}", 1_000_000 + i, _recorder([]))
    assert len(timers) == 3
    assert len(timers._heap) < 100
    assert _fire(timers, 2_000.0) == ["k1", "k2", "k0"]  # their last times: 9997, 9998, 9999


def test_the_run_loop_is_told_only_when_a_timer_comes_sooner() -> None:
    timers = TaskTimers("t", Clock())
    told: list[float] = []
    timers.on_sooner = told.append
    timers.schedule("a", 1_000_500, _recorder([]))
    timers.schedule("b", 1_000_900, _recorder([]))
    timers.schedule("c", 1_000_100, _recorder([]))
    assert told == [pytest.approx(1_000.5, abs=0.001), pytest.approx(1_000.1, abs=0.001)]


def test_under_the_monotonic_clock_timestamps_are_epoch_milliseconds() -> None:
    timers = TaskTimers("t")  # the default: time.monotonic, as a container's
    assert abs(timers.now_ms() - time.time() * 1000) < 50
    timers.schedule("k", time.time() * 1000 + 200, _recorder([]))
    assert 0.15 < timers.next_due - time.monotonic() <= 0.2


@pytest.mark.parametrize(
    ("key", "timestamp", "callback", "says"),
    [
        (["a", "list"], 1, _recorder([]), "key ['a', 'list'] is not hashable"),
        ("k", "soon", _recorder([]), "timestamp_ms='soon' is not a finite number"),
        ("k", math.nan, _recorder([]), "timestamp_ms=nan is not a finite number"),
        ("k", 1, "not callable", "callback 'not callable' is not callable"),
    ],
)
def test_a_bad_schedule_names_the_task_and_key(key: Any, timestamp: Any, callback: Any, says: str) -> None:
    timers = TaskTimers("Partition 3", Clock())
    with pytest.raises(TaskError, match="task Partition 3: scheduler") as raised:
        timers.schedule(key, timestamp, callback)
    assert says in str(raised.value)
    assert len(timers) == 0 and timers.next_due == math.inf
