"""Tasks for the tests of OutgoingMessage's arguments: Samza's forms, partition keys and headers."""

from __future__ import annotations

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    SystemStream,
    TaskContext,
    TaskCoordinator,
)

#: Headers every record of `ByPartitionKey` carries: given as a dict, one value a str.
HEADERS = {"h": b"1", "s": "str"}


class ByPartitionKey(StreamTask):
    """Sends each input (key "user:N") to `test.output`, placed by partition key "N" and keyed as it came,
    as Samza's OutgoingMessageEnvelope(stream, partitionKey, key, message), with the dict `HEADERS`."""

    def init(self, context: TaskContext) -> None:
        self.output = SystemStream("kafka", context.config["test.output"])

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        group = envelope.key.split(":")[1]
        collector.send(OutgoingMessage(self.output, group, envelope.key, envelope.message))
        collector.send(
            OutgoingMessage(
                "kafka",
                self.output.stream,
                key=envelope.key,
                value=envelope.message,
                partition_key=group,
                headers=HEADERS,
            )
        )


class SamzaStyle(StreamTask):
    """Copies each input to `out` as Samza's OutgoingMessageEnvelope(systemStream, key, message) does."""

    OUT = SystemStream("kafka", "out")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        collector.send(OutgoingMessage(self.OUT, envelope.key, envelope.message))
