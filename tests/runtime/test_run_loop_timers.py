"""Scheduler callbacks in the run loop: fired between messages on the loop's clock, waking an idle loop,
with the task's collector and coordinator, failing as the task's code."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fake_input import FakeMessage, StringDecode

from samsa import RequestScope, StreamTask
from samsa.runtime.config.config import Config
from samsa.runtime.exceptions import UserCodeError
from samsa.runtime.job_model import TaskModel
from samsa.runtime.metrics import MetricsRegistry
from samsa.runtime.run_loop import PartitionBuffer, RunLoop
from samsa.runtime.task_instance import TaskContextImpl, TaskInstance
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "t", 0)


class IdleConsumer:
    """Hands out its messages at the first fetch, then has nothing: a fetch waits out its timeout."""

    def __init__(self, values: list[str]) -> None:
        self.queue = [FakeMessage(SSP, i, v.encode()) for i, v in enumerate(values)]
        self.timeouts: list[float] = []

    def consume(self, max_messages: int, timeout: float) -> list[FakeMessage]:
        if self.queue:
            out, self.queue = self.queue, []
            return out
        self.timeouts.append(timeout)
        time.sleep(timeout)
        return []

    def pause(self, tps: Any) -> None: ...

    def resume(self, tps: Any) -> None: ...

    def position(self, tps: Any) -> dict[tuple[str, int], int]:
        return {}


class Storage:
    stores: dict[str, Any] = {}

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Collector:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, message: Any) -> None:
        self.sent.append(message)


def _loop(
    task: StreamTask, values: list[str], clock: Any = time.monotonic
) -> tuple[RunLoop, TaskInstance, list[bool]]:
    """A loop over one task reading partition t#0; the list gets each commit's `requested` flag."""
    consumer = IdleConsumer(values)
    context = TaskContextImpl(
        "Partition 0",
        "0",
        Config({}),
        frozenset({SSP}),
        Storage(),
        MetricsRegistry(),
        clock=clock,
    )
    ti = TaskInstance(
        TaskModel("Partition 0", (SSP,)),
        task,
        Storage(),
        context,
        Collector(),
        MetricsRegistry(),
        -1,
        -1,
    )
    ti.offsets[SSP] = 0
    buf = PartitionBuffer(SSP, ti, consumer, ("string", StringDecode()), ("string", StringDecode()))
    commits: list[Any] = []

    def commit(tasks: Any, requested: bool = False) -> None:
        commits.append(requested)

    loop = RunLoop([(consumer, {("t", 0): buf})], [ti], commit, lambda *a: None, clock=clock)
    ti.init()
    return loop, ti, commits


class Sessions(StreamTask):
    """Each message schedules its key's expiry `delay_ms` after its processing; an expiry sends the key and
    stops the loop once every key expired."""

    delay_ms = 200

    def init(self, context: Any) -> None:
        self.scheduler = context.scheduler
        self.fired: list[tuple[str, float]] = []
        self.keys: set[str] = set()

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.keys.add(envelope.value)
        self.scheduler.schedule(envelope.value, self.scheduler.now_ms() + self.delay_ms, self.expire)

    def expire(self, key: str, collector: Any, coordinator: Any) -> None:
        self.fired.append((key, time.monotonic()))
        collector.send(("expired", key))
        self.keys.discard(key)
        if not self.keys:
            coordinator.shutdown(RequestScope.CURRENT_TASK)


def test_a_timer_scheduled_while_processing_wakes_the_idle_loop_on_time() -> None:
    task = Sessions()
    loop, ti, _ = _loop(task, ["a"])
    started = time.monotonic()
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    runner.join(5)
    assert not runner.is_alive(), "the timer never fired: the loop kept waiting for input"
    [(key, at)] = task.fired
    assert key == "a"
    assert 0.19 <= at - started < 0.3, f"fired {at - started:.3f} s after the start, 0.2 s asked"
    assert ti.collector.sent == [("expired", "a")]  # type: ignore[attr-defined]
    # The idle fetch waited for the timer, not its full 100 ms: the timer's wait was cut short.
    consumer = loop._sources[0][0]
    assert any(t < 0.1 for t in consumer.timeouts)  # type: ignore[attr-defined]


def test_callbacks_run_in_timestamp_order_on_the_loops_clock_between_steps() -> None:
    now = [1_000.0]
    task = Sessions()
    task.delay_ms = 500
    loop, ti, commits = _loop(task, [], clock=lambda: now[0])
    calls: list[str] = []

    def note(key: str, collector: Any, coordinator: Any) -> None:
        calls.append(key)
        collector.send(key)
        if key == "commit":
            coordinator.commit()

    scheduler = ti.context.scheduler
    scheduler.schedule("late", 1_000_300, note)
    scheduler.schedule("commit", 1_000_100, note)
    scheduler.schedule("early", 1_000_050, note)
    assert loop.step() == ("idle",)
    assert calls == []
    now[0] += 0.1
    assert loop.step() == ("timer", (), ())
    assert calls == ["early", "commit"]
    assert commits == [True], "the callback's commit request was handled after it returned"
    assert loop.step() == ("idle",)
    now[0] += 0.2
    assert loop.step() == ("timer", (), ())
    assert calls == ["early", "commit", "late"]
    assert ti.collector.sent == calls  # type: ignore[attr-defined]


def test_a_failing_callback_fails_the_task_naming_the_key() -> None:
    task = Sessions()
    now = [1_000.0]
    loop, ti, _ = _loop(task, [], clock=lambda: now[0])

    def boom(key: str, collector: Any, coordinator: Any) -> None:
        raise ValueError("no session")

    ti.context.scheduler.schedule(("user", 7), 1_000_000, boom)
    with pytest.raises(
        UserCodeError, match=r"task Partition 0: scheduler callback .*boom\(\) for key \('user', 7\)"
    ):
        loop.step()


class Polls(StreamTask):
    """A callback scheduling itself again at now, "as soon as possible", until process() has seen both
    messages (an event-time timer set past the latest record's time is due at once the same way while old
    records are replayed); it gives up after 1,000 rounds, so a loop that starves process() ends."""

    def init(self, context: Any) -> None:
        self.scheduler = context.scheduler
        self.seen: list[str] = []
        self.rounds = 0
        self.scheduler.schedule("poll", self.scheduler.now_ms(), self.poll)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.seen.append(envelope.value)

    def poll(self, key: str, collector: Any, coordinator: Any) -> None:
        self.rounds += 1
        if len(self.seen) < 2 and self.rounds < 1_000:
            self.scheduler.schedule(key, self.scheduler.now_ms(), self.poll)
        else:
            coordinator.shutdown(RequestScope.CURRENT_TASK)


def test_a_callback_due_again_at_once_leaves_a_chunk_of_input_between_its_rounds() -> None:
    task = Polls()
    loop, _, _ = _loop(task, ["a", "b"])
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    runner.join(10)
    assert not runner.is_alive(), "the loop never stopped"
    assert task.seen == ["a", "b"], f"process() never ran in {task.rounds} rounds of the callback"
    # A due timer still ends a chunk after its message: callbacks and messages take turns.
    assert task.rounds == 3


def test_a_stepped_loop_processes_input_between_rounds_of_a_callback_due_again_at_once() -> None:
    task = Polls()
    loop, _, _ = _loop(task, ["a", "b"], clock=lambda: 1_000.0)  # time stands still: always due again
    steps = []
    while (step := loop.step()) is not None and len(steps) < 50:
        steps.append(step[0])
    assert task.seen == ["a", "b"], f"process() never ran in {task.rounds} rounds of the callback"
    assert steps == ["timer", "fetch", "process", "timer", "process", "timer"]
