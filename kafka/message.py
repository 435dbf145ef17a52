"""What the runtime reads from Kafka: the `RawMessage` protocol and the `TopicPartition` alias."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

TopicPartition = tuple[str, int]
"""(topic, partition): plain tuples in every signature, never confluent_kafka objects."""

Headers = Sequence[tuple[str, bytes | None]]
"""Kafka record headers in order; a header value may be null."""

SendHeaders = Sequence[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None]
"""Headers as a producer takes them (as confluent-kafka does): (key, value) pairs or a dict; a str value is
sent as UTF-8, so it reads back as bytes."""


def header_pairs(headers: SendHeaders) -> Iterable[tuple[str, bytes | str | None]]:
    """The (key, value) pairs of headers given as pairs or as a dict, in order (not copied)."""
    return headers.items() if isinstance(headers, Mapping) else headers


def record_size(key: bytes | None, value: bytes | None, headers: SendHeaders | None) -> int:
    """A record's size as a message.max.bytes limit weighs it: key, value and headers."""
    size = len(key or b"") + len(value or b"")
    for name, data in header_pairs(headers or ()):
        size += len(name) + len(data or b"")
    return size


# librdkafka's logical offsets (same values as confluent_kafka.OFFSET_*), usable wherever an offset goes.
OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_INVALID = -1001
"""Returned by position()/cached watermarks when no offset is known yet."""

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2


class RawMessage(Protocol):
    """One consumed Kafka record. confluent_kafka.Message satisfies this, so nothing is copied per message.

    Messages handed out by KafkaConsumer.consume() never carry an error, so topic/partition/offset are set.
    """

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]:
        """(timestamp type, epoch ms); type is one of the TIMESTAMP_* constants."""
        ...

    def headers(self) -> Headers | None: ...
    def error(self) -> object: ...


class SimpleMessage:
    """A plain in-memory RawMessage, for fakes and tests that need no broker."""

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_timestamp", "_topic", "_value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None = None,
        value: bytes | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._timestamp = (
            (TIMESTAMP_NOT_AVAILABLE, -1) if timestamp_ms is None else (TIMESTAMP_CREATE_TIME, timestamp_ms)
        )
        self._headers = headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def headers(self) -> Headers | None:
        return self._headers

    def error(self) -> object:
        return None

    def __repr__(self) -> str:
        return f"SimpleMessage({self._topic!r}, {self._partition}, {self._offset}, key={self._key!r})"
