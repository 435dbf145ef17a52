"""The watchdog on the real broker: a container whose task blocks in process() warns of it, naming the
task, partition, offset and stack, and completes once the call returns."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
import samsa_test_tasks
from job_fixtures import job_config, produce, read_topic, run_job

__all__ = ["job_config", "produce", "read_topic", "run_job"]


def test_a_task_blocked_in_process_is_warned_about_then_the_job_completes(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    run_job: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    inp, out = topics(1), topics(1)
    produce(inp, [("k", "a"), ("k", "stuck"), ("k", "b")])
    config = job_config(
        f"kafka.{inp}", out, task="samsa_test_tasks:StuckOnceTask", **{"task.process.warn.ms": 300}
    )
    caplog.set_level(logging.INFO, logger="samsa.runtime.watchdog")
    samsa_test_tasks.STUCK_RELEASE.clear()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            run_job(config)
        except BaseException as e:  # raised again below, on the test's thread
            failures.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while not [r for r in caplog.records if r.levelno == logging.WARNING]:
            assert time.monotonic() < deadline, "no warning about the task stuck in process()"
            time.sleep(0.05)
    finally:
        samsa_test_tasks.STUCK_RELEASE.set()
    worker.join(60)
    assert not worker.is_alive() and not failures, failures
    [warning, *_] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"task Partition 0 has been in process() on {inp}#0 at offset 1 " in warning, warning
    assert "in wait_for_the_remote_service\n    STUCK_RELEASE.wait(60)" in warning, warning
    assert sorted(v.decode() for _, _, _, v in read_topic(out)) == ["a", "b", "stuck"]
    assert any("task Partition 0 moved on after" in r.getMessage() for r in caplog.records)
