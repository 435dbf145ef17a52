"""A RocksDB store's writes held in memory while its commit checkpoint is taken off the run loop thread.

A commit's blocking phase used to flush the memtable and take the RocksDB checkpoint on the loop thread:
the flush builds and fsyncs an SST of everything written since the previous commit, the checkpoint
fsyncs its files, and on a busy disk either can take a hundred milliseconds. The gate moves both to the
commit's async phase. At the snapshot point the loop thread calls `hold()`: from then on the task's
writes to this store go to an in-memory overlay (reads see the overlay, then the engine), so the engine
holds exactly the snapshot's state while the commit thread flushes it (rocksdict releases the GIL while a
flush runs) and takes its checkpoint. The commit thread then calls `release()`, and the loop thread
writes the overlay into the engine in one batch at its next use of the store.

Memory: the writes of the time a flush and checkpoint take (one entry per distinct key). Durability is
unchanged: what the overlay holds is in the changelog (the logged layer is above the gate) and is the
next commit's to checkpoint; a crash loses it as it would lose a memtable.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from samsa.exactly_once.overlay import OverlayStore
from samsa.stores.api import KeyValueSnapshot, KeyValueStore


class SnapshotGate(KeyValueStore[bytes, bytes]):
    """Sits right above a persistent engine; `hold` and `release` bracket the engine's checkpoint.

    `hold()` and every store call come from the loop thread; `release()` from the commit thread, once it
    is done with the engine. `flush()` does not flush the engine's memtable: the commit does that off the
    loop thread (writes go through RocksDB's write-ahead log, so nothing waits on the flush to be safe).
    """

    def __init__(self, engine: KeyValueStore[bytes, bytes]) -> None:
        self.inner = engine
        self.name = engine.name
        self._held: OverlayStore | None = None
        self._released = False  # set by the commit thread; read by the loop thread

    # -- the checkpoint bracket -------------------------------------------------------------------------

    def hold(self) -> None:
        """From now on writes wait in memory: the engine keeps the state as of this call."""
        self._settle()
        if self._held is None:
            self._held = OverlayStore(self.inner)
            self._released = False

    def release(self) -> None:
        """The checkpoint is taken (or failed): the writes held go into the engine at its next use."""
        self._released = True

    @property
    def holding(self) -> bool:
        """Whether writes are held (a checkpoint is being taken, or its release not applied yet)."""
        return self._held is not None

    @property
    def held_count(self) -> int:
        """Distinct keys written while held, not yet in the engine."""
        return 0 if self._held is None else self._held.pending_count

    def _settle(self) -> KeyValueStore[bytes, bytes]:
        held = self._held
        if held is None:
            return self.inner
        if not self._released:
            return held
        self._held = None
        held.commit()
        return self.inner

    # -- the store --------------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        return self._settle().get(key)

    def get_all(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        return self._settle().get_all(keys)

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self._settle().range(from_key, to_key)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._settle().all()

    def snapshot(self, from_key: bytes, to_key: bytes) -> KeyValueSnapshot[bytes, bytes]:
        return self._settle().snapshot(from_key, to_key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._settle().put(key, value)

    def delete(self, key: bytes) -> None:
        self._settle().delete(key)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        self._settle().put_all(entries)

    def flush(self) -> None:
        self._settle()

    def close(self) -> None:
        # A clean close comes after the last commit's async phase: what is held is released by then.
        # Otherwise (a failed commit, a crash) the held writes go as an unflushed memtable would.
        self._settle()
        self._held = None
        self.inner.close()

    def __repr__(self) -> str:
        return f"SnapshotGate({self.inner!r})"
