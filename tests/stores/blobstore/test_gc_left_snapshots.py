"""Which committed snapshots `samsa blobstore gc` deletes as named by no checkpoint, on a real local blob
store: never one a checkpoint names (read before or after the listing), never a blob such a snapshot uses,
never an index still carrying its TTL (a commit in flight)."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from blob_clock import Clock

from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.index import (
    ROOT_DIR_NAME,
    DirIndex,
    FileBlob,
    FileIndex,
    FileMetadata,
    SnapshotIndex,
    SnapshotMetadata,
)
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.tool import (
    Checkpointed,
    LeftReport,
    SnapshotRef,
    delete_left_snapshots,
    find_left_snapshots,
    is_index_id,
    job_blobs,
)
from samsa.stores.blobstore.transfer import BlobTransfer

JOB, JOB_ID, TASK, STORE = "gc-job", "1", "Partition 0", "counts"
BASE = BlobMetadata.of_store(JOB, JOB_ID, TASK, STORE)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalDirBlobStore]:
    with ThreadPoolExecutor(4, "test-gc") as pool:
        blobs = LocalDirBlobStore(tmp_path / "blobs", pool, 3600.0, clock=Clock())
        blobs.init()
        yield blobs
        blobs.close()


def _blob(store: LocalDirBlobStore, name: str, permanent: bool = True) -> str:
    meta = BlobMetadata(name, 4, JOB, JOB_ID, TASK, STORE)
    blob_id = store.put(lambda: io.BytesIO(name.encode()[:4].ljust(4)), meta).result()
    if permanent:
        store.remove_ttl(blob_id, meta).result()
    return blob_id


def _snapshot(store: LocalDirBlobStore, blobs: Sequence[str], permanent: bool = True) -> str:
    files = tuple(
        FileIndex(f"{k:06d}.sst", (FileBlob(b, 0),), FileMetadata(0, 0, 4, 0o644), 0)
        for k, b in enumerate(blobs)
    )
    index = SnapshotIndex(
        1, SnapshotMetadata("1-0", JOB, JOB_ID, TASK, STORE), DirIndex(ROOT_DIR_NAME, files)
    )
    blob_id = BlobTransfer(store).put_index(index)
    if permanent:
        store.remove_ttl(blob_id, BASE).result()
    return blob_id


def _ref(index_id: str) -> SnapshotRef:
    return SnapshotRef(TASK, STORE, "1-0", index_id)


def _reads(*answers: Sequence[str]) -> tuple[list[int], Checkpointed]:
    """A `checkpointed` giving the snapshots `answers` name, one answer per read (the last one repeats)."""
    calls = [0]

    def read() -> list[SnapshotRef]:
        calls[0] += 1
        return [_ref(i) for i in answers[min(calls[0], len(answers)) - 1]]

    return calls, read


def _find(store: LocalDirBlobStore, checkpointed: Checkpointed, dry_run: bool = True) -> LeftReport:
    listed, expiring = job_blobs(store, JOB, JOB_ID)
    return find_left_snapshots(store, listed, expiring, checkpointed, JOB, JOB_ID, dry_run)


def _ids(store: LocalDirBlobStore) -> set[str]:
    return {b.blob_id for b in store.list_blobs()}


def test_a_snapshot_checkpointed_after_the_first_read_is_kept_and_shared_blobs_stay(store):
    """The checkpoint named `old` when first read; a commit then checkpointed `new` (sharing a blob with
    `old`) and made it permanent before the listing: both stay (the job's own cleanup deletes `old`). Once
    the checkpoints name `new` only, what only `old` uses goes, and the blob it shares with `new` stays."""
    shared, only_old, only_new = _blob(store, "a"), _blob(store, "b"), _blob(store, "c")
    old = _snapshot(store, [shared, only_old])
    new = _snapshot(store, [shared, only_new])
    calls, checkpointed = _reads([old], [new])
    report = _find(store, checkpointed, dry_run=False)
    assert calls[0] >= 2, "the checkpoints are read again after the listing"
    assert report.snapshots == () and not report.refused

    _, checkpointed = _reads([new])
    report = _find(store, checkpointed)
    (left,) = report.snapshots
    assert left.index_blob_id == old
    assert [b for b, _ in left.blobs] == [only_old, old] and left.shared == 1
    assert "would delete 1 snapshot(s), 2 blob(s), " in report.lines()[0]
    assert _ids(store) == {shared, only_old, only_new, old, new}, "a dry run deletes nothing"

    delete_left_snapshots(store, report.snapshots, JOB, JOB_ID)
    assert _ids(store) == {shared, only_new, new}


def test_an_index_still_carrying_its_ttl_is_left_to_the_ttl_gc(store):
    """A commit in flight: its blobs and index are put, its checkpoint not written yet."""
    kept = _snapshot(store, [_blob(store, "a")])
    fresh_blob = _blob(store, "f", permanent=False)
    fresh = _snapshot(store, [fresh_blob], permanent=False)
    _, checkpointed = _reads([kept])
    report = _find(store, checkpointed)
    assert report.snapshots == () and not report.refused
    assert {fresh, fresh_blob} <= _ids(store)


def test_nothing_is_deleted_when_an_index_the_checkpoints_name_cannot_be_read(store, tmp_path):
    named = _snapshot(store, [_blob(store, "a")])
    left = _snapshot(store, [_blob(store, "b")])
    (tmp_path / "blobs" / named).write_bytes(b"{not json")
    _, checkpointed = _reads([named])
    report = _find(store, checkpointed)
    assert report.snapshots == ()
    assert f"the snapshot index {named} that the last checkpoint of task {TASK} names" in report.refused
    assert "none deleted" in report.lines()[0]
    assert left in _ids(store)


def test_nothing_is_deleted_when_the_checkpoints_name_a_gone_index(store):
    named = _snapshot(store, [_blob(store, "a")])
    _snapshot(store, [_blob(store, "b")])
    store.delete(named, BASE).result()
    _, checkpointed = _reads([named])
    report = _find(store, checkpointed)
    assert report.snapshots == () and "which is not in the blob store" in report.refused


def test_a_gone_index_whose_checkpoint_moved_on_is_followed_to_the_newer_snapshot(store):
    """A running job's commit deleted the index first read; the blobs of the newer one stay."""
    shared = _blob(store, "a")
    first = _snapshot(store, [shared])
    newer = _snapshot(store, [shared, _blob(store, "n")])
    store.delete(first, BASE).result()
    _, checkpointed = _reads([first], [first], [newer])
    report = _find(store, checkpointed)
    assert report.snapshots == () and not report.refused
    assert {newer, shared} <= _ids(store)


def test_a_blob_named_like_an_index_that_is_not_one_is_left_alone(store, tmp_path):
    named = _snapshot(store, [_blob(store, "a")])
    odd = _blob(store, "snapshot-index")
    assert is_index_id(odd)
    _, checkpointed = _reads([named])
    report = _find(store, checkpointed)
    assert report.snapshots == () and report.skipped == (odd,)
    assert odd in _ids(store)


def test_s3_lists_one_jobs_blobs_and_tells_the_committed_ones(moto_endpoint, s3_bucket):
    from samsa.stores.blobstore.s3 import S3BlobStore

    with ThreadPoolExecutor(2) as pool:
        s3 = S3BlobStore(s3_bucket, "p", pool, 30, endpoint_url=moto_endpoint, region="us-east-1")
        s3.init()
        ids = {}
        for job_id in ("1", "10"):
            meta = BlobMetadata("000001.sst", 1, "a", job_id, TASK, STORE)
            ids[job_id] = s3.put(lambda: io.BytesIO(b"x"), meta).result()
        listed, expiring = job_blobs(s3, "a", "1")
        (info,) = listed
        assert info.blob_id == ids["1"], "job a (id 1) lists job a (id 10)'s blobs: its keys start alike"
        assert expiring(info)
        s3.remove_ttl(ids["1"], BASE).result()
        assert not expiring(info)
        s3.close()
