"""A blob-store restore reusing its local checkpoint dir, whose marker meets a full disk, fails with a
`StoreDiskFullError` naming the store (a real tiny tmpfs, or a refused fsync where none can be mounted)."""

from __future__ import annotations

import errno
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from disk_full_places import small_disk, take_the_room

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.stores.backend import TaskStoresContext
from samsa.stores.blobstore.backup import BlobStoreBackupManager
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.restore import BlobStoreRestoreManager
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import MARKER_FILE, checkpoint_dir
from samsa.stores.exceptions import StoreDiskFullError


def _no_space(fd: int) -> None:
    """The answer of a full disk to an fsync (ENOSPC)."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_reused_checkpoint_dirs_marker_refused_for_want_of_room_names_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with small_disk(tmp_path) as disk, ThreadPoolExecutor(2) as io, ThreadPoolExecutor(1) as pool:
        state = disk or tmp_path / "disk"
        context = TaskStoresContext("job-1", "Partition 0", 0, {"counts": state / "counts"}, {"counts": {}})
        transfer = BlobTransfer(LocalDirBlobStore(tmp_path / "blobs", io, 3600.0))
        checkpoint_id = str(CheckpointId.create())
        local = checkpoint_dir(state / "counts", checkpoint_id)
        local.mkdir()
        (local / "000012.sst").write_bytes(b"x" * 100)
        backup = BlobStoreBackupManager(context, ["counts"], transfer, pool, "job", "1")
        backup.init(None)
        markers = backup.upload(checkpoint_id, {}).result()
        backup.cleanup(checkpoint_id, markers).result()
        context.checkpoint_markers = {"blobstore": markers}
        restore = BlobStoreRestoreManager(context, transfer, "job", "1")
        restore.init(markers, checkpoint_id)
        if disk is not None:
            take_the_room(disk / "filler")
        else:  # no tmpfs: the refusal a full disk gives the marker's fsync
            monkeypatch.setattr(os, "fsync", _no_space)
        with pytest.raises(StoreDiskFullError) as raised:
            restore.restore(threading.Event())
        monkeypatch.undo()
    assert restore.reused == {} and raised.value.store == "counts"
    assert raised.value.path == local / MARKER_FILE
    assert str(raised.value).startswith(f"disk full: store 'counts' at {local / MARKER_FILE}: write failed")
