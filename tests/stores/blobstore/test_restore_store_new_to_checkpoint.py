"""A blob-backed store its task's checkpoint has no snapshot of (a store new to the job, or one removed and
defined again) starts empty: its local dirs, an older run's, are deleted as for a task without a checkpoint,
never taken for its state; unless its changelog tail restore takes them over, or the checkpoint is a
reset's keeping the state (the checkpoint topic lost)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from samsa.stores.backend import TaskStoresContext
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.restore import BlobStoreRestoreManager
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import checkpoint_dir

CHECKPOINT, OLDER = "1795542452386-214973", "1795542000000-000001"


@pytest.fixture
def blobs(tmp_path: Path) -> Iterator[LocalDirBlobStore]:
    with ThreadPoolExecutor(2, "test-blobs") as pool:
        store = LocalDirBlobStore(tmp_path / "blobs", pool, 3600.0)
        store.init()
        yield store


def _stale_store(tmp_path: Path) -> tuple[Path, Path]:
    """The live dir and a local checkpoint dir of store `counts`, as a run long ago left them."""
    live = tmp_path / "state" / "counts"
    live.mkdir(parents=True)
    (live / "000007.sst").write_bytes(b"old state")
    old = checkpoint_dir(live, OLDER)
    old.mkdir()
    (old / "000007.sst").write_bytes(b"old state")
    return live, old


def _manager(
    tmp_path: Path, blobs: LocalDirBlobStore, tail: bool = False, local_state_kept: bool = False
) -> BlobStoreRestoreManager:
    context = TaskStoresContext(
        "job-1",
        "Partition 0",
        0,
        {"counts": tmp_path / "state" / "counts"},
        {"counts": {}},
        tail_restored=frozenset({"counts"}) if tail else frozenset(),
        local_state_kept=local_state_kept,
    )
    return BlobStoreRestoreManager(context, BlobTransfer(blobs, 1024), "job", "1")


def test_a_checkpoint_without_a_snapshot_of_the_store_deletes_its_local_dirs(
    tmp_path: Path, blobs: LocalDirBlobStore, caplog: pytest.LogCaptureFixture
) -> None:
    live, old = _stale_store(tmp_path)
    manager = _manager(tmp_path, blobs)
    manager.init({"other": "job-1/Partition_0/other/snapshot-index.x"}, CHECKPOINT)
    assert not live.exists() and not old.exists()
    assert manager.snapshots == {}
    assert any(CHECKPOINT in r.getMessage() and "deleted" in r.getMessage() for r in caplog.records)


def test_without_a_checkpoint_too(tmp_path: Path, blobs: LocalDirBlobStore) -> None:
    live, _ = _stale_store(tmp_path)
    _manager(tmp_path, blobs).init(None, None)
    assert not live.exists()


def test_a_store_whose_changelog_tail_restore_follows_is_left_to_it(
    tmp_path: Path, blobs: LocalDirBlobStore
) -> None:
    live, old = _stale_store(tmp_path)
    _manager(tmp_path, blobs, tail=True).init({}, CHECKPOINT)
    assert (live / "000007.sst").is_file() and old.is_dir()


def test_a_reset_checkpoint_keeping_the_state_keeps_the_local_dirs(
    tmp_path: Path, blobs: LocalDirBlobStore, caplog: pytest.LogCaptureFixture
) -> None:
    # `samsa checkpoint reset` after the checkpoint topic was lost: no snapshot named, the state kept.
    live, old = _stale_store(tmp_path)
    manager = _manager(tmp_path, blobs, local_state_kept=True)
    manager.init({}, CHECKPOINT)
    assert (live / "000007.sst").read_bytes() == b"old state" and old.is_dir()
    assert manager.snapshots == {}
    assert any("checkpoint reset" in r.getMessage() and "kept" in r.getMessage() for r in caplog.records)
