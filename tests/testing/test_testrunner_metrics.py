"""TestResult.metrics: a test reads the counters, gauges and timers its task kept in context.metrics."""

from __future__ import annotations

import pytest

from samsa import IncomingMessageEnvelope, MessageCollector, StreamTask, TaskContext, TaskCoordinator
from samsa.runtime.metrics import TimerSample
from samsa.testing import TestRunner
from samsa.testing.exceptions import TestRunnerError


class Metered(StreamTask):
    def init(self, context: TaskContext) -> None:
        self.seen = context.metrics.counter("seen")
        self.big = context.metrics.counter("big", group="sizes")
        self.last = context.metrics.gauge("last", initial=-1)
        self.work = context.metrics.timer("work")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        self.work.update(0.5)
        self.seen.inc()
        if envelope.value >= 10:
            self.big.inc()
        self.last.set(envelope.value)


def test_a_result_shows_each_tasks_metrics_and_their_sum() -> None:
    with TestRunner.of(Metered) as runner:
        result = runner.add_input("numbers", {0: [1, 20, 3], 1: [40]}, partitions=2).run()
        assert result.metrics("Partition 0") == {
            "seen": 3,
            "sizes.big": 1,
            "last": 3,
            "work": TimerSample({"task": "Partition 0"}, 3, 1.5, 0.5),
        }
        assert result.metrics("Partition 1")["last"] == 40
        total = result.metrics()
        assert total["seen"] == 4
        assert total["sizes.big"] == 2
        assert total["work"] == TimerSample({}, 4, 2.0, 0.5)
        # A view of the runner: a later run's work shows, and a restart counts from 0 again.
        runner.add_input("numbers", {1: [5]}).run()
        assert result.metrics("Partition 1")["seen"] == 2
        runner.restart().add_input("numbers", {1: [6]}).run()
        assert result.metrics("Partition 1") == {
            "seen": 1,
            "sizes.big": 0,
            "last": 6,
            "work": TimerSample({"task": "Partition 1"}, 1, 0.5, 0.5),
        }
    assert result.metrics()["seen"] == 1  # still readable once the runner closed


def test_an_unknown_task_is_an_error_naming_the_tasks() -> None:
    wanted = r"no task 'Partition 9' ran in this test \(tasks: 'Partition 0'\)"
    with TestRunner.of(Metered) as runner, pytest.raises(TestRunnerError, match=wanted):
        runner.add_input("numbers", [1]).run().metrics("Partition 9")
