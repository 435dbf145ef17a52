"""Scheduler callbacks on a real container and broker: a timer fires with no input arriving, on time, and
what it sends is read back from the topic."""

from __future__ import annotations

import threading
from typing import Any

from background import wait_for

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator


def test_a_timer_fires_with_no_input_and_its_send_is_read_back(
    job_config: Any, topics: Any, read_topic: Any
) -> None:
    inp, out = topics(1), topics(1)
    config = job_config(f"kafka.{inp}", out, task="timer_tasks:Heartbeat", task__commit__ms="100")
    job = JobConfig(Config(config))
    container = Container(job, JobCoordinator(job).prepare().container("0"))
    failures: list[BaseException] = []

    def run() -> None:
        try:
            container.run()
        except BaseException as e:
            failures.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        # The task's commits (every 100 ms) flush what the callbacks sent: read it from the topic.
        wait_for(lambda: bool(failures) or len(read_topic(out)) == 2, 20, "two timer sends on the output")
    finally:
        container.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert not failures, failures
    beats = {key.decode(): int(value) for _, _, key, value in read_topic(out)}
    assert set(beats) == {"beat-1", "beat-2"}
    # Nothing arrived on the input: the idle loop woke for each timer, near its time (not at a poll's end).
    assert 190 <= beats["beat-1"] < 800, beats
    assert 190 <= beats["beat-2"] - beats["beat-1"] < 800, beats
