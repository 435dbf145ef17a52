"""An in-memory `BlobStoreManager` for tests: requests on a thread pool, ledgers, injected failures.

Like the real stores it retries `RetriableBlobError`s itself (opening the stream again on each attempt),
gets and TTL removals of deleted blobs fail with `BlobDeletedError`, and deleting a missing blob succeeds.
Tests can fail the next N attempts of an operation (before the stream is touched, or after some bytes
went through it), run a hook at the start of each attempt, mark blobs deleted and corrupt their bytes.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from samsa.stores.blobstore.api import BlobMetadata, Opener
from samsa.stores.blobstore.exceptions import BlobDeletedError, RetriableBlobError

T = TypeVar("T")

OPERATIONS = ("put", "get", "delete", "remove_ttl")

#: A hook runs at the start of every attempt with the operation, the blob id (None for a put) and metadata.
Hook = Callable[[str, "str | None", BlobMetadata], None]


@dataclass
class _Fault:
    error: BaseException
    #: Fail after this many bytes went through the stream (None: before it is opened).
    after_bytes: int | None
    #: Only requests for this blob id (get, delete, remove_ttl) or payload path (put); None: any.
    only: str | None


class FakeBlobStore:
    """A blob store in a dict. `ledger` lists successful requests as (operation, blob id), in order."""

    def __init__(
        self, workers: int = 4, max_attempts: int = 5, name: str = "fake-blobs", inline: bool = False
    ) -> None:
        self.name = name
        #: Run each request on the caller's thread and return it already done (a synchronous store).
        self.inline = inline
        self.max_attempts = max_attempts
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self.blobs: dict[str, bytes] = {}
        self.metadata: dict[str, BlobMetadata] = {}
        self.permanent: set[str] = set()
        #: Blobs that are gone: deleted through the API or marked by a test.
        self.deleted: set[str] = set()
        self.ledger: list[tuple[str, str]] = []
        self.attempts: Counter[str] = Counter()
        self.cancelled = threading.Event()
        self._faults: dict[str, deque[_Fault]] = {op: deque() for op in OPERATIONS}
        self._hooks: dict[str, list[Hook]] = {op: [] for op in OPERATIONS}
        self._pending: set[Future[Any]] = set()

    def __repr__(self) -> str:
        return f"FakeBlobStore({self.name!r})"

    # -- test controls -----------------------------------------------------------------------------------

    def fail_next(
        self,
        operation: str,
        n: int = 1,
        error: BaseException | None = None,
        after_bytes: int | None = None,
        only: str | None = None,
    ) -> None:
        """Fails the next `n` matching attempts of `operation` (default: with a `RetriableBlobError`)."""
        with self._lock:
            for _ in range(n):
                e = error if error is not None else RetriableBlobError(f"injected {operation} failure")
                self._faults[operation].append(_Fault(e, after_bytes, only))

    def on(self, operation: str, hook: Hook) -> None:
        """Runs `hook` at the start of every attempt of `operation`, on the request's thread."""
        self._hooks[operation].append(hook)

    def mark_deleted(self, blob_id: str) -> None:
        with self._lock:
            self.deleted.add(blob_id)

    def corrupt(self, blob_id: str, data: bytes | None = None) -> None:
        """Replaces the blob's bytes with `data`, or flips the bits of its first byte."""
        with self._lock:
            old = self.blobs[blob_id]
            self.blobs[blob_id] = data if data is not None else bytes([old[0] ^ 0xFF]) + old[1:]

    def live(self) -> set[str]:
        """Blobs that exist (put and not deleted)."""
        with self._lock:
            return set(self.blobs) - self.deleted

    def done(self, operation: str) -> list[str]:
        """Blob ids of the successful requests of `operation`, in completion order."""
        with self._lock:
            return [blob_id for op, blob_id in self.ledger if op == operation]

    def pending(self) -> int:
        """Requests submitted and not finished."""
        with self._lock:
            return len(self._pending)

    # -- BlobStoreManager --------------------------------------------------------------------------------

    def init(self) -> None:
        pass

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def abandon(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def put(self, source: Opener, metadata: BlobMetadata) -> Future[str]:
        return self._submit("put", None, metadata, lambda fault: self._put(source, metadata, fault))

    def get(self, blob_id: str, sink: Opener, metadata: BlobMetadata) -> Future[None]:
        return self._submit("get", blob_id, metadata, lambda fault: self._get(blob_id, sink, fault))

    def delete(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        return self._submit("delete", blob_id, metadata, lambda fault: self._delete(blob_id, fault))

    def remove_ttl(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        return self._submit("remove_ttl", blob_id, metadata, lambda fault: self._remove_ttl(blob_id, fault))

    # -- internals ---------------------------------------------------------------------------------------

    def _submit(
        self, op: str, blob_id: str | None, metadata: BlobMetadata, attempt: Callable[[_Fault | None], T]
    ) -> Future[T]:
        if self.inline:
            done: Future[T] = Future()
            try:
                done.set_result(self._with_retries(op, blob_id, metadata, attempt))
            except BaseException as e:
                done.set_exception(e)
            return done
        future = self._executor.submit(self._with_retries, op, blob_id, metadata, attempt)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, future: Future[Any]) -> None:
        if future.cancelled():
            self.cancelled.set()
        with self._lock:
            self._pending.discard(future)

    def _with_retries(
        self, op: str, blob_id: str | None, metadata: BlobMetadata, attempt: Callable[[_Fault | None], T]
    ) -> T:
        for n in range(1, self.max_attempts + 1):
            for hook in list(self._hooks[op]):
                hook(op, blob_id, metadata)
            with self._lock:
                self.attempts[op] += 1
            fault = self._take_fault(op, blob_id if op != "put" else metadata.payload_path)
            if fault is not None and fault.after_bytes is None:
                if isinstance(fault.error, RetriableBlobError) and n < self.max_attempts:
                    continue
                raise fault.error
            try:
                return attempt(fault)
            except RetriableBlobError:
                if n == self.max_attempts:
                    raise
        raise AssertionError("unreachable")

    def _take_fault(self, op: str, key: str | None) -> _Fault | None:
        with self._lock:
            faults = self._faults[op]
            for fault in faults:
                if fault.only is None or fault.only == key:
                    faults.remove(fault)
                    return fault
        return None

    def _record(self, op: str, blob_id: str) -> None:
        with self._lock:
            self.ledger.append((op, blob_id))

    def _put(self, source: Opener, metadata: BlobMetadata, fault: _Fault | None) -> str:
        with source() as stream:
            if fault is not None:
                stream.read(fault.after_bytes)
                raise fault.error
            parts = []
            while part := stream.read(64 << 10):
                parts.append(part)
        blob_id = f"{metadata.payload_path}#{next(self._ids)}"
        with self._lock:
            self.blobs[blob_id] = b"".join(parts)
            self.metadata[blob_id] = metadata
        self._record("put", blob_id)
        return blob_id

    def _get(self, blob_id: str, sink: Opener, fault: _Fault | None) -> None:
        with self._lock:
            data = None if blob_id in self.deleted else self.blobs.get(blob_id)
        if data is None:
            raise BlobDeletedError(blob_id, f"in {self.name}")
        with sink() as out:
            if fault is not None:
                out.write(data[: fault.after_bytes])
                raise fault.error
            for i in range(0, len(data), 1000):  # several writes, as a real store's pieces
                out.write(data[i : i + 1000])
        self._record("get", blob_id)

    def _delete(self, blob_id: str, fault: _Fault | None) -> None:
        if fault is not None:
            raise fault.error
        with self._lock:
            self.deleted.add(blob_id)
        self._record("delete", blob_id)

    def _remove_ttl(self, blob_id: str, fault: _Fault | None) -> None:
        if fault is not None:
            raise fault.error
        with self._lock:
            if blob_id in self.deleted or blob_id not in self.blobs:
                raise BlobDeletedError(blob_id, f"in {self.name}")
            self.permanent.add(blob_id)
        self._record("remove_ttl", blob_id)
