"""A blob-store snapshot that cannot be restored (an index that is not JSON, a blob missing): without a
changelog to fall back on, an error no supervisor restarts, with the ways on and `samsa blobstore verify`;
with one, the error the storage manager falls back on, as before."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.stores.backend import TaskStoresContext
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.exceptions import (
    SNAPSHOT_UNUSABLE,
    BlobDeletedError,
    IndexFormatError,
    SnapshotUnusableError,
)
from samsa.stores.blobstore.index import (
    DirIndex,
    FileBlob,
    FileIndex,
    FileMetadata,
    SnapshotIndex,
    SnapshotMetadata,
)
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.restore import BlobStoreRestoreManager
from samsa.stores.blobstore.transfer import BlobTransfer

CHECKPOINT = "1795542452386-214973"


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4, "test-blobs") as executor:
        yield executor


def _blobs(tmp_path: Path, pool: ThreadPoolExecutor) -> LocalDirBlobStore:
    store = LocalDirBlobStore(tmp_path / "blobs", pool, 3600.0)
    store.init()
    return store


def _manager(tmp_path: Path, blobs: LocalDirBlobStore, tail: bool) -> BlobStoreRestoreManager:
    """The restore manager of store `counts` (`tail`: its changelog tail is replayed after it, the
    changelog being its fallback)."""
    context = TaskStoresContext(
        "job-1",
        "Partition 0",
        0,
        {"counts": tmp_path / "state" / "counts"},
        {"counts": {}},
        tail_restored=frozenset({"counts"}) if tail else frozenset(),
    )
    location = str(tmp_path / "blobs")
    return BlobStoreRestoreManager(context, BlobTransfer(blobs, 1024), "job", "1", location=location)


def _put(blobs: LocalDirBlobStore, name: str, data: bytes) -> str:
    meta = BlobMetadata(name, len(data), "job", "1", "Partition 0", "counts")
    return blobs.put(lambda: io.BytesIO(data), meta).result()


def _index_naming_a_missing_blob(blobs: LocalDirBlobStore) -> str:
    meta = BlobMetadata("000009.sst", 10, "job", "1", "Partition 0", "counts")
    gone = blobs.put(lambda: io.BytesIO(b"x" * 10), meta).result()
    blobs.delete(gone, meta).result()
    sst = FileIndex("000009.sst", (FileBlob(gone, 0),), FileMetadata(1, 1, 10, 0o644), 0)
    index = SnapshotIndex(
        1,
        SnapshotMetadata(CHECKPOINT, "job", "1", "Partition 0", "counts"),
        DirIndex("", files_present=(sst,)),
    )
    return _put(blobs, "snapshot-index", index.to_bytes())


def _assert_unmendable_with_the_ways_on(error: SnapshotUnusableError, blob_id: str, tmp_path: Path) -> None:
    text = str(error)
    assert "store 'counts' of task 'Partition 0'" in text and blob_id in text
    assert "samsa blobstore verify" in text, "no word of the tool that finds every damaged blob"
    assert str(tmp_path / "blobs") in text and "blobstore.local.dir" in text and "new job.id" in text
    assert unmendable_exit(error) == CONFIG_ERROR_EXIT, "a supervisor would restart it in a loop"


def test_an_index_that_is_not_json_without_a_fallback_is_not_restarted(tmp_path, pool) -> None:
    blobs = _blobs(tmp_path, pool)
    index = _put(blobs, "snapshot-index", b"not json{\n")
    with pytest.raises(SnapshotUnusableError) as info:
        _manager(tmp_path, blobs, tail=False).init({"counts": index}, CHECKPOINT)
    assert "is not JSON" in str(info.value) and isinstance(info.value.__cause__, IndexFormatError)
    _assert_unmendable_with_the_ways_on(info.value, index, tmp_path)


def test_a_missing_blob_without_a_fallback_is_not_restarted(tmp_path, pool) -> None:
    blobs = _blobs(tmp_path, pool)
    index = _index_naming_a_missing_blob(blobs)
    manager = _manager(tmp_path, blobs, tail=False)
    manager.init({"counts": index}, CHECKPOINT)
    with pytest.raises(SnapshotUnusableError) as info:
        manager.restore(threading.Event())
    assert "does not exist in the blob store" in str(info.value)
    _assert_unmendable_with_the_ways_on(info.value, index, tmp_path)


def test_with_a_changelog_tail_the_errors_stay_the_fallback_ones(tmp_path, pool) -> None:
    blobs = _blobs(tmp_path, pool)
    not_json = _put(blobs, "snapshot-index", b"not json{\n")
    with pytest.raises(SNAPSHOT_UNUSABLE) as info:
        _manager(tmp_path, blobs, tail=True).init({"counts": not_json}, CHECKPOINT)
    assert type(info.value) is IndexFormatError and unmendable_exit(info.value) is None
    manager = _manager(tmp_path, blobs, tail=True)
    manager.init({"counts": _index_naming_a_missing_blob(blobs)}, CHECKPOINT)
    with pytest.raises(SNAPSHOT_UNUSABLE) as missing:
        manager.restore(threading.Event())
    assert type(missing.value) is BlobDeletedError and unmendable_exit(missing.value) is None
