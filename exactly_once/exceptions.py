"""Errors of the exactly-once package: the wire protocol and the on-disk buffer of early arrivals."""

from __future__ import annotations

from samsa.exceptions import InvalidConfigError, SamsaError


class ExactlyOnceError(SamsaError):
    """Base class of exactly-once errors."""


class AlignmentError(ExactlyOnceError):
    """The inputs break the exactly-once protocol, or the aligner was driven out of order."""


class ProtocolError(ExactlyOnceError):
    """A record's exactly-once header (or a control record) cannot be read or written.

    `problem` says what is wrong with the header; `at()` adds the record's place when the caller knows it, so
    the message names the topic, partition and offset to look at.
    """

    def __init__(
        self,
        problem: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.problem = problem
        self.topic = topic
        self.partition = partition
        self.offset = offset
        where = ""
        if topic is not None:
            where = f"record {topic}#{partition}@{offset}: "
        super().__init__(where + problem)

    def at(self, topic: str, partition: int, offset: int) -> ProtocolError:
        """The same error, naming the record it was raised for."""
        return ProtocolError(self.problem, topic=topic, partition=partition, offset=offset)


class NotIntermediateError(ProtocolError, InvalidConfigError):
    """An exactly-once job's control or tagged record on an input this job does not mark intermediate: a
    config change mends it (samza.intermediate on both jobs), a restart does not."""


class EosBufferError(ExactlyOnceError):
    """The on-disk buffer of early arrivals cannot be written, read back or reset as asked."""


class RetireError(ExactlyOnceError):
    """`samsa eos retire` refuses: the job may be alive, a task is unknown or holds no exactly-once state."""
