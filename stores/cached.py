"""An object cache over a store: hot keys skip serdes and engine; dirty entries go down in batches.

Samza's CachedStore, with its defaults: `stores.<s>.object.cache.size` objects (1000), dirty entries
written below every `stores.<s>.write.batch.size` writes (500), on eviction of a dirty entry, before a
range scan or a snapshot, and on `flush()` (which every commit does before it writes the checkpoint). A
value read from the cache is the object that was put: mutate it only through `put`, as in Samza. Entries
are kept per serialized key (`samsa.stores.cache_keys`): with the built-in key serdes a hit costs no
serialization; with any other key serde (Avro, a user's) every call serializes the key, the only
identity safe for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

from samsa.stores.api import K, KeyValueSnapshot, KeyValueStore, V
from samsa.stores.cache_keys import key_identity
from samsa.stores.exceptions import StoreClosedError, StoreConfigError
from samsa.stores.serialized import SerializedStore

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

    One entry per serialized key: entries are keyed by the key's identity under the key serde of the
    `SerializedStore` below (`samsa.stores.cache_keys`), so an enum member and the equal plain key share
    one entry, while keys Python calls equal but the serde writes differently (1, 1.0 and True under
    JSON) stay apart. Over another store, entries are keyed by (type, key). A mutable (unhashable) key
    is written through at once. A value the serde's cheap check refuses fails at `put`, not at the later
    flush.
    """

    def __init__(self, inner: KeyValueStore[K, V], cache_size: int, write_batch_size: int) -> None:
        self.inner = inner
        self.name = inner.name
        self._size = cache_size
        self._batch = write_batch_size
        # identity -> value, least recently used first; None records a key known to be absent.
        self._cache: OrderedDict[Hashable, V | None] = OrderedDict()
        # Entries written since the last flush (ordered) -> the key last written under that identity.
        self._dirty: dict[Hashable, K] = {}
        # Writes that left the cache (counted per batch, so `put` pays nothing for `writes`).
        self._written = 0
        self._is_closed = False
        serialized = inner if isinstance(inner, SerializedStore) else None
        if serialized is None:
            identity = key_identity(None, _no_serde)
        else:
            identity = key_identity(serialized.key_serde, serialized.key_bytes)
        # Bound once: get/put run per message.
        self._plain, self._also = identity.plain, identity.also
        self._identity = identity.of
        self._check = serialized.value_check if serialized else None
        self._serialized = serialized

    def get(self, key: K) -> V | None:
        cls = key.__class__
        entry: Hashable = key if cls is self._plain or cls is self._also else self._identity(key)
        cache = self._cache
        try:
            value = cache[entry]
        except KeyError:
            value = self.inner.get(key)
            cache[entry] = value
            if len(cache) > self._size:
                self._evict()
            return value
        except TypeError:  # unhashable and no serde below: read below, after every pending write
            self._write_dirty()
            return self.inner.get(key)
        cache.move_to_end(entry)
        return value

    def put(self, key: K, value: V | None) -> None:
        cls = key.__class__
        entry: Hashable = key if cls is self._plain or cls is self._also else self._identity(key)
        check = self._check
        if check is not None and value is not None:
            try:  # now, not at the flush: the error then names the input message being processed
                check(value)
            except Exception as e:
                raise self._rejected(e, key, value) from None
        if cls.__hash__ is None:
            self._put_through(entry, key, value)
            return
        cache = self._cache
        cache[entry] = value
        cache.move_to_end(entry)
        dirty = self._dirty
        dirty[entry] = key
        if len(dirty) >= self._batch:
            self._write_dirty()
        if len(cache) > self._size:
            self._evict()

    @property
    def writes(self) -> int:
        """Grows with the writes since the store opened, those still in the cache included: unchanged
        between two reads means nothing was written (the first write after a flush always adds a dirty
        entry, and a flush moves the dirty count into the written one)."""
        return self._written + len(self._dirty)

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

    def snapshot(self, from_key: K, to_key: K) -> KeyValueSnapshot[K, V]:
        self._write_dirty()  # Samza's too: the snapshot then holds the task's own writes
        return self.inner.snapshot(from_key, to_key)

    def flush(self) -> None:
        self._write_dirty()
        self.inner.flush()

    def discard(self) -> int:
        """Drops every cached entry, dirty ones unwritten (an exactly-once rewind); returns how many."""
        count = len(self._cache)
        self._cache.clear()
        self._written += len(self._dirty)  # `writes` never goes back
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
            self.put_all = self.delete_all = self._closed  # type: ignore[method-assign,assignment]
            self.inner.close()

    def _closed(self, *args: Any) -> Any:
        raise StoreClosedError(self.name)

    def _put_through(self, entry: Hashable, key: K, value: V | None) -> None:
        """Writes below at once, in order after every pending write: the key is mutable (a JSON list),
        and a change to it while the cache held it would write another key at the flush."""
        self._write_dirty()
        try:
            self._cache.pop(entry, None)
        except TypeError:  # no serde below: the key is its own identity, and a cached one may alias it
            self._cache.clear()
        self._written += 1
        self.inner.put(key, value)

    def _rejected(self, error: Exception, key: K, value: V) -> Exception:
        assert self._serialized is not None  # only a serde below has a check
        return self._serialized.rejected(error, key, value)

    def _write_dirty(self) -> None:
        if not self._dirty:
            return
        cache = self._cache
        # One batch below (a RocksDB WriteBatch: atomic); dirty entries are always still cached. On a
        # failure (a value its serde rejects, named with its key) the entries stay dirty and the task fails.
        try:
            self.inner.put_all([(key, cache[entry]) for entry, key in self._dirty.items()])
        except Exception as e:
            e.add_note(
                f"store {self.name!r}: the entry was put earlier and held in the object cache until this "
                "flush of it (at a commit, every stores.<s>.write.batch.size writes, on eviction, before a "
                "range or all, or at close), so the message being processed now need not be the one that "
                "put it"
            )
            raise
        self._written += len(self._dirty)
        self._dirty.clear()

    def _evict(self) -> None:
        oldest = next(iter(self._cache))
        if oldest in self._dirty:
            self._write_dirty()  # Samza too writes every dirty entry when it must drop one
        del self._cache[oldest]


def _no_serde(key: Any) -> bytes:
    raise AssertionError("keys are identified by (type, key) when no serde is below")
