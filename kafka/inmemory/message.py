"""One record of the in-memory system, shaped like confluent_kafka.Message so the wrappers take it as is."""

from __future__ import annotations

from samsa.kafka.message import Headers, SimpleMessage

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
    """A stored record: built once when produced and handed to every consumer that reads it; `kind` tells
    data from a transaction marker, `txn` is the transaction it belongs to (None: none)."""

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
        super().__init__(topic, partition, offset, key, value, timestamp_ms, headers)
        self.kind = kind
        self.txn = txn

    def __len__(self) -> int:
        return len(self._value or b"")

    def __repr__(self) -> str:
        return f"InMemoryMessage({self._topic!r}, {self._partition}, {self._offset}, key={self._key!r})"
