"""The layer that appends every write and delete of a store to its changelog partition."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from samsa.stores.api import KeyValueSnapshot, KeyValueStore


class Send(Protocol):
    """What this layer needs of a producer: `KafkaProducer.send`'s leading parameters."""

    def __call__(
        self, topic: str, value: bytes | None, key: bytes | None = ..., partition: int | None = ...
    ) -> None: ...


class LoggedStore(KeyValueStore[bytes, bytes]):
    """A bytes store whose writes also go to `topic` partition `partition` (Samza's LoggedStore).

    Each put is applied to the engine, then sent keyed by the store key with the value bytes as the
    record value; a delete sends a tombstone (null value), which compaction turns into the key's absence.
    Reads go to the engine only. Stacked under the serde layer (and the cache above it), so the changelog
    holds serialized bytes, one record per key per cache flush. A failed send raises and fails the task:
    the engine may then hold a write the changelog lacks, which the restore from the checkpoint discards.
    """

    def __init__(self, inner: KeyValueStore[bytes, bytes], send: Send, topic: str, partition: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.topic = topic
        self.partition = partition
        # Bound once: put runs per message (per dirty key per cache flush).
        self._send = send
        self._inner_put = inner.put

    def get(self, key: bytes) -> bytes | None:
        return self.inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._inner_put(key, value)
        self._send(self.topic, value, key, self.partition)

    def delete(self, key: bytes) -> None:
        self.inner.delete(key)
        self._send(self.topic, None, key, self.partition)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        batch = entries if isinstance(entries, list) else list(entries)
        self.inner.put_all(batch)  # one atomic engine write first, as put does
        send, topic, partition = self._send, self.topic, self.partition
        for key, value in batch:
            send(topic, value, key, partition)

    def get_all(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        return self.inner.get_all(keys)

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.range(from_key, to_key)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.all()

    def snapshot(self, from_key: bytes, to_key: bytes) -> KeyValueSnapshot[bytes, bytes]:
        return self.inner.snapshot(from_key, to_key)

    def flush(self) -> None:
        # The producer is flushed by the commit before this (Samza's order), not per store.
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"LoggedStore({self.inner!r}, {self.topic!r}#{self.partition})"
