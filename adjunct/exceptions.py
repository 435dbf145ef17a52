"""Errors raised by adjunct data stores: their configuration and the records that cannot be stored."""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.exceptions import InvalidConfigError, SamsaError
from samsa.runtime.exceptions import TaskError

if TYPE_CHECKING:
    from samsa.runtime.task import IncomingMessageEnvelope


class AdjunctError(SamsaError):
    """Base class of the adjunct package's errors."""


class AdjunctConfigError(AdjunctError, InvalidConfigError):
    """A `stores.*.adstore.*` key is malformed or names something that cannot be loaded or used."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        super().__init__(f"{key}: {problem}")


class ExtractionError(AdjunctError):
    """A message of an adjunct stream yields no key and value to store (bad JSON, an unknown CDC op...).

    It is a bad message, not an outage: the store manager applies the task's deserialization error
    policy to it. `reason` says what is wrong without the location, which the message adds.
    """

    def __init__(self, envelope: IncomingMessageEnvelope, reason: str) -> None:
        self.system = envelope.system
        self.stream = envelope.stream
        self.partition = envelope.partition
        self.offset = envelope.offset
        self.reason = reason
        super().__init__(
            f"topic {envelope.stream} partition {envelope.partition} offset {envelope.offset} "
            f"(system {envelope.system}): {reason}"
        )


class StoreSerdeMismatchError(AdjunctConfigError):
    """An adjunct store's key or msg serde cannot take what its extractor makes of its stream's records,
    and no record read fits it: every record would fail the same way, so it is the configuration, not a
    bad record (which the deserialization error policy would handle)."""


class AdjunctStreamResetError(AdjunctError, TaskError):
    """An adjunct store's stream went back while the job ran (a topic deleted and recreated: the consumer's
    out-of-range position was reset): the store holds the deleted topic's rows. A task failure, not a
    configuration error: the container's restart checks the store against the topic and rebuilds it."""
