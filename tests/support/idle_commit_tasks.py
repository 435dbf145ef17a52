"""StreamTasks for the idle-commit tests: a counter over its input, and tasks that act on window() only."""

from __future__ import annotations

from typing import Any

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)


class CountingTask(StreamTask):
    """Counts its inputs by key in store `counts` and sends each running count to `test.output`."""

    def init(self, context: TaskContext) -> None:
        self.store: Any = context.store("counts")
        self.output = context.config["test.output"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        count = (self.store.get(envelope.key) or 0) + 1
        self.store.put(envelope.key, count)
        collector.send(OutgoingMessage("kafka", self.output, key=envelope.key, value=str(count)))


class WindowWriter(StreamTask):
    """Writes the number of its window() calls to store `counts` on its first `test.window.writes` calls
    (no input needed), then only reads."""

    def init(self, context: TaskContext) -> None:
        self.store: Any = context.store("counts")
        self.writes = int(context.config["test.window.writes"])
        self.windows = 0

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        pass

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        self.windows += 1
        if self.windows <= self.writes:
            self.store.put("windows", self.windows)


class WindowCommitter(StreamTask):
    """Asks for a commit in each of its first `test.window.commits` window() calls, writing nothing."""

    def init(self, context: TaskContext) -> None:
        self.commits = int(context.config["test.window.commits"])
        self.windows = 0

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        pass

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        self.windows += 1
        if self.windows <= self.commits:
            coordinator.commit()
