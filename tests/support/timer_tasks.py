"""StreamTasks for the scheduler-callback tests against a broker: timers that fire with no input."""

from __future__ import annotations

import time
from typing import Any

from samsa import MessageCollector, OutgoingMessage, StreamTask, TaskContext, TaskCoordinator


class Heartbeat(StreamTask):
    """Schedules a timer 200 ms after init() that sends ("beat-1", ms since init) to `test.output`, and from
    the callback the next one 200 ms later ("beat-2"); then no more."""

    def init(self, context: TaskContext) -> None:
        self.output = context.config["test.output"]
        self.scheduler = context.scheduler
        self.started = time.monotonic()
        self.scheduler.schedule(1, self.scheduler.now_ms() + 200, self.beat)

    def process(self, envelope: Any, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        pass

    def beat(self, n: int, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        elapsed_ms = round((time.monotonic() - self.started) * 1000)
        collector.send(OutgoingMessage("kafka", self.output, key=f"beat-{n}", value=str(elapsed_ms)))
        if n == 1:
            self.scheduler.schedule(2, self.scheduler.now_ms() + 200, self.beat)
