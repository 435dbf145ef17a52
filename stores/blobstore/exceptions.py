"""Errors of the blob-store backend: missing, corrupt or unsafe blobs and indexes, and failed transfers."""

from samsa.stores.exceptions import StoreError


class BlobStoreError(StoreError):
    """Base class of blob-store errors; raised as is for a failed request that retries did not fix."""


class BlobDeletedError(BlobStoreError):
    """The blob was deleted (or never existed): a `get` or `remove_ttl` of it cannot succeed."""

    def __init__(self, blob_id: str, where: str = "") -> None:
        self.blob_id = blob_id
        suffix = f" ({where})" if where else ""
        super().__init__(
            f"blob {blob_id!r} does not exist in the blob store{suffix}: it was deleted, expired before "
            "its commit completed, or the blob store location changed (blobstore.* keys)"
        )


class RetriableBlobError(BlobStoreError):
    """A transient failure (throttling, 5xx, timeout, reset): the request may succeed if tried again."""


class CorruptBlobError(BlobStoreError):
    """A blob's or a downloaded file's content does not match the checksum or size its index records."""


class IndexFormatError(BlobStoreError):
    """A snapshot index cannot be read: not JSON, missing fields, or a schema version this Samsa lacks."""


class UnsafeIndexError(BlobStoreError):
    """A snapshot index names a file or dir that would be written outside the store dir (or a link)."""


SNAPSHOT_UNUSABLE: tuple[type[BlobStoreError], ...] = (
    BlobDeletedError,
    CorruptBlobError,
    IndexFormatError,
    UnsafeIndexError,
)
"""A snapshot that is gone, corrupt or unsafe: a store that also has a changelog restores from it instead."""
