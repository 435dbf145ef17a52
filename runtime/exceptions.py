"""Errors raised by the runtime: configuration, tasks, containers and the job model."""

from samsa.exceptions import SamsaError


class RuntimeSamsaError(SamsaError):
    """Base class of the runtime package's errors."""


class ConfigError(RuntimeSamsaError):
    """A job configuration key is missing, unknown, malformed or not supported yet."""


class TaskError(RuntimeSamsaError):
    """A task failed while processing, windowing, committing or closing."""


class MessageDeserializationError(RuntimeSamsaError):
    """An input message could not be deserialized under the `fail` policy."""


class JobModelError(RuntimeSamsaError):
    """The job model cannot be built or read (e.g. more containers than tasks)."""


class ContainerError(RuntimeSamsaError):
    """A container could not start or stopped abnormally."""
