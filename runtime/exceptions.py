"""Errors raised by the runtime: configuration, tasks, containers and the job model."""

from samsa.exceptions import InvalidConfigError, SamsaError


class RuntimeSamsaError(SamsaError):
    """Base class of the runtime package's errors."""


class ConfigError(RuntimeSamsaError, InvalidConfigError):
    """A job configuration key is missing, unknown, malformed or not supported yet."""


class TaskError(RuntimeSamsaError):
    """A task failed while processing, windowing, committing or closing."""


class UndeclaredOutputError(TaskError, InvalidConfigError):
    """An exactly-once task sent to a stream `task.outputs` does not list: every restart sends there again
    (a config fix, not a restart, mends it)."""


class UserCodeError(TaskError):
    """The task's own code (`init`, `process`, `window`, `close`) raised; `__cause__` is what it raised, whose
    traceback the CLI shows."""


class MessageDeserializationError(RuntimeSamsaError):
    """An input record the task cannot take under the `fail` bad-message policy (it does not decode, an
    adjunct stream's record yields nothing to store, an intermediate stream's record lacks the exactly-once
    header): its offset is not checkpointed, so a restart meets it again."""


class JobModelError(RuntimeSamsaError):
    """The job model cannot be built or read (e.g. more containers than tasks)."""


class ContainerError(RuntimeSamsaError):
    """A container could not start or stopped abnormally."""


class ContainerAlreadyRunningError(ContainerError):
    """Another process on this machine holds the container's lock: a restart here is refused the same way
    for as long as that one runs, so a supervisor ends the job instead of restarting it in a loop."""
