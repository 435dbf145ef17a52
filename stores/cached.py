"""An object cache over a store: hot keys skip serdes and engine; dirty entries go down in batches.

Samza's CachedStore, with its defaults: `stores.<s>.object.cache.size` objects (1000), dirty entries
written below every `stores.<s>.write.batch.size` writes (500), on eviction of a dirty entry, before a
range scan, and on `flush()` (which every commit does before it writes the checkpoint). A value read from
the cache is the object that was put: mutate it only through `put`, as in Samza.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from samsa.stores.api import K, KeyValueStore, V
from samsa.stores.exceptions import StoreClosedError, StoreConfigError

DEFAULT_CACHE_SIZE = 1000
DEFAULT_WRITE_BATCH_SIZE = 500


def cache_settings(store: str, options: Mapping[str, str]) -> tuple[int, int]:
    """(object.cache.size, write.batch.size) of a store's own keys, checked."""

    def number(sub: str, default: int, least: int) -> int:
        raw = options.get(sub)
        try:
            value = default if raw is None or not str(raw).strip() else int(raw)
        except ValueError:
            raise StoreConfigError(f"stores.{store}.{sub}", f"{raw!r} is not a whole number") from None
        if value < least:
            raise StoreConfigError(f"stores.{store}.{sub}", f"must be at least {least}")
        return value

    size = number("object.cache.size", DEFAULT_CACHE_SIZE, 0)
    batch = number("write.batch.size", DEFAULT_WRITE_BATCH_SIZE, 1)
    if size and batch > size:
        raise StoreConfigError(
            f"stores.{store}.write.batch.size", f"{batch} is more than object.cache.size={size}; lower it"
        )
    return size, batch


class CachedStore(KeyValueStore[K, V]):
    """LRU cache of deserialized objects with write-back of dirty entries, over a typed store.

    Entries are cached under (type, key), so keys Python calls equal but serdes write differently
    (1, 1.0 and True) stay apart. An unhashable key (e.g. a JSON list) bypasses the cache.
    """

    def __init__(self, inner: KeyValueStore[K, V], cache_size: int, write_batch_size: int) -> None:
        self.inner = inner
        self.name = inner.name
        self._size = cache_size
        self._batch = write_batch_size
        # (type, key) -> value, least recently used first; None records a key known to be absent.
        self._cache: OrderedDict[tuple[type, Any], V | None] = OrderedDict()
        self._dirty: dict[tuple[type, Any], None] = {}  # ordered set of entries written since the last flush
        self._is_closed = False

    def get(self, key: K) -> V | None:
        cache = self._cache
        entry = (key.__class__, key)
        try:
            value = cache[entry]
        except KeyError:
            value = self.inner.get(key)
            cache[entry] = value
            if len(cache) > self._size:
                self._evict()
            return value
        except TypeError:  # unhashable: read below, after every pending write
            self._write_dirty()
            return self.inner.get(key)
        cache.move_to_end(entry)
        return value

    def put(self, key: K, value: V | None) -> None:
        cache = self._cache
        entry = (key.__class__, key)
        try:
            cache[entry] = value
        except TypeError:
            # Unhashable: write below in order; a cached key with the same bytes would now be stale.
            self._write_dirty()
            cache.clear()
            self.inner.put(key, value)
            return
        cache.move_to_end(entry)
        dirty = self._dirty
        dirty[entry] = None
        if len(dirty) >= self._batch:
            self._write_dirty()
        if len(cache) > self._size:
            self._evict()

    def delete(self, key: K) -> None:
        self.put(key, None)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def range(self, from_key: K, to_key: K) -> Iterator[tuple[K, V]]:
        self._write_dirty()  # the engine orders by serialized keys: let it see every write
        return self.inner.range(from_key, to_key)

    def all(self) -> Iterator[tuple[K, V]]:
        self._write_dirty()
        return self.inner.all()

    def flush(self) -> None:
        self._write_dirty()
        self.inner.flush()

    def discard(self) -> int:
        """Drops every cached entry, dirty ones unwritten (an exactly-once rewind); returns how many."""
        count = len(self._cache)
        self._cache.clear()
        self._dirty.clear()
        return count

    def close(self) -> None:
        if self._is_closed:
            return
        self._is_closed = True
        try:
            self._write_dirty()
        finally:
            self._cache.clear()
            # Any later use fails at once, like the engines, instead of at a later flush.
            self.get = self.put = self.delete = self._closed  # type: ignore[method-assign,assignment]
            self.inner.close()

    def _closed(self, *args: Any) -> Any:
        raise StoreClosedError(self.name)

    def _write_dirty(self) -> None:
        if not self._dirty:
            return
        cache = self._cache
        # One batch below (a RocksDB WriteBatch: atomic); dirty entries are always still cached. On a
        # failure (a value its serde rejects, named with its key) the entries stay dirty and the task fails.
        self.inner.put_all([(entry[1], cache[entry]) for entry in self._dirty])
        self._dirty.clear()

    def _evict(self) -> None:
        oldest = next(iter(self._cache))
        if oldest in self._dirty:
            self._write_dirty()  # Samza too writes every dirty entry when it must drop one
        del self._cache[oldest]
