"""A StreamTask for the broadcast tests: records which task processed which broadcast message."""

from __future__ import annotations

from typing import ClassVar

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)


class RecordTask(StreamTask):
    """Sends `<task>|<partition>|<offset>` of every message to `test.output` and appends the same to
    `SEEN` (the messages processed in this process, crashed runs included)."""

    SEEN: ClassVar[list[tuple[str, int, int]]] = []

    def init(self, context: TaskContext) -> None:
        self.name = context.task_name
        self.output = context.config["test.output"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        RecordTask.SEEN.append((self.name, envelope.partition, envelope.offset))
        value = f"{self.name}|{envelope.partition}|{envelope.offset}"
        collector.send(OutgoingMessage("kafka", self.output, key=self.name, value=value))
