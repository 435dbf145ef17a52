"""The watchdog on a real run loop blocked in process(), looked at with a fake clock."""

from __future__ import annotations

import gc
import logging
import threading
import weakref

import pytest
from bare_task_instances import bare_task_instance
from fake_input import FakeConsumer, StringDecode

from samsa import StreamTask
from samsa.runtime.run_loop import PartitionBuffer, RunLoop
from samsa.runtime.watchdog import StepWatchdog
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "orders", 3)


class Blocking(StreamTask):
    """Waits on `release` at the message "stuck" (a call without a timeout)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.seen: list[str] = []

    def process(self, envelope, collector, coordinator) -> None:  # type: ignore[no-untyped-def]
        self.seen.append(envelope.value)
        if envelope.value == "stuck":
            self.entered.set()
            wait_for_the_remote_service(self.release)


def wait_for_the_remote_service(release: threading.Event) -> None:
    release.wait(30)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _blocked_loop(task: Blocking) -> RunLoop:
    ti = bare_task_instance(task, SSP)
    ti.offsets[SSP] = 100
    consumer = FakeConsumer(SSP, [b"a", b"b", b"stuck", b"c"], first=100)
    buf = PartitionBuffer(SSP, ti, consumer, ("string", StringDecode()), ("string", StringDecode()))  # type: ignore[arg-type]
    return RunLoop(
        [(consumer, {("orders", 3): buf})],  # type: ignore[list-item]
        [ti],
        lambda *a, **k: None,
        lambda *a: None,
        end_offsets={SSP: 104},
    )


def test_a_chunk_stuck_in_process_is_warned_once_per_threshold_then_told_when_it_moves_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = Blocking()
    loop = _blocked_loop(task)
    clock = FakeClock()
    watchdog = StepWatchdog("container 7", loop, warn_s=60, clock=clock)
    runner = threading.Thread(target=loop.run, daemon=True)
    caplog.set_level(logging.INFO, logger="samsa.runtime.watchdog")
    watchdog.check()  # before the loop begins: nothing to look at
    runner.start()
    assert task.entered.wait(10)
    try:
        watchdog.check()  # first seen now
        clock.now += 59
        watchdog.check()
        assert not caplog.records
        assert watchdog.stuck_seconds("Partition 0") == 59
        assert watchdog.stuck_seconds("Partition 1") == 0
        clock.now += 1
        watchdog.check()
        [warning] = caplog.records
        assert warning.levelno == logging.WARNING
        text = warning.getMessage()
        assert "container 7: task Partition 0 has been in process() on orders#3 at offset 102" in text
        assert "(the chunk began at offset 100)" in text
        assert "for 60 s (task.process.warn.ms=60000)" in text
        assert "a blocking call in process()" in text and "cannot commit" in text
        assert "in wait_for_the_remote_service" in text and "release.wait(30)" in text
        clock.now += 30
        watchdog.check()
        assert len(caplog.records) == 1  # not again before another threshold
        clock.now += 30
        watchdog.check()
        assert len(caplog.records) == 2 and "for 120 s" in caplog.records[1].getMessage()
        watchdog.stopping()  # warned about already, a stop is still told (once), with the stack
        watchdog.check()
        watchdog.check()
        assert len(caplog.records) == 3
        assert "asked to stop while task Partition 0" in caplog.records[2].getMessage()
    finally:
        task.release.set()
    runner.join(10)
    assert task.seen == ["a", "b", "stuck", "c"] and loop.caught_up
    clock.now += 5
    watchdog.check()
    moved = caplog.records[-1]
    assert moved.levelno == logging.INFO
    assert moved.getMessage() == "container 7: task Partition 0 moved on after 125 s in process() on orders#3"
    assert watchdog.stuck_seconds("Partition 0") == 0


def test_a_stop_asked_while_stuck_logs_the_stack_once_a_second_has_passed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = Blocking()
    loop = _blocked_loop(task)
    clock = FakeClock()
    watchdog = StepWatchdog("container 0", loop, warn_s=600, clock=clock)
    runner = threading.Thread(target=loop.run, daemon=True)
    caplog.set_level(logging.INFO, logger="samsa.runtime.watchdog")
    runner.start()
    assert task.entered.wait(10)
    try:
        watchdog.check()
        watchdog.stopping()
        loop.stop()
        clock.now += 0.5
        watchdog.check()
        assert not caplog.records  # a chunk this young ends by itself
        clock.now += 1
        watchdog.check()
        watchdog.check()
        [warning] = caplog.records
        text = warning.getMessage()
        assert (
            "container 0: asked to stop while task Partition 0 has been in process() on orders#3 at " in text
        )
        assert "task.shutdown.ms" in text and "in wait_for_the_remote_service" in text
    finally:
        task.release.set()
    runner.join(10)
    assert not runner.is_alive()


def test_the_watchdog_thread_is_a_daemon_and_ends_at_close() -> None:
    loop = _blocked_loop(Blocking())
    watchdog = StepWatchdog("container 0", loop, warn_s=0.1)
    watchdog.start()
    thread = watchdog._thread
    assert thread is not None and thread.daemon and thread.is_alive()
    watchdog.close()
    assert not thread.is_alive()


def test_a_watchdog_dropped_without_close_frees_its_loop_and_its_thread_ends() -> None:
    """A container dropped unclosed (a test's) must not be kept alive, Kafka clients and all, by its
    watchdog's thread until the process ends."""
    loop = _blocked_loop(Blocking())
    watchdog = StepWatchdog("container 0", loop, warn_s=0.1)
    watchdog.start()
    thread, freed = watchdog._thread, weakref.ref(loop)
    assert thread is not None
    del watchdog, loop
    gc.collect()
    assert freed() is None, "the watchdog's thread kept the loop alive"
    thread.join(timeout=5)
    assert not thread.is_alive()


class Slow(StreamTask):
    """Each message takes a (fake) quarter second; the watchdog looks after each one."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.watchdog: StepWatchdog | None = None

    def process(self, envelope, collector, coordinator) -> None:  # type: ignore[no-untyped-def]
        self.clock.now += 0.25
        assert self.watchdog is not None
        self.watchdog.check()


# 30 s: below a chunk's 64 s, each call far shorter; a call moving to the next message is not stuck.
@pytest.mark.parametrize("warn_s", [90, 30])
def test_a_long_catch_up_of_short_calls_is_not_warned_about(
    caplog: pytest.LogCaptureFixture, warn_s: float
) -> None:
    clock = FakeClock()
    task = Slow(clock)
    ti = bare_task_instance(task, SSP)  # no timer falls due: a chunk ends after 256 messages (64 s)
    ti.offsets[SSP] = 100
    consumer = FakeConsumer(SSP, [b"x"] * 2000, first=100)
    buf = PartitionBuffer(SSP, ti, consumer, ("string", StringDecode()), ("string", StringDecode()))  # type: ignore[arg-type]
    loop = RunLoop(
        [(consumer, {("orders", 3): buf})],  # type: ignore[list-item]
        [ti],
        lambda *a, **k: None,
        lambda *a: None,
        end_offsets={SSP: 2100},
        clock=clock,
    )
    task.watchdog = StepWatchdog("container 0", loop, warn_s=warn_s, clock=clock)
    caplog.set_level(logging.INFO, logger="samsa.runtime.watchdog")
    loop.run()
    assert loop.caught_up and clock.now >= 1500  # 500 s of processing, over five times the threshold
    assert not caplog.records
