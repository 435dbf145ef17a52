"""A task blocked in process() is reported by its container's watchdog (task.process.warn.ms), naming the
task, partition, offset and stack; released, the job completes."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from samsa import OutgoingMessage, StreamTask
from samsa.testing import TestResult, TestRunner

RELEASE = threading.Event()


class WaitsOnStuck(StreamTask):
    """Forwards each message; at "stuck" it first waits for RELEASE (a call without a timeout)."""

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        if envelope.value == "stuck":
            call_the_slow_service()
        collector.send(OutgoingMessage("kafka", "out", value=envelope.value))


def call_the_slow_service() -> None:
    RELEASE.wait(60)


def test_a_task_blocked_in_process_is_warned_about_with_its_offset_and_stack_then_completes(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    RELEASE.clear()
    caplog.set_level(logging.INFO, logger="samsa.runtime.watchdog")
    results: list[TestResult] = []
    with TestRunner.of(WaitsOnStuck, state_dir=tmp_path) as runner:
        runner.with_config({"task.process.warn.ms": 200, "systems.kafka.samza.msg.serde": "string"})
        runner.add_output("out").add_input("in", {0: ["a", "b"], 1: ["c", "stuck", "d"]}, partitions=2)
        worker = threading.Thread(target=lambda: results.append(runner.run(timeout=60)), daemon=True)
        worker.start()
        try:
            deadline = time.monotonic() + 20
            while not [r for r in caplog.records if r.levelno == logging.WARNING]:
                assert time.monotonic() < deadline, "no warning about the task stuck in process()"
                time.sleep(0.05)
        finally:
            RELEASE.set()
        worker.join(60)
    [warning, *_] = [r for r in caplog.records if r.levelno == logging.WARNING]
    text = warning.getMessage()
    assert "container 0: task Partition 1 has been in process() on in#1 at offset 1 " in text
    assert "(task.process.warn.ms=200)" in text and "a blocking call in process()" in text
    assert "in call_the_slow_service\n    RELEASE.wait(60)" in text
    assert sorted(results[0].output("out")) == ["a", "b", "c", "d", "stuck"]
    moved = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("task Partition 1 moved on after" in m for m in moved)
