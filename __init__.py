"""Samsa: Kafka-native stateful stream processing on the design of Apache Samza."""

from samsa.runtime.task import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    RequestScope,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)

__all__ = [
    "IncomingMessageEnvelope",
    "MessageCollector",
    "OutgoingMessage",
    "RequestScope",
    "StreamTask",
    "TaskContext",
    "TaskCoordinator",
]
