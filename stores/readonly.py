"""A read-only view of a store: every read passes through, every write fails naming the store."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from samsa.stores.api import KeyValueSnapshot, KeyValueStore
from samsa.stores.exceptions import ReadOnlyStoreError

K = TypeVar("K")
V = TypeVar("V")


class ReadOnlyStore(KeyValueStore[K, V], Generic[K, V]):
    """What a task gets for a store the system writes (an adjunct store): reads only."""

    def __init__(self, inner: KeyValueStore[K, V], name: str, fed_by: str) -> None:
        self._inner = inner
        self.name = name
        self._fed_by = fed_by

    def get(self, key: K) -> V | None:
        return self._inner.get(key)

    def get_all(self, keys: Iterable[K]) -> dict[K, V]:
        return self._inner.get_all(keys)

    def range(self, from_key: K, to_key: K) -> Iterator[tuple[K, V]]:
        return self._inner.range(from_key, to_key)

    def all(self) -> Iterator[tuple[K, V]]:
        return self._inner.all()

    def snapshot(self, from_key: K, to_key: K) -> KeyValueSnapshot[K, V]:
        return self._inner.snapshot(from_key, to_key)

    def put(self, key: K, value: V | None) -> None:
        raise ReadOnlyStoreError(self.name, self._fed_by)

    def delete(self, key: K) -> None:
        raise ReadOnlyStoreError(self.name, self._fed_by)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        raise ReadOnlyStoreError(self.name, self._fed_by)

    def delete_all(self, keys: Iterable[K]) -> None:
        raise ReadOnlyStoreError(self.name, self._fed_by)

    def flush(self) -> None:
        """The system flushes the store it writes."""

    def close(self) -> None:
        """The system closes the store it writes."""
