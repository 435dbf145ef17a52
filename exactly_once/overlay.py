"""Uncommitted writes: a store layer that keeps the current version's writes in memory until its checkpoint.

In exactly-once mode a task's writes of the version it is building must reach the engine (and the
changelog's committed range) only when that version is checkpointed, and vanish when it is rewound.
`OverlayStore` holds them: reads see the overlay, then the store below; deletes are tombstones;
`range`/`all` merge both in key order; `commit()` writes the overlay below in one `put_all` (a RocksDB
WriteBatch: atomic) and `discard()` drops it.

It works on serialized keys and values (bytes), because `range` must merge in the engine's order,
which is the bytewise order of serialized keys: it sits below the serde layer. Anything caching above
it must be dropped on `discard()` (a cache would otherwise keep serving discarded values) and flushed
into it before `commit()`.

Memory bound: the overlay holds one entry per distinct key written since the last commit, plus its
sorted key list while ranges are read: about (key + value + ~100 bytes of Python overhead) per key.
That is bounded by what a task writes between two checkpoints; `pending_bytes` reports the payload so
the run loop can export it as a metric. There is no spill to disk: a version too large for memory needs
shorter commit intervals at the sources (`task.commit.ms`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator

from samsa.stores.api import KeyValueSnapshot, KeyValueStore, LayeredSnapshot
from samsa.stores.exceptions import StoreClosedError

_ABSENT = object()


class OverlayStore(KeyValueStore[bytes, bytes]):
    """A bytes store whose writes stay in memory until `commit()` (module docstring).

    Iterators see the overlay as of the call that created them and the store below with that store's
    own guarantee; a snapshot sees both as of its call. `flush()` flushes the store below and does not
    commit the overlay. `close()` drops uncommitted writes, as a crash would, and closes the store below.
    """

    def __init__(self, inner: KeyValueStore[bytes, bytes]) -> None:
        self.inner = inner
        self.name = inner.name
        self._pending: dict[bytes, bytes | None] = {}  # None: a tombstone
        self._sorted: list[bytes] | None = None  # replaced, never mutated: running iterators keep theirs
        self._bytes = 0
        self._closed = False

    # -- reads ----------------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        value = self._pending.get(key, _ABSENT)
        if value is _ABSENT:
            return self.inner.get(key)
        return value  # type: ignore[return-value]

    def get_all(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        self._check_open()
        pending = self._pending
        found: dict[bytes, bytes] = {}
        below: list[bytes] = []
        for key in keys:
            value = pending.get(key, _ABSENT)
            if value is _ABSENT:
                below.append(key)
            elif value is not None:
                found[key] = value  # type: ignore[assignment]
        if below:
            found.update(self.inner.get_all(below))
        return found

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        self._check_open()
        if from_key >= to_key:
            return iter(())
        return self._merged(
            self.inner.range(from_key, to_key), self._mine(from_key, to_key), self._check_open
        )

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        self._check_open()
        return self._merged(self.inner.all(), self._mine(None, None), self._check_open)

    def snapshot(self, from_key: bytes, to_key: bytes) -> KeyValueSnapshot[bytes, bytes]:
        """The overlay's entries of the range as of now, merged into each walk of the snapshot below."""
        self._check_open()
        mine = self._mine(from_key, to_key) if from_key < to_key else []
        below = self.inner.snapshot(from_key, to_key)
        # Checks the snapshot below, not this overlay: a gate's held overlay is dropped, not closed.
        return LayeredSnapshot(below, lambda entries: self._merged(entries, mine, below.check_open))

    # -- writes ---------------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes | None) -> None:
        self._check_open()
        pending = self._pending
        old = pending.get(key, _ABSENT)
        if old is _ABSENT:
            self._sorted = None
            self._bytes += len(key)
        elif old is not None:
            self._bytes -= len(old)  # type: ignore[arg-type]
        if value is not None:
            self._bytes += len(value)
        pending[key] = value

    def delete(self, key: bytes) -> None:
        self.put(key, None)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        put = self.put
        for key, value in entries:
            put(key, value)

    # -- versions -------------------------------------------------------------------------------------

    def commit(self) -> int:
        """Writes the overlay to the store below in one batch and clears it; returns how many entries."""
        self._check_open()
        pending = self._pending
        if not pending:
            return 0
        # On a failure below, the overlay stays whole: the task fails and restarts from its checkpoint.
        self.inner.put_all(list(pending.items()))
        count = len(pending)
        self._clear()
        return count

    def discard(self) -> int:
        """Drops the uncommitted writes; returns how many entries went."""
        self._check_open()
        count = len(self._pending)
        self._clear()
        return count

    @property
    def pending_count(self) -> int:
        """Distinct keys written (or deleted) since the last commit or discard."""
        return len(self._pending)

    @property
    def pending_bytes(self) -> int:
        """Bytes of keys and values held uncommitted (payload only)."""
        return self._bytes

    # -- lifecycle ------------------------------------------------------------------------------------

    def flush(self) -> None:
        self._check_open()
        self.inner.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._clear()
        self.inner.close()

    # -- internals ------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(self.name)

    def _clear(self) -> None:
        # A new dict, not clear(): iterators already running keep the entries they snapshotted.
        self._pending = {}
        self._sorted = None
        self._bytes = 0

    def _sorted_keys(self) -> list[bytes]:
        keys = self._sorted
        if keys is None:
            keys = self._sorted = sorted(self._pending)
        return keys

    def _mine(self, from_key: bytes | None, to_key: bytes | None) -> list[tuple[bytes, bytes | None]]:
        """The overlay's entries (None: a tombstone) with `from_key <= key < to_key` (None: unbounded)."""
        # Values of the overlay are taken now, so an iterator sees the overlay as of the call making it.
        keys = self._sorted_keys()
        start = 0 if from_key is None else bisect_left(keys, from_key)
        stop = len(keys) if to_key is None else bisect_left(keys, to_key)
        pending = self._pending
        return [(key, pending[key]) for key in keys[start:stop]]

    def _merged(
        self,
        below: Iterator[tuple[bytes, bytes]],
        mine: list[tuple[bytes, bytes | None]],
        check_open: Callable[[], None],
    ) -> Iterator[tuple[bytes, bytes]]:
        """`below` with `mine` merged in; `check_open` raises once the store is closed."""
        i, n = 0, len(mine)
        for key, value in below:
            while i < n and mine[i][0] < key:
                check_open()
                own_key, own_value = mine[i]
                i += 1
                if own_value is not None:
                    yield own_key, own_value
            if i < n and mine[i][0] == key:
                own_value = mine[i][1]
                i += 1
                if own_value is not None:
                    yield key, own_value
                continue
            yield key, value
        while i < n:
            check_open()
            own_key, own_value = mine[i]
            i += 1
            if own_value is not None:
                yield own_key, own_value
