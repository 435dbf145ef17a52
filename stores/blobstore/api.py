"""The blob store manager interface: put, get, delete and TTL removal of immutable blobs, non-blocking.

Implementations run every request on an executor they are given (never the caller's thread), and return
`concurrent.futures.Future`s. A blob is written once and never changed: `put` always makes a new blob.
Every blob is put with a time-to-live, so blobs of a commit that never reached its checkpoint expire on
their own; `remove_ttl` makes a blob permanent once its commit is durable. `delete` and `remove_ttl` are
idempotent; `get` or `remove_ttl` of a deleted blob fails with `BlobDeletedError`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import BinaryIO, Protocol

Opener = Callable[[], BinaryIO]
"""Opens a fresh stream: `put` reads one per attempt from its start; `get` writes one per attempt (the
opener positions and truncates it, so a retry never appends to a partial download)."""

SNAPSHOT_INDEX_PATH = "snapshot-index"
"""`BlobMetadata.payload_path` of a snapshot index blob (Samza's constant)."""


@dataclass(frozen=True)
class BlobMetadata:
    """Who a request is for; a store may derive readable blob names from it, and logs name it."""

    #: The file's path relative to the snapshot root (`SNAPSHOT_INDEX_PATH` for an index).
    payload_path: str
    #: Bytes to be put, -1 when unknown.
    payload_size: int
    job_name: str
    job_id: str
    task_name: str
    store_name: str

    @classmethod
    def of_store(cls, job_name: str, job_id: str, task_name: str, store_name: str) -> BlobMetadata:
        """The metadata of one task's store, payload not yet known (requests replace the payload fields)."""
        return cls("", -1, job_name, job_id, task_name, store_name)

    def describe(self) -> str:
        return f"{self.payload_path} of store {self.store_name} of {self.task_name}"


class BlobStoreManager(Protocol):
    """One blob store location (a directory, an S3 bucket and prefix)."""

    def init(self) -> None:
        """Prepares the client; called once before any request."""

    def put(self, source: Opener, metadata: BlobMetadata) -> Future[str]:
        """Stores the bytes `source()` yields as a new blob with a TTL; the future gives its id."""
        ...

    def get(self, blob_id: str, sink: Opener, metadata: BlobMetadata) -> Future[None]:
        """Writes the blob's bytes to `sink()`; fails with `BlobDeletedError` when it is gone."""
        ...

    def delete(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        """Deletes the blob; deleting a missing blob succeeds."""
        ...

    def remove_ttl(self, blob_id: str, metadata: BlobMetadata) -> Future[None]:
        """Makes the blob permanent (a no-op when it is); fails with `BlobDeletedError` when it is gone."""
        ...

    def close(self) -> None:
        """Releases the client; requests in flight finish first."""

    def abandon(self) -> None:
        """After a failure: refuses new requests, drops queued ones and stops retrying those in flight,
        without waiting for them (a blob they still write has its TTL: it expires uncommitted)."""
