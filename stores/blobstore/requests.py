"""What both blob stores share: blob ids naming whom a blob is for, and requests run on an executor.

Blob ids are readable relative paths, `<job>-<job id>/<task>/<store>/<payload path>.<uuid4 hex>`; a
store checks an id handed back to it (`check_blob_id`) before it touches anything with it.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, BinaryIO, ParamSpec, TypeVar

from samsa.stores.blobstore.api import BlobMetadata, Opener
from samsa.stores.blobstore.exceptions import BlobStoreError

P = ParamSpec("P")
T = TypeVar("T")

PIECE = 1 << 20
"""Bytes copied at a time: a 64 MiB chunk never sits in memory whole."""

ABANDON_WAIT_S = 2.0
"""How long a close after a failure waits for abandoned requests to end: one waiting to retry ends at once,
one in flight at its answer; one stalled on a dead connection (up to the client's read timeout) is left to
end by itself rather than hold the failing container."""

ID_END = re.compile(r"\.[0-9a-f]{32}$")
_UNSAFE_CHARS = re.compile(r"[^\w.=+-]", re.ASCII)
# File names stay below the usual 255-byte limit with the uuid, sidecar and temp suffixes added.
_MAX_SEGMENT = 100
_MAX_PAYLOAD_SEGMENT = 150


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """One stored blob; `expires_at` (epoch seconds) is None once permanent, or when it was not looked up."""

    blob_id: str
    size: int
    created_at: float
    expires_at: float | None


def _segment(text: str, limit: int = _MAX_SEGMENT) -> str:
    # A readable single path segment: never empty, '.', '..' or hidden, whatever the job calls things.
    cleaned = _UNSAFE_CHARS.sub("_", text).lstrip(".")[:limit]
    return cleaned or "_"


def job_segment(job_name: str, job_id: str) -> str:
    """The first path segment of every blob id of job `job_name` (id `job_id`): `<job.name>-<job.id>`."""
    return _segment(f"{job_name}-{job_id}")


def new_blob_id(metadata: BlobMetadata) -> str:
    """A new, unique blob id naming whom the blob is for; the same metadata never gives the same id."""
    return "/".join(
        (
            job_segment(metadata.job_name, metadata.job_id),
            _segment(metadata.task_name),
            _segment(metadata.store_name),
            f"{_segment(metadata.payload_path.replace('/', '_'), _MAX_PAYLOAD_SEGMENT)}.{uuid.uuid4().hex}",
        )
    )


def check_blob_id(blob_id: str) -> str:
    """`blob_id` when it has the shape of the ids `new_blob_id` makes; a `BlobStoreError` naming it if not."""
    segments = blob_id.split("/")
    if (
        not blob_id
        or blob_id.startswith("/")
        or os.path.isabs(blob_id)
        or "\\" in blob_id
        or "\x00" in blob_id
        or any(s in ("", ".", "..") for s in segments)
        or not ID_END.search(segments[-1])
    ):
        raise BlobStoreError(
            f"blob id {blob_id!r} is not one this blob store makes (absolute, empty or '..' segments, or "
            "no '.<uuid>' suffix); nothing was touched - the snapshot index or checkpoint naming it is "
            "corrupt or crafted"
        )
    return blob_id


class RequestTracker:
    """Runs a store's requests on its executor and remembers the unfinished ones, so `close` can wait."""

    def __init__(self, executor: Executor, what: str) -> None:
        self._executor = executor
        self._what = what
        self._lock = threading.Lock()
        self._pending: set[Future[Any]] = set()
        self._closed = False

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._lock:
            if self._closed:
                raise BlobStoreError(f"{self._what} is closed; open a new blob store to make requests")
            future = self._executor.submit(fn, *args, **kwargs)
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def close(self) -> None:
        """Refuses new requests and waits for those in flight."""
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        wait(pending)

    def abandon(self) -> None:
        """Refuses new requests and cancels the queued ones; those running are not waited for."""
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        for future in pending:
            future.cancel()


def join_pools(pools: Iterable[ThreadPoolExecutor], timeout_s: float) -> bool:
    """Waits up to `timeout_s` in all for the threads of the shut-down `pools` to end; whether all did."""
    pools = list(pools)
    deadline = time.monotonic() + timeout_s
    for pool in pools:
        for thread in list(pool._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for pool in pools for thread in pool._threads)


def copy_stream(source: BinaryIO, target: BinaryIO) -> int:
    """Copies `source` to `target` a piece at a time; returns the byte count."""
    size = 0
    while piece := source.read(PIECE):
        target.write(piece)
        size += len(piece)
    return size


class ExecutorBlobStore:
    """Base of the blob stores: each request runs `_put`, `_get`, `_delete` or `_remove_ttl` on the
    store's executor through `self._requests`, which `close` drains."""

    _requests: RequestTracker

    def put(self, source: Opener, metadata: BlobMetadata) -> Future[str]:
        return self._requests.submit(self._put, source, metadata)

    def get(self, blob_id: str, sink: Opener, metadata: BlobMetadata) -> Future[None]:
        return self._requests.submit(self._get, blob_id, sink, metadata)

    def delete(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        return self._requests.submit(self._delete, blob_id, metadata)

    def remove_ttl(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        return self._requests.submit(self._remove_ttl, blob_id, metadata)

    def close(self) -> None:
        self._requests.close()

    def abandon(self) -> None:
        self._requests.abandon()

    def _put(self, source: Opener, metadata: BlobMetadata) -> str:
        raise NotImplementedError

    def _get(self, blob_id: str, sink: Opener, metadata: BlobMetadata) -> None:
        raise NotImplementedError

    def _delete(self, blob_id: str, metadata: BlobMetadata) -> None:
        raise NotImplementedError

    def _remove_ttl(self, blob_id: str, metadata: BlobMetadata) -> None:
        raise NotImplementedError
