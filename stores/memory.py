"""In-memory key-value engine over bytes: a dict plus a lazily sorted key list for ordered reads."""

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import islice

from samsa.stores.api import KeyValueSnapshot, KeyValueStore, ReplayedSnapshot
from samsa.stores.exceptions import StoreClosedError


class InMemoryStore(KeyValueStore[bytes, bytes]):
    """A non-durable bytes store (Samza's in-memory engine), for non-persistent state and tests.

    Ordered reads sort the keys on first need and reuse that list until a key is added or removed.
    Iterators are weaker than RocksDB snapshots: they walk the *keys* present when `range`/`all` was
    called and read each value when reached, so a value updated meanwhile shows its new value and a key
    deleted meanwhile is skipped; keys added meanwhile are not seen. Writing while iterating is safe.
    `snapshot()` is stronger, a true snapshot: it copies the range's entries at the call (the values are
    shared, so one small tuple per entry).
    """

    def __init__(self, name: str = "inmemory") -> None:
        self.name = name
        self._data: dict[bytes, bytes] = {}
        # Replaced, never mutated, so a running iterator keeps a stable key list.
        self._sorted: list[bytes] | None = None
        self._closed = False

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
        data = self._data
        if key not in data:
            self._sorted = None
        data[key] = value

    def delete(self, key: bytes) -> None:
        if self._closed:
            raise StoreClosedError(self.name)
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
        # Copied now: the range's iterator reads values when reached, so it would see later writes.
        return ReplayedSnapshot(iter(list(self.range(from_key, to_key))), self.name, self._check_open)

    def flush(self) -> None:
        self._check_open()

    def close(self) -> None:
        self._closed = True
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
        for key in islice(keys, start, stop):
            if self._closed:
                raise StoreClosedError(self.name)
            value = self._data.get(key)
            if value is not None:
                yield key, value

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"InMemoryStore({self.name!r}, {len(self._data)} keys{', closed' if self._closed else ''})"
