"""A blob store wrapper keeping Samza's ledgers: which blobs were put, read, deleted and made permanent.

`LedgerBlobStore(inner)` forwards every request to `inner` and records each one that succeeded, so a
test can check Samza's integration invariants: every blob put got `remove_ttl`; blobs put minus blobs
deleted are exactly those of the last snapshot plus its index; restore reads only what it must.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, TypeVar

from samsa.stores.blobstore.api import BlobMetadata, BlobStoreManager, Opener

T = TypeVar("T")


class LedgerBlobStore:
    """A `BlobStoreManager` recording the successful requests it passes to `inner` (thread-safe)."""

    def __init__(self, inner: BlobStoreManager) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._added: list[str] = []
        self._read: list[str] = []
        self._deleted: list[str] = []
        self._ttl_removed: list[str] = []

    def init(self) -> None:
        self.inner.init()

    def close(self) -> None:
        self.inner.close()

    def abandon(self) -> None:
        self.inner.abandon()

    def put(self, source: Opener, metadata: BlobMetadata) -> Future[str]:
        return self._recorded(self.inner.put(source, metadata), self._added, None)

    def get(self, blob_id: str, sink: Opener, metadata: BlobMetadata) -> Future[None]:
        return self._recorded(self.inner.get(blob_id, sink, metadata), self._read, blob_id)

    def delete(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        return self._recorded(self.inner.delete(blob_id, metadata), self._deleted, blob_id)

    def remove_ttl(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        return self._recorded(self.inner.remove_ttl(blob_id, metadata), self._ttl_removed, blob_id)

    def _recorded(self, inner: Future[T], ledger: list[str], blob_id: str | None) -> Future[T]:
        # A future of our own, done only once the ledger has the entry: a `Future`'s callbacks run after
        # its waiters wake, so a test reading the ledger right after `result()` could miss it otherwise.
        outer: Future[T] = Future()

        def done(future: Future[T]) -> None:
            if future.cancelled():
                outer.cancel()
                return
            error = future.exception()
            if error is not None:
                outer.set_exception(error)
                return
            result = future.result()
            with self._lock:
                ledger.append(blob_id if blob_id is not None else str(result))
            outer.set_result(result)

        inner.add_done_callback(done)
        return outer

    def _copy(self, ledger: list[str]) -> list[str]:
        with self._lock:
            return list(ledger)

    @property
    def added_list(self) -> list[str]:
        """Ids of blobs put, in completion order."""
        return self._copy(self._added)

    @property
    def read_list(self) -> list[str]:
        """Ids of blobs read (one entry per successful get)."""
        return self._copy(self._read)

    @property
    def deleted_list(self) -> list[str]:
        return self._copy(self._deleted)

    @property
    def ttl_removed_list(self) -> list[str]:
        return self._copy(self._ttl_removed)

    @property
    def added(self) -> set[str]:
        return set(self.added_list)

    @property
    def read(self) -> set[str]:
        return set(self.read_list)

    @property
    def deleted(self) -> set[str]:
        return set(self.deleted_list)

    @property
    def ttl_removed(self) -> set[str]:
        return set(self.ttl_removed_list)

    def __getattr__(self, name: str) -> Any:
        # The wrapped store's extras (list_blobs, gc, root...) stay reachable through the ledger.
        return getattr(self.inner, name)
