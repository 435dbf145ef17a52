"""In-memory key-value engine over bytes: a dict plus a lazily sorted key list for ordered reads."""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import islice

from samsa.stores.api import KeyValueSnapshot, KeyValueStore, ReplayedSnapshot
from samsa.stores.exceptions import StoreClosedError


class InMemoryStore(KeyValueStore[bytes, bytes]):
    """A non-durable bytes store (Samza's in-memory engine), for non-persistent state and tests.

    Ordered reads sort the keys on first need and reuse that list until a key is added or removed.
    Iterators (and snapshots) yield the store as of the `range`/`all` call, as RocksDB's do: an iterator
    reads the live dict until the store is written while it is unfinished, and the first such write first
    copies the entries it has left (references to the same keys and values). Iterating without writing
    copies nothing; writing while iterating is safe.
    """

    def __init__(self, name: str = "inmemory") -> None:
        self.name = name
        self._data: dict[bytes, bytes] = {}
        # Replaced, never mutated, so a running iterator keeps a stable key list.
        self._sorted: list[bytes] | None = None
        self._closed = False
        # The unfinished iterators still reading `_data`, by id: a write copies what they have left first.
        self._readers: dict[int, weakref.ref[_RangeIterator]] = {}

    def get(self, key: bytes) -> bytes | None:
        if self._closed:
            raise StoreClosedError(self.name)
        return self._data.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.delete(key)
            return
        if self._closed:
            raise StoreClosedError(self.name)
        if self._readers:
            self._detach_readers()
        data = self._data
        if key not in data:
            self._sorted = None
        data[key] = value

    def delete(self, key: bytes) -> None:
        if self._closed:
            raise StoreClosedError(self.name)
        if self._readers:
            self._detach_readers()
        if self._data.pop(key, None) is not None:
            self._sorted = None

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        put = self.put
        for key, value in entries:
            put(key, value)

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        keys = self._sorted_keys()
        if from_key >= to_key:
            return iter(())
        return self._entries(keys, bisect_left(keys, from_key), bisect_left(keys, to_key))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        keys = self._sorted_keys()
        return self._entries(keys, 0, len(keys))

    def snapshot(self, from_key: bytes, to_key: bytes) -> KeyValueSnapshot[bytes, bytes]:
        # The range's iterator is the state as of this call, copied only when the store is written.
        return ReplayedSnapshot(self.range(from_key, to_key), self.name, self._check_open)

    def flush(self) -> None:
        self._check_open()

    def close(self) -> None:
        self._closed = True
        readers, self._readers = self._readers, {}
        for ref in readers.values():
            if (reader := ref()) is not None:
                reader._finish()  # it raises StoreClosedError from now on, and holds no entries
        self._data = {}
        self._sorted = None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(self.name)

    def _sorted_keys(self) -> list[bytes]:
        if self._closed:
            raise StoreClosedError(self.name)
        keys = self._sorted
        if keys is None:
            keys = self._sorted = sorted(self._data)
        return keys

    def _entries(self, keys: list[bytes], start: int, stop: int) -> Iterator[tuple[bytes, bytes]]:
        return _RangeIterator(self, islice(keys, start, stop))

    def _detach_readers(self) -> None:
        """Before a write: the unfinished iterators copy the entries they have left, as they are now."""
        readers, self._readers = self._readers, {}
        for ref in readers.values():
            reader = ref()
            if reader is not None:
                reader.detach()

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"InMemoryStore({self.name!r}, {len(self._data)} keys{', closed' if self._closed else ''})"


class _RangeIterator(Iterator[tuple[bytes, bytes]]):
    """An in-memory store's iterator: `keys` (a slice of the sorted keys as of the call) with their values,
    read from the store's dict until `detach` copies what is left, before the store is first written."""

    __slots__ = ("__weakref__", "_data", "_keys", "_store")

    def __init__(self, store: InMemoryStore, keys: Iterator[bytes]) -> None:
        self._store = store
        self._keys = keys
        self._data = store._data
        store._readers[id(self)] = weakref.ref(self)

    def __next__(self) -> tuple[bytes, bytes]:
        store = self._store
        if store._closed:
            raise StoreClosedError(store.name)
        for key in self._keys:  # the next key, if any
            return key, self._data[key]
        self._finish()
        raise StopIteration

    def detach(self) -> None:
        """Keep the entries left, as they are now: the store is about to change."""
        data = self._data
        rest = list(self._keys)
        self._data = {key: data[key] for key in rest}
        self._keys = iter(rest)

    def _finish(self) -> None:
        # Done or dropped: a write need not copy for it.
        self._store._readers.pop(id(self), None)
        self._keys = iter(())
        self._data = {}

    __del__ = _finish
