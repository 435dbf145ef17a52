"""A full disk met by a blob-store restore, a state bootstrap's SST writer, an adjunct offsets file or a
local blob store's put is a `StoreDiskFullError` naming the store and the path (a real tiny tmpfs, or
RLIMIT_FSIZE in a subprocess where none can be mounted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from disk_full_places import fill

# Before, each surfaced as something else (on a 1 MiB tmpfs):
#   blob_restore: BlobStoreError "get of blob job-1/Partition_0/counts/000012.sst.<id> (job/1/Partition 0/
#     counts/000012.sst) failed copying it to its sink: [Errno 28] No space left on device; check that the
#     store dir is writable and has space"
#   sst_write (a bootstrap partition's Spark task): a bare Exception "IO error: No space left on device:
#     While appending to file: .../staging/partition-0.sst: No space left on device"
#   adjunct_offsets: StoreDiskFullError, but of no store: "disk full: .../Partition_0/customers/
#     ADJUNCT-OFFSETS: write failed for want of room ([Errno 28] No space left on device); 0 bytes free ..."
#   blob_put: BlobStoreError "put of job/1/Partition 0/counts/000012.sst as blob ... in .../blobs failed:
#     [Errno 28] No space left on device; check the source file and that the blob store dir is writable and
#     has space"
PLACES = {
    "blob_restore": ("counts", "restore from the blob store failed", "job.logged.store.base.dir"),
    "sst_write": ("counts", "write SST file failed", "point --staging"),
    "adjunct_offsets": ("customers", "write failed", "job.logged.store.base.dir"),
    "blob_put": ("counts", "put of 000012.sst of store counts of Partition 0 as blob", "blobstore.local.dir"),
}


@pytest.mark.parametrize("place", list(PLACES))
def test_a_full_disk_is_a_store_disk_full_error_naming_the_store_and_the_path(
    place: str, tmp_path: Path
) -> None:
    store, action, fix = PLACES[place]
    kind, message, path, _ = fill(place, tmp_path)
    assert kind == "StoreDiskFullError", f"{kind}: {message}"
    assert message.startswith(f"disk full: store {store!r} at {path}"), message
    assert action in message and "failed for want of room" in message, message
    assert " bytes free on that disk. Free space there" in message and fix in message, message
