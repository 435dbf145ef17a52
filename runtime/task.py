"""The user's task API: StreamTask, envelopes, the collector, the coordinator and the task context."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from samsa.streams import SystemStreamPartition

if TYPE_CHECKING:
    from samsa.runtime.config.config import Config


class IncomingMessageEnvelope:
    """One input message, deserialized with its stream's serdes."""

    __slots__ = ("headers", "key", "offset", "partition", "stream", "system", "timestamp", "value")

    def __init__(
        self,
        system: str,
        stream: str,
        partition: int,
        offset: int,
        key: Any,
        value: Any,
        timestamp: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> None:
        self.system = system
        self.stream = stream
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    @property
    def system_stream_partition(self) -> SystemStreamPartition:
        return SystemStreamPartition(self.system, self.stream, self.partition)

    @property
    def message(self) -> Any:
        """The deserialized value under Samza's name (`getMessage()`): the same object as `value`."""
        return self.value

    def __repr__(self) -> str:
        return (
            f"IncomingMessageEnvelope({self.system}.{self.stream}#{self.partition}@{self.offset}, "
            f"key={self.key!r}, value={self.value!r})"
        )


class OutgoingMessage:
    """A message to send: serialized with the target stream's serdes; partitioned by key unless given."""

    __slots__ = ("headers", "key", "partition", "stream", "system", "timestamp", "value")

    def __init__(
        self,
        system: str,
        stream: str,
        key: Any = None,
        value: Any = None,
        *,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
    ) -> None:
        self.system = system
        self.stream = stream
        self.key = key
        self.value = value
        self.partition = partition
        self.headers = headers
        self.timestamp = timestamp


class MessageCollector(Protocol):
    """Where a task sends its output."""

    def send(self, message: OutgoingMessage) -> None: ...


class RequestScope(Enum):
    """Whom a commit or shutdown request is for."""

    CURRENT_TASK = "current_task"
    ALL_TASKS_IN_CONTAINER = "all_tasks_in_container"


class TaskCoordinator(Protocol):
    """Lets a task ask for a commit or a shutdown; both happen after the current call returns."""

    def commit(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None: ...

    def shutdown(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None: ...


class TaskContext(Protocol):
    """What `StreamTask.init` receives: the task's identity, config and stores."""

    @property
    def task_name(self) -> str: ...

    @property
    def container_id(self) -> str: ...

    @property
    def config(self) -> Config: ...

    @property
    def system_stream_partitions(self) -> frozenset[SystemStreamPartition]: ...

    def store(self, name: str) -> Any: ...


class StreamTask:
    """Subclass and implement `process`; `init`, `window` and `close` are optional."""

    def init(self, context: TaskContext) -> None:
        """Called once before the first message, after the task's stores are open."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Called for each input message, one at a time per task."""
        raise NotImplementedError(f"{type(self).__name__} must implement process()")

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        """Called every `task.window.ms` when that is set."""

    def close(self) -> None:
        """Called once when the container stops, after the final commit."""


def has_window(task: StreamTask) -> bool:
    """Whether the task overrides `window` (only then does the window timer run)."""
    return type(task).window is not StreamTask.window
