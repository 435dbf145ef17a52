"""The key-value store interface every engine and layer implements."""

import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from samsa.stores.exceptions import SnapshotClosedError

K = TypeVar("K")
T = TypeVar("T")
V = TypeVar("V")


class Closeable(ABC):
    """Something released by `close()`, also as a context manager (`with store: ...`)."""

    @abstractmethod
    def close(self) -> None:
        """Release it; idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class KeyValueStore(Closeable, Generic[K, V]):
    """A key-value store, Samza's `KeyValueStore`.

    Stores stack (Samza's design): a bytes engine (`RocksDbStore`, `InMemoryStore`) at the bottom, layers
    above it (`SerializedStore`; changelog logging and caching next) each wrapping an inner store and
    implementing this same interface, so a task cannot tell how many layers it talks to.

    Semantics shared by all implementations:
    - `put(key, None)` deletes the key, as in Samza; `put_all` entries with a `None` value delete too, and
      `delete_all(keys)` is `put_all` of None values (one atomic batch on RocksDB; a logged store writes
      a changelog tombstone per key, as for `delete`).
    - Ordering (`range`, `all`) is by the *serialized* key bytes, compared bytewise.
    - `range(from_key, to_key)` includes `from_key` and excludes `to_key`; `from_key >= to_key` is empty.
    - Iterators see the store as of the call that created them (RocksDB: a consistent snapshot; the
      in-memory engine: a copy of what is left, taken at the first write), so writing while iterating is safe.
      Abandoning an iterator midway is safe: its resources go with it. Closing the store ends its live
      iterators; using one afterwards raises `StoreClosedError`.
    - `snapshot(from_key, to_key)` is the range as of the call, walked again by each of its `iterator()`s
      whatever is written meanwhile (a `range` iterator walks once); a caching layer
      writes its dirty entries below first, so the snapshot holds the task's own writes.
    - Any use after `close()` raises `StoreClosedError`; `close()` itself is idempotent.
    - A store is used from one thread at a time (the task's); engines document any exception.
    """

    #: Shown in error messages; engines set it to the configured store name.
    name: str = "<unnamed>"

    @abstractmethod
    def get(self, key: K) -> V | None:
        """The value of `key`, or None when absent."""

    @abstractmethod
    def put(self, key: K, value: V | None) -> None:
        """Set `key` to `value`; a None value deletes the key."""

    def delete(self, key: K) -> None:
        """Remove `key`; removing an absent key is a no-op."""
        self.put(key, None)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        """Apply many puts (None values delete); engines make the batch atomic where they can."""
        put = self.put
        for key, value in entries:
            put(key, value)

    def delete_all(self, keys: Iterable[K]) -> None:
        """Remove every key of `keys` (Samza's `deleteAll`); absent keys are no-ops."""
        self.put_all([(key, None) for key in keys])

    def get_all(self, keys: Iterable[K]) -> dict[K, V]:
        """The values of `keys` that are present; absent keys are left out of the result."""
        get = self.get
        found: dict[K, V] = {}
        for key in keys:
            value = get(key)
            if value is not None:
                found[key] = value
        return found

    @abstractmethod
    def range(self, from_key: K, to_key: K) -> Iterator[tuple[K, V]]:
        """Entries with `from_key <= key < to_key` (serialized order), ascending."""

    @abstractmethod
    def all(self) -> Iterator[tuple[K, V]]:
        """Every entry, ascending by serialized key."""

    def snapshot(self, from_key: K, to_key: K) -> "KeyValueSnapshot[K, V]":
        """The entries of `range(from_key, to_key)` as of this call, to walk any number of times (Samza's
        `snapshot`); close it when done."""
        # A copy of the range taken now is right for any store, whatever its iterators guarantee; the
        # engines and layers override this to avoid the copy and to end their snapshots when they close.
        # A custom engine that does not override it gets a copy that only its own close() ends.
        return ReplayedSnapshot(iter(list(self.range(from_key, to_key))), self.name, _always_open)

    @abstractmethod
    def flush(self) -> None:
        """Make buffered writes durable in the engine (called by the commit before a checkpoint)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; later use raises `StoreClosedError`. Idempotent."""


class KeyValueSnapshot(Closeable, Generic[K, V]):
    """Samza's `KeyValueSnapshot`: one range of a store as of `KeyValueStore.snapshot`.

    Every `iterator()` walks the same entries ascending by serialized key, whatever was written to the
    store since. `close()` releases it; using it afterwards, or after its store closed, raises
    `StoreClosedError`. Used from one thread at a time, like its store.
    """

    @abstractmethod
    def iterator(self) -> Iterator[tuple[K, V]]:
        """The snapshot's entries, from the first; may be called again, also while another walk runs."""

    @abstractmethod
    def close(self) -> None:
        """Release the snapshot (and what it kept); later use raises `StoreClosedError`. Idempotent."""

    @abstractmethod
    def check_open(self) -> None:
        """Raise `StoreClosedError` if the snapshot or its store is closed (for layers' walks)."""


class ReplayedSnapshot(KeyValueSnapshot[K, V]):
    """A snapshot read from one iterator opened at the snapshot call; what it gave is kept and replayed.

    `entries` must yield the state of its creation whatever is written later: a RocksDB iterator does
    (it pins the database's state), a list copied at the call does. rocksdict's own `Snapshot` does not
    serve here: it reads at the snapshot by key, but iterates the live database. `entries` is read
    lazily, only as far as the furthest walk so far, and each entry read stays in memory until `close()`
    (a snapshot walked halfway costs that half). `store_open` raises `StoreClosedError` once the store is
    closed; it runs at each `iterator()` and each entry, so closing the store ends the snapshot.
    """

    def __init__(self, entries: Iterator[tuple[K, V]], store: str, store_open: Callable[[], object]) -> None:
        self._entries: Iterator[tuple[K, V]] | None = entries
        self._read: list[tuple[K, V]] = []
        self._store = store
        self._store_open = store_open
        self._closed = False

    def iterator(self) -> Iterator[tuple[K, V]]:
        self.check_open()
        return self._walk()

    def close(self) -> None:
        self._closed = True
        self._read = []
        entries, self._entries = self._entries, None
        close = getattr(entries, "close", None)  # an engine iterator releases its native one now
        if close is not None:
            close()

    def _walk(self) -> Iterator[tuple[K, V]]:
        position = 0
        while True:
            self.check_open()
            # The list is looked up at each step, never held across a yield: a suspended walk of a closed
            # snapshot keeps none of its entries.
            if position == len(self._read):  # past what earlier walks read: read on
                entries = self._entries
                if entries is None:
                    return
                entry = next(entries, None)
                del entries
                if entry is None:
                    self._entries = None
                    return
                self._read.append(entry)
            entry = self._read[position]
            yield entry
            position += 1

    def check_open(self) -> None:
        if self._closed:
            raise SnapshotClosedError(self._store)
        self._store_open()


class LayeredSnapshot(KeyValueSnapshot[K, V]):
    """A layer's view of the snapshot of the store below: each walk of it goes through `walk`.

    `walk` maps a walk of `inner` to this layer's entries (deserializing, merging entries the layer
    holds): done again at each `iterator()`, so what the layer adds costs no memory per entry, and each
    walk gets fresh objects. A walk yielding entries of its own calls `inner.check_open()` before each,
    so that it too ends with the store. `release` (if given) runs once, at `close()` or when the snapshot is
    garbage collected.
    """

    def __init__(
        self,
        inner: KeyValueSnapshot[Any, Any],
        walk: Callable[[Iterator[tuple[Any, Any]]], Iterator[tuple[K, V]]],
        release: Callable[[], object] | None = None,
    ) -> None:
        self._inner = inner
        self._walk = walk
        self._release = None if release is None else weakref.finalize(self, release)

    def iterator(self) -> Iterator[tuple[K, V]]:
        # The walk holds this snapshot: `store.snapshot(a, b).iterator()` would otherwise let it be
        # collected, and its `release` run, while the walk goes on.
        return _holding(self._walk(self._inner.iterator()), self)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            if self._release is not None:
                self._release()

    def check_open(self) -> None:
        self._inner.check_open()


def _holding(walk: Iterator[T], owner: object) -> Iterator[T]:
    """`walk`, keeping `owner` alive (a local of this generator's frame) until the walk ends or is dropped."""
    yield from walk


def _always_open() -> None:
    """What a store that does not say when it is closed gives its snapshots (see `snapshot`)."""
