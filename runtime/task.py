"""The user's task API: StreamTask, envelopes, the collector, the coordinator and the task context."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, overload

from samsa.streams import SystemStream, SystemStreamPartition

if TYPE_CHECKING:
    from samsa.kafka.message import SendHeaders
    from samsa.runtime.config.config import Config
    from samsa.runtime.metrics import TaskMetrics


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


# The stream argument's default: a SystemStream first is followed by Samza's arguments, or by none.
_NO_STREAM: Any = object()


class OutgoingMessage:
    """A message to send: serialized with the target stream's serdes; partitioned by key unless given.

    `OutgoingMessage(system, stream, key=, value=)`, or Samza's `OutgoingMessageEnvelope` forms with a
    SystemStream first: `(stream, message)`, `(stream, key, message)`, `(stream, partition_key, key,
    message)` (or `(stream, key=, value=)`). `partition=` picks the partition; `partition_key=` places the
    record by that key's hash (serialized with the stream's key serde) instead of the record's key.
    """

    __slots__ = ("headers", "key", "partition", "partition_key", "stream", "system", "timestamp", "value")

    system: str
    stream: str
    key: Any
    value: Any
    #: Whose hash (serialized with the stream's key serde) picks the partition, in place of the key's.
    partition_key: Any
    partition: int | None
    headers: SendHeaders | None
    timestamp: int | None

    @overload
    def __init__(
        self,
        system: str,
        stream: str,
        key: Any = None,
        value: Any = None,
        *,
        partition: int | None = None,
        partition_key: Any = None,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        system: SystemStream,
        /,
        *,
        key: Any = None,
        value: Any = None,
        partition: int | None = None,
        partition_key: Any = None,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        system: SystemStream,
        message: Any,
        /,
        *,
        partition: int | None = None,
        partition_key: Any = None,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        system: SystemStream,
        key: Any,
        message: Any,
        /,
        *,
        partition: int | None = None,
        partition_key: Any = None,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        system: SystemStream,
        partition_key: Any,
        key: Any,
        message: Any,
        /,
        *,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None: ...

    def __init__(
        self,
        system: str | SystemStream,
        stream: Any = _NO_STREAM,
        *rest: Any,
        key: Any = None,
        value: Any = None,
        partition: int | None = None,
        partition_key: Any = None,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None:
        # Every task's every send builds one: the common form costs three checks over plain assignments.
        if type(system) is str and type(stream) is str and not rest:
            self.system = system
            self.stream = stream
            self.key = key
            self.value = value
            self.partition_key = partition_key
        else:
            self.system, self.stream, self.key, self.value, self.partition_key = _other_form(
                system, stream, rest, key, value, partition_key
            )
        self.partition = partition
        self.headers = headers
        self.timestamp = timestamp
        # An int partition of 0 or more (not a bool) with no partition key passes without a call.
        if partition is not None and (
            type(partition) is not int or partition < 0 or self.partition_key is not None
        ):
            _refuse_partition(self)

    def __repr__(self) -> str:
        return (
            f"OutgoingMessage({self.system}.{self.stream}, key={self.key!r}, value={self.value!r}"
            + ("" if self.partition is None else f", partition={self.partition}")
            + ("" if self.partition_key is None else f", partition_key={self.partition_key!r}")
            + ")"
        )


_FORMS = (
    "pass OutgoingMessage(system, stream, key=..., value=...) with the system and stream names as str, or "
    "a SystemStream first as Samza's OutgoingMessageEnvelope: (stream, message), (stream, key, message) or "
    "(stream, partition_key, key, message)"
)


def _other_form(
    system: object, stream: Any, rest: tuple[Any, ...], key: Any, value: Any, partition_key: Any
) -> tuple[str, str, Any, Any, Any]:
    """(system, stream, key, value, partition key) of the forms other than (system, stream, key=, value=)."""
    if isinstance(system, SystemStream):
        # What follows a SystemStream is Samza's: ([[partition key,] key,] message).
        args = rest if stream is _NO_STREAM else (stream, *rest)
        if args and (key is not None or value is not None):
            raise TypeError(
                f"OutgoingMessage({system}, ...): give the key and message either positionally, as "
                "Samza's OutgoingMessageEnvelope(stream, [[partition_key,] key,] message), or as "
                "key=/value=, not both"
            )
        if len(args) == 3 and partition_key is not None:
            raise TypeError(f"OutgoingMessage({system}, ...): the partition key is given twice")
        if len(args) > 3:
            raise TypeError(
                f"OutgoingMessage({system}, ...) takes at most 3 more positional arguments; {_FORMS}"
            )
        if len(args) == 1:
            value = args[0]
        elif len(args) == 2:
            key, value = args
        elif len(args) == 3:
            partition_key, key, value = args
        stream = system.stream
        system = system.system
    elif not isinstance(system, str):
        given = ", ".join(repr(a) for a in (system, *(() if stream is _NO_STREAM else (stream,)), *rest))
        raise TypeError(
            f"OutgoingMessage({given}): the system must be a str (its name) or a SystemStream, not "
            f"{type(system).__name__}; {_FORMS}"
        )
    elif stream is _NO_STREAM:
        raise TypeError(f"OutgoingMessage({system!r}) names no stream; {_FORMS}")
    elif rest:
        if len(rest) > 2:
            raise TypeError(
                f"OutgoingMessage({system!r}, {stream!r}, ...) takes at most 4 positional arguments"
            )
        if key is not None or (len(rest) == 2 and value is not None):
            raise TypeError(f"OutgoingMessage({system!r}, {stream!r}, ...): the key or value is given twice")
        key = rest[0]
        if len(rest) == 2:
            value = rest[1]
    if not isinstance(stream, str):
        raise TypeError(
            f"OutgoingMessage({system!r}, {stream!r}): the stream must be a str, not "
            f"{type(stream).__name__}; {_FORMS}"
        )
    return system, stream, key, value, partition_key


def _refuse_partition(message: OutgoingMessage) -> None:
    """Raise for a partition that is no partition, or one given with a partition key (the message's
    partition is set and failed the constructor's quick test)."""
    target = f"{message.system}.{message.stream}"
    partition = message.partition
    if message.partition_key is not None:
        raise ValueError(
            f"send to {target}: give partition= or partition_key=, not both (partition {partition}, "
            f"partition key {message.partition_key!r})"
        )
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise TypeError(
            f"send to {target}: partition must be an int (0 or more), not {type(partition).__name__}"
        )
    if partition < 0:
        raise ValueError(
            f"send to {target}: partition {partition} is negative; give a partition number (0 or more), or "
            "leave partition out to place the record by its key (or partition_key)"
        )


class MessageCollector(Protocol):
    """Where a task sends its output."""

    def send(self, message: OutgoingMessage) -> None: ...


class RequestScope(Enum):
    """Whom a commit or shutdown request is for."""

    CURRENT_TASK = "current_task"
    ALL_TASKS_IN_CONTAINER = "all_tasks_in_container"


class TaskCoordinator(Protocol):
    """Lets a task ask for a commit or a shutdown; both happen after the current call returns. The scope is a
    RequestScope or its name (`"ALL_TASKS_IN_CONTAINER"`); any other value raises TypeError."""

    def commit(self, scope: RequestScope | str = RequestScope.CURRENT_TASK) -> None: ...

    def shutdown(self, scope: RequestScope | str = RequestScope.CURRENT_TASK) -> None: ...


#: A scheduler callback (Samza's ScheduledCallback): called with the key it was scheduled for, the task's
#: collector and coordinator, on the task's thread between messages.
ScheduledCallback = Callable[[Any, MessageCollector, TaskCoordinator], None]


class CallbackScheduler(Protocol):
    """A task's timers (Samza's CallbackScheduler): at most one pending callback per key, fired between
    messages once the job's clock reaches its epoch-ms timestamp. Not persisted: lost at a restart, so a
    task schedules again in `init` from its store."""

    def schedule(self, key: Any, timestamp_ms: float, callback: ScheduledCallback) -> None:
        """Calls `callback(key, collector, coordinator)` at `timestamp_ms` (epoch ms by the job's clock: see
        `now_ms`); a key scheduled again is moved to the new time and callback."""
        ...

    def delete(self, key: Any) -> None:
        """Drops the key's pending callback, if any."""
        ...

    def now_ms(self) -> int:
        """The job's clock in epoch ms, as timers read it (a TestRunner's manual clock under test)."""
        ...

    def schedule_callback(self, key: Any, timestamp_ms: float, callback: ScheduledCallback) -> None:
        """`schedule` under Samza's name (`scheduleCallback`)."""
        ...

    def delete_callback(self, key: Any) -> None:
        """`delete` under Samza's name (`deleteCallback`)."""
        ...


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

    @property
    def scheduler(self) -> CallbackScheduler:
        """The task's timers: `schedule(key, timestamp_ms, callback)`, `delete(key)`, `now_ms()`."""
        ...

    @property
    def metrics(self) -> TaskMetrics:
        """The task's own metrics (Samza's task metrics registry): `counter(name, group=...)`,
        `gauge(name, initial)`, `timer(name)`, served with the container's as `samsa_user_...`."""
        ...


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
        """Called once when the container stops: on a graceful stop before the final commit, so what it
        writes to the task's stores is committed with it; on a failure with no commit after it."""


def has_window(task: StreamTask) -> bool:
    """Whether the task overrides `window` (only then does the window timer run)."""
    return type(task).window is not StreamTask.window
