"""One record of the in-memory system, shaped like confluent_kafka.Message so the wrappers take it as is."""

from __future__ import annotations

from samsa.kafka.message import TIMESTAMP_CREATE_TIME, Headers, SimpleMessage

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


class InMemoryMessage(SimpleMessage):
    """A record as a consumer reads it (or a delivery report): `kind` tells data from a transaction marker,
    `txn` is the transaction it belongs to (None: none)."""

    __slots__ = ("kind", "txn")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Headers | None = None,
        kind: int = DATA,
        txn: Transaction | None = None,
    ) -> None:
        # SimpleMessage's fields set here, not through super(): a read makes one of these per record.
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._timestamp = (TIMESTAMP_CREATE_TIME, timestamp_ms)
        self._headers = headers
        self.kind = kind
        self.txn = txn

    def __len__(self) -> int:
        return len(self._value or b"")

    def __repr__(self) -> str:
        return f"InMemoryMessage({self._topic!r}, {self._partition}, {self._offset}, key={self._key!r})"
