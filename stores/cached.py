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
from samsa.stores.exceptions import StoreConfigError

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
    """LRU cache of deserialized objects with write-back of dirty entries, over a typed store."""

    def __init__(self, inner: KeyValueStore[K, V], cache_size: int, write_batch_size: int) -> None:
        self.inner = inner
        self.name = inner.name
        self._size = cache_size
        self._batch = write_batch_size
        # key -> value, least recently used first; None records a key known to be absent.
        self._cache: OrderedDict[Any, V | None] = OrderedDict()
        self._dirty: dict[Any, None] = {}  # insertion-ordered set of keys written since the last flush

    def get(self, key: K) -> V | None:
        cache = self._cache
        try:
            value = cache[key]
        except KeyError:
            value = self.inner.get(key)
            cache[key] = value
            if len(cache) > self._size:
                self._evict()
            return value
        except TypeError:  # an unhashable key (e.g. a JSON object) cannot be cached
            self._write_dirty()
            return self.inner.get(key)
        cache.move_to_end(key)
        return value

    def put(self, key: K, value: V | None) -> None:
        cache = self._cache
        try:
            cache[key] = value
        except TypeError:
            self._write_dirty()
            self.inner.put(key, value)
            return
        cache.move_to_end(key)
        dirty = self._dirty
        dirty[key] = None
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

    def close(self) -> None:
        try:
            self._write_dirty()
        finally:
            self._cache.clear()
            self.inner.close()

    def _write_dirty(self) -> None:
        if not self._dirty:
            return
        cache = self._cache
        # One batch below (a RocksDB WriteBatch: atomic); dirty keys are always still cached.
        self.inner.put_all([(key, cache[key]) for key in self._dirty])
        self._dirty.clear()

    def _evict(self) -> None:
        oldest = next(iter(self._cache))
        if oldest in self._dirty:
            self._write_dirty()  # Samza too writes every dirty entry when it must drop one
        del self._cache[oldest]
