"""A word count over the store that `test.store` names: a job renames the store by config alone."""

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


class NamedStoreCountTask(StreamTask):
    """Counts each input key in store `test.store`, sending the running count to `test.output`."""

    def init(self, context: TaskContext) -> None:
        self.store: Any = context.store(context.config["test.store"])
        self.output = context.config["test.output"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        count = (self.store.get(envelope.key) or 0) + 1
        self.store.put(envelope.key, count)
        collector.send(OutgoingMessage("kafka", self.output, key=envelope.key, value=count))
