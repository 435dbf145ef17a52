"""One record of the in-memory system, shaped like confluent_kafka.Message so the wrappers take it as is."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import cast

from samsa.kafka.message import TIMESTAMP_CREATE_TIME, SendHeaders, header_pairs

#: Record kinds: data, or a transaction's control marker (which takes an offset but is never delivered).
DATA = 0
COMMIT_MARKER = 1
ABORT_MARKER = 2


class Transaction:
    """A producer's transaction; its records are shown to read_committed consumers once committed."""

    __slots__ = ("state",)

    OPEN = 0
    COMMITTED = 1
    ABORTED = 2

    def __init__(self) -> None:
        self.state = Transaction.OPEN


#: A record's headers as the broker keeps them: a tuple, which reads cannot change.
StoredHeaders = tuple[tuple[str, bytes | None], ...]
#: A record's fields: (topic, partition, offset, key, value, (timestamp type, ms), headers, kind,
#: transaction). The broker keeps each record as a plain tuple of them, which the garbage collector stops
#: tracking after its first pass (a test's hundreds of thousands of records then cost its full passes
#: nothing); a read copies it into an InMemoryMessage in C (`as_message`), without a Python call.
Record = tuple[
    str, int, int, bytes | None, bytes | None, tuple[int, int], StoredHeaders | None, int, Transaction | None
]


class InMemoryMessage(Record):
    """A record as a consumer reads it (or a delivery report): `kind` tells data from a transaction marker,
    `txn` is the transaction it belongs to (None: none). Equal and hashed by identity, as
    confluent_kafka.Message; as a tuple, its `Record`."""

    __slots__ = ()

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def topic(self) -> str:
        return self[0]

    def partition(self) -> int:
        return self[1]

    def offset(self) -> int:
        return self[2]

    def key(self) -> bytes | None:
        return self[3]

    def value(self) -> bytes | None:
        return self[4]

    def timestamp(self) -> tuple[int, int]:
        return self[5]

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        # A new list each call (librdkafka keeps one per message): a caller that changes it changes no record.
        headers = self[6]
        return None if headers is None else list(headers)

    def error(self) -> object:
        return None

    @property
    def kind(self) -> int:
        return self[7]

    @property
    def txn(self) -> Transaction | None:
        return self[8]

    def __len__(self) -> int:
        return len(self[4] or b"")

    def __repr__(self) -> str:
        return f"InMemoryMessage({self[0]!r}, {self[1]}, {self[2]}, key={self[3]!r})"


#: Record -> InMemoryMessage, in C (a read makes one per record).
as_message = cast(Callable[[Record], InMemoryMessage], partial(tuple.__new__, InMemoryMessage))


def record(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int,
    headers: StoredHeaders | None = None,
    kind: int = DATA,
    txn: Transaction | None = None,
) -> Record:
    """A record's fields as the broker keeps them (headers as `stored_headers` made them)."""
    return (topic, partition, offset, key, value, (TIMESTAMP_CREATE_TIME, timestamp_ms), headers, kind, txn)


def message(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int,
    headers: StoredHeaders | None = None,
) -> InMemoryMessage:
    """A data record as a message (a delivery report, a file-backed broker's read); headers as
    `stored_headers` made them."""
    return as_message(record(topic, partition, offset, key, value, timestamp_ms, headers))


def stored_headers(headers: SendHeaders | None) -> StoredHeaders | None:
    """Headers as a Kafka consumer reads back what confluent-kafka sent: a dict's items or the (key, value)
    pairs in order, a str value as its UTF-8 bytes (a bytes key as str), so a test sees what production
    does; other types are refused as confluent-kafka refuses them (a pair given as a list too). No headers
    (an empty list or dict) read back as None, as from Kafka."""
    if headers is None:
        return None
    stored = []
    for pair in header_pairs(headers):
        if type(pair) is not tuple or len(pair) != 2:
            raise TypeError(
                f"header {pair!r}: Headers are expected to be a list of (key, value) tuples or a dict "
                "(confluent-kafka refuses any other form)"
            )
        k, v = pair
        if type(k) is not str:
            if not isinstance(k, (str, bytes)):
                raise TypeError(f"header key {k!r}: expected a str, not {type(k).__name__}")
            k = k if isinstance(k, str) else k.decode()
        if v is not None and type(v) is not bytes:
            if isinstance(v, str):
                v = v.encode()
            elif isinstance(v, bytes):
                v = bytes(v)
            else:
                raise TypeError(
                    f"header {k!r}: expected header value to be None, binary, or unicode string, "
                    f"not {type(v).__name__}"
                )
        stored.append((k, v))
    return tuple(stored) or None
