"""A task that sends, for each message, what the adjunct store `customers` holds under its key."""

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


class LookupTask(StreamTask):
    """Sends `<value>=<repr of the customers row under the key>` to `test.output`."""

    def init(self, context: TaskContext) -> None:
        self.customers: Any = context.store("customers")
        self.output = context.config["test.output"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        row = self.customers.get(envelope.key)
        collector.send(
            OutgoingMessage("kafka", self.output, key=envelope.key, value=f"{envelope.value}={row!r}")
        )
