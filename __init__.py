"""Samsa: Kafka-native stateful stream processing on the design of Apache Samza."""

from samsa.runtime.task import (
    CallbackScheduler,
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    RequestScope,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)
from samsa.streams import SystemStream, SystemStreamPartition

__all__ = [
    "CallbackScheduler",
    "IncomingMessageEnvelope",
    "MessageCollector",
    "OutgoingMessage",
    "RequestScope",
    "StreamTask",
    "SystemStream",
    "SystemStreamPartition",
    "TaskContext",
    "TaskCoordinator",
]
