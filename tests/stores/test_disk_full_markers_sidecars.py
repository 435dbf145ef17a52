"""A full disk met by a checkpoint marker file or by the local blob store's TTL sidecar rewrite (remove_ttl)
or its dir's creation is a `StoreDiskFullError` naming the store and the path, and leaves no temp file (a
real tiny tmpfs, or RLIMIT_FSIZE in a subprocess where none can be mounted: `python THIS PLACE DISK SCRATCH
FSIZE` prints the error's type and message as JSON, as tests/support/disk_full_places.py does)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import disk_full_places
import pytest
from disk_full_places import FILE_LIMIT_BYTES, PAYLOAD_BYTES, fill, small_disk, take_the_room

from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.local import LocalDirBlobStore, read_sidecar, sidecar_of
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import MARKER_FILE, write_marker
from samsa.stores.exceptions import StoreDiskFullError

# Before, on a 1 MiB tmpfs:
#   marker: StoreDiskFullError of no store: "disk full: .../Partition_0/counts-1700000000000-1/CHECKPOINT-V2:
#     write failed for want of room ([Errno 28] No space left on device); ..."
#   remove_ttl: BlobStoreError "remove_ttl of blob job-1/Partition_0/counts/000012.sst.<id> (000012.sst of
#     store counts of Partition 0) failed writing .../000012.sst.<id>.meta.json: [Errno 28] No space left
#     on device"
#   init (a disk out of inodes): BlobStoreError "cannot create the blob store dir .../blobs: [Errno 28] No
#     space left on device"
CHECKPOINT_DIR = "Partition_0/counts-1700000000000-1"
META = BlobMetadata("000012.sst", 3, "job", "1", "Partition 0", "counts")


def marker(disk: Path, scratch: Path) -> Callable[[], object]:
    """The commit's marker file in the checkpoint dir of store `counts` on the small disk."""
    (disk / CHECKPOINT_DIR).mkdir(parents=True)
    # Past the file limit too, so that it fails where RLIMIT_FSIZE stands in for a full disk.
    markers = {"blobstore": "x" * PAYLOAD_BYTES}
    return lambda: write_marker(disk / CHECKPOINT_DIR, "1700000000000-1", markers, store="counts")


def remove_ttl(disk: Path, scratch: Path) -> Callable[[], object]:
    """remove_ttl of a blob put into a local blob store whose dir, `blobs`, is on the small disk, once the
    disk is full."""
    source = scratch / "000012.sst"
    source.write_bytes(b"abc")
    pool = ThreadPoolExecutor(1)
    store = LocalDirBlobStore(disk / "blobs", pool, ttl_s=3600)
    store.init()
    blob_id = BlobTransfer(store).put_file(source, "000012.sst", META).blobs[0].blob_id
    sidecar = sidecar_of(disk / "blobs" / blob_id)
    # A sidecar past the file limit (remove_ttl keeps its fields), so that its rewrite fails where
    # RLIMIT_FSIZE stands in for a full disk; on the tmpfs a filler takes the rest of the room.
    sidecar.write_text(json.dumps({**(read_sidecar(sidecar) or {}), "padding": "x" * 2 * FILE_LIMIT_BYTES}))
    take_the_room(disk / "filler", PAYLOAD_BYTES)

    def act() -> object:
        try:
            return store.remove_ttl(blob_id, META).result()
        finally:
            store.close()
            pool.shutdown()

    return act


#: Each place, and the path (under the small disk) its error must name.
PLACES: dict[str, tuple[Callable[[Path, Path], Callable[[], object]], str]] = {
    "marker": (marker, f"{CHECKPOINT_DIR}/{MARKER_FILE}"),
    "remove_ttl": (remove_ttl, "blobs"),
}
# The helper runs a place by its name: these join its own (also in the subprocess, see the end).
disk_full_places.PLACES.update(PLACES)


def test_a_full_disk_under_a_checkpoint_marker_names_its_store(tmp_path: Path) -> None:
    kind, message, path, left = fill("marker", tmp_path, __file__)
    assert kind == "StoreDiskFullError", f"{kind}: {message}"
    assert message.startswith(f"disk full: store 'counts' at {path}: write failed for want of room"), message
    assert " bytes free on that disk. Free space there, or move job.logged.store.base.dir" in message, message
    assert list(left) == []  # neither the marker nor its temp file


def test_a_full_disk_under_a_blob_ttl_sidecar_is_store_disk_full(tmp_path: Path) -> None:
    kind, message, path, left = fill("remove_ttl", tmp_path, __file__)
    assert kind == "StoreDiskFullError", f"{kind}: {message}"
    assert message.startswith(f"disk full: store 'counts' at {path}: remove_ttl of blob job-1/"), message
    wanting = "(000012.sst of store counts of Partition 0) writing its TTL sidecar failed for want of room"
    assert wanting in message, message
    assert " bytes free on that disk. Free space there, or point blobstore.local.dir" in message, message
    # The blob and its sidecar as the put left them (the blob keeps its TTL), and no temp file.
    assert len(left) == 2, list(left)
    blob, sidecar = left
    assert sidecar == f"{blob}.meta.json"
    assert json.loads(left[sidecar])["expires-at"] is not None


def test_a_disk_out_of_inodes_under_the_blob_store_dir_is_store_disk_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with small_disk(tmp_path) as disk:
        if disk is not None:  # a tmpfs of one inode, its root's: no new dir fits
            subprocess.run(["mount", "-o", "remount,nr_inodes=1", str(disk)], check=True, timeout=30)
        else:  # no tmpfs, and RLIMIT_FSIZE limits no dir: the kernel's answer, as it would come
            disk = tmp_path / "disk"

            def no_inode(self: Path, *_: object, **__: object) -> None:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

            monkeypatch.setattr(Path, "mkdir", no_inode)
        with ThreadPoolExecutor(1) as pool, pytest.raises(StoreDiskFullError) as raised:
            LocalDirBlobStore(disk / "blobs", pool, ttl_s=3600).init()
        monkeypatch.undo()
    text = str(raised.value)
    assert text.startswith(f"disk full: {disk / 'blobs'}: create the blob store dir failed for want of room")
    assert "No space left on device" in text and "point blobstore.local.dir" in text, text


if __name__ == "__main__":
    name, disk_dir, scratch_dir, limit = sys.argv[1:5]
    print(json.dumps(disk_full_places._run(name, Path(disk_dir), Path(scratch_dir), int(limit))))
