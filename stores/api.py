"""The key-value store interface every engine and layer implements."""

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Generic, Self, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class KeyValueStore(ABC, Generic[K, V]):
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
      in-memory engine documents its weaker guarantee), so writing to the store while iterating is safe.
      Abandoning an iterator midway is safe: its resources go with it. Closing the store ends its live
      iterators; using one afterwards raises `StoreClosedError`.
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

    @abstractmethod
    def flush(self) -> None:
        """Make buffered writes durable in the engine (called by the commit before a checkpoint)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; later use raises `StoreClosedError`. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
