"""A StreamTask for the broadcast-grouping and added-partition tests: records which task processed which
message of which stream."""

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


class StreamRecordTask(StreamTask):
    """Appends `(task, stream, partition, offset)` of every message to `SEEN` (every message processed in
    this process, crashed runs included) and sends `<task>|<stream>|<partition>|<offset>` to `test.output`."""

    SEEN: ClassVar[list[tuple[str, str, int, int]]] = []

    def init(self, context: TaskContext) -> None:
        self.name = context.task_name
        self.output = context.config["test.output"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        StreamRecordTask.SEEN.append((self.name, envelope.stream, envelope.partition, envelope.offset))
        value = f"{self.name}|{envelope.stream}|{envelope.partition}|{envelope.offset}"
        collector.send(OutgoingMessage("kafka", self.output, key=self.name, value=value))
