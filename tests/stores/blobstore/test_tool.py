"""The logic of `samsa state` and `samsa blobstore`, on a real local blob store holding real snapshots."""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from blob_clock import Clock

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.model import AnyCheckpoint, Checkpoint, CheckpointV2
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.checksum import file_crc
from samsa.stores.blobstore.diff import dir_diff
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.index import ROOT_DIR_NAME, DirIndex, SnapshotIndex, SnapshotMetadata
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.tool import (
    MAX_SNAPSHOT_RETRIES,
    SnapshotRef,
    blob_snapshots,
    download_snapshot,
    find_snapshot,
    gc_local,
    index_json,
    list_state,
    read_index,
    read_index_bytes,
    read_named_index,
    referenced_blobs,
    removed_files,
    render_index,
    render_state,
    verify_snapshots,
)
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.changelog.marker import ChangelogMarker, RebuildMark
from samsa.streams import SystemStream, SystemStreamPartition

JOB, JOB_ID = "counts-job", "1"
CHUNK = 1024
TTL_S = 3600.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[LocalDirBlobStore]:
    pool = ThreadPoolExecutor(4, "test-blobs")
    blobs = LocalDirBlobStore(tmp_path / "blobs", pool, TTL_S, clock=clock)
    blobs.init()
    yield blobs
    blobs.close()
    pool.shutdown(wait=True)


@pytest.fixture
def transfer(store: LocalDirBlobStore) -> BlobTransfer:
    return BlobTransfer(store, CHUNK)


def _store_dir(path: Path, seed: int) -> Path:
    """A small store-like dir: a multi-chunk 'SST', small metadata files, an empty file and a sub-dir."""
    rng = random.Random(seed)
    (path / "archive").mkdir(parents=True)
    (path / "000007.sst").write_bytes(rng.randbytes(3 * CHUNK + 100))
    (path / "CURRENT").write_bytes(b"MANIFEST-000005\n")
    (path / "OPTIONS-000003").write_bytes(rng.randbytes(300))
    (path / "LOCK").write_bytes(b"")
    (path / "archive" / "old.log").write_bytes(rng.randbytes(50))
    os.chmod(path / "CURRENT", 0o640)
    return path


def _snapshot(
    transfer: BlobTransfer,
    local: Path,
    task: str,
    store: str,
    checkpoint_id: str,
    previous: tuple[str, SnapshotIndex] | None = None,
) -> tuple[str, SnapshotIndex]:
    """Uploads `local` as the next snapshot of (task, store), as a commit would; returns its index."""
    base = BlobMetadata("", -1, JOB, JOB_ID, task, store)
    diff = dir_diff(local, previous[1].dir_index if previous else DirIndex(ROOT_DIR_NAME))
    dir_index = transfer.put_dir(diff, local, base)
    meta = SnapshotMetadata(checkpoint_id, JOB, JOB_ID, task, store)
    index = SnapshotIndex(1_700_000_123_456, meta, dir_index, previous[0] if previous else None)
    return transfer.put_index(index), index


def _checkpoint(**stores: str) -> CheckpointV2:
    return CheckpointV2(CheckpointId.create(), {}, {"blobstore": dict(stores)})


def _blob_of(index: SnapshotIndex, name: str) -> list[str]:
    (f,) = [f for f in index.dir_index.files_present if f.name == name]
    return [b.blob_id for b in f.blobs]


@pytest.fixture
def two_tasks(tmp_path: Path, transfer: BlobTransfer) -> tuple[dict[str, AnyCheckpoint], dict[str, str]]:
    """Task 0 with a blob snapshot of `counts` and a changelog marker for `log`; task 1 with a snapshot."""
    ids = {}
    for n in (0, 1):
        blob_id, _ = _snapshot(
            transfer, _store_dir(tmp_path / f"src{n}", n), f"Partition {n}", "counts", "1-1"
        )
        ids[f"Partition {n}"] = blob_id
    marker = ChangelogMarker(SystemStreamPartition("kafka", "log-changelog", 0), 41).encode()
    zero = CheckpointV2(
        CheckpointId.create(), {}, {"blobstore": {"counts": ids["Partition 0"]}, "changelog": {"log": marker}}
    )
    return {"Partition 0": zero, "Partition 1": _checkpoint(counts=ids["Partition 1"])}, ids


TASKS = ["Partition 0", "Partition 1", "Partition 2"]


# -- verify ---------------------------------------------------------------------------------------------


def test_verify_reads_every_blob_of_healthy_snapshots(store, two_tasks, tmp_path):
    checkpoints, _ = two_tasks
    report = verify_snapshots(store, blob_snapshots(TASKS, checkpoints), JOB, JOB_ID, parallelism=3)
    assert report.ok, [p.line() for p in report.problems]
    assert report.snapshots == 2
    assert report.files == 2 * 5
    assert report.blobs == 2 * (4 + 1 + 1 + 0 + 1)  # the SST in 4 chunks; the empty LOCK has no blob
    src = sum(p.stat().st_size for p in (tmp_path / "src0").rglob("*") if p.is_file())
    assert report.bytes == 2 * src
    assert "2 snapshot(s)" in report.summary() and "all match" in report.summary()


def test_verify_names_a_corrupt_and_a_deleted_blob(store, transfer, tmp_path):
    blob_id, index = _snapshot(transfer, _store_dir(tmp_path / "src", 7), "Partition 3", "counts", "1-1")
    (options,) = _blob_of(index, "OPTIONS-000003")
    chunks = _blob_of(index, "000007.sst")
    (old_log,) = [b.blob_id for b in index.dir_index.subdirs_present[0].files_present[0].blobs]
    damaged = store.root / options
    damaged.write_bytes(bytes(b ^ 0xFF for b in damaged.read_bytes()))  # same size, other bytes
    (store.root / chunks[2]).write_bytes(b"short")  # a truncated chunk
    (store.root / old_log).unlink()
    refs = [SnapshotRef("Partition 3", "counts", "1-1", blob_id)]

    report = verify_snapshots(store, refs, JOB, JOB_ID)

    assert not report.ok
    lines = sorted(p.line() for p in report.problems)
    assert len(lines) == 3, lines
    by_file = {p.file: p for p in report.problems}
    assert by_file["OPTIONS-000003"].blob_id == options and "CRC32C" in by_file["OPTIONS-000003"].detail
    assert by_file["000007.sst"].blob_id == chunks[2] and "holds 5 bytes" in by_file["000007.sst"].detail
    assert by_file["archive/old.log"].blob_id == old_log and by_file["archive/old.log"].detail == "MISSING"
    line = by_file["archive/old.log"].line()
    assert "Partition 3" in line and "counts" in line and "archive/old.log" in line and old_log in line


def test_verify_names_a_missing_or_corrupt_index(store, transfer, tmp_path):
    gone, _ = _snapshot(transfer, _store_dir(tmp_path / "a", 1), "Partition 0", "counts", "1-1")
    bad, _ = _snapshot(transfer, _store_dir(tmp_path / "b", 2), "Partition 1", "counts", "1-1")
    (store.root / gone).unlink()
    (store.root / bad).write_bytes(b"{not json")
    refs = [
        SnapshotRef("Partition 0", "counts", "1-1", gone),
        SnapshotRef("Partition 1", "counts", "1-1", bad),
    ]
    report = verify_snapshots(store, refs, JOB, JOB_ID)
    assert [(p.task, p.blob_id) for p in report.problems] == [("Partition 0", gone), ("Partition 1", bad)]
    assert report.problems[0].detail.startswith("MISSING") and "CORRUPT" in report.problems[1].detail
    assert report.snapshots == 0


def test_a_retried_get_counts_its_bytes_once(store, transfer, tmp_path):
    """The sink opener starts a fresh count per attempt, as a store's retry needs."""
    blob_id, _ = _snapshot(transfer, _store_dir(tmp_path / "src", 3), "Partition 0", "counts", "1-1")

    class RetryingStore:
        def __init__(self, inner):
            self.inner = inner

        def get(self, blob_id, sink, metadata):
            with sink() as partial:
                partial.write(b"garbage from a dropped connection")
            return self.inner.get(blob_id, sink, metadata)

    refs = [SnapshotRef("Partition 0", "counts", "1-1", blob_id)]
    report = verify_snapshots(RetryingStore(store), refs, JOB, JOB_ID)
    assert report.ok, [p.line() for p in report.problems]


# -- ls / show ------------------------------------------------------------------------------------------


def test_list_state_shows_snapshots_changelog_markers_and_tasks_without_a_checkpoint(store, two_tasks):
    checkpoints, ids = two_tasks
    rows = list_state(TASKS, checkpoints, store, JOB, JOB_ID)
    assert [(r.task, r.store, r.backend) for r in rows] == [
        ("Partition 0", "counts", "blobstore"),
        ("Partition 0", "log", "changelog"),
        ("Partition 1", "counts", "blobstore"),
        ("Partition 2", None, None),
    ]
    counts = rows[0]
    assert (
        counts.marker == ids["Partition 0"] and counts.files == 5 and counts.created_ms == 1_700_000_123_456
    )
    assert counts.bytes == (3 * CHUNK + 100) + 16 + 300 + 0 + 50
    assert rows[1].marker == "changelog kafka.log-changelog#0 offset 41"
    assert rows[3].note == "no checkpoint yet"
    text = "\n".join(render_state(rows))
    assert ids["Partition 1"] in text and "2023-11-14T22:15:23.456Z" in text
    assert "no checkpoint yet" in text


def test_list_state_reports_a_missing_index_and_names_v1_stores(store, two_tasks):
    checkpoints, ids = two_tasks
    (store.root / ids["Partition 1"]).unlink()
    v1 = Checkpoint({}, {SystemStreamPartition("kafka", "log-changelog", 2): ("5-5", None)})
    checkpoints = {**checkpoints, "Partition 2": v1}
    rows = list_state(TASKS, checkpoints, store, JOB, JOB_ID, {"log": SystemStream("kafka", "log-changelog")})
    assert rows[2].files is None and rows[2].note.startswith("MISSING")
    assert (rows[3].store, rows[3].checkpoint_id, rows[3].marker) == (
        "log",
        "5-5",
        "changelog kafka.log-changelog#2 empty",
    )


@pytest.mark.parametrize(
    ("marks", "shown"),
    [
        (
            {"rebuilding": RebuildMark("host-a", "/state/log")},
            "REBUILDING: only the local copy /state/log on host host-a holds its state",
        ),
        ({"given_up": True}, "GIVEN UP: the next start empties the store"),
    ],
)
def test_list_state_shows_a_cut_short_rebuild_and_a_given_up_state(marks, shown):
    """Where a store can restore from matters more than its offset: `samsa state ls` says so."""
    marker = ChangelogMarker(SystemStreamPartition("kafka", "log-changelog", 0), 41, **marks).encode()
    checkpoint = CheckpointV2(CheckpointId.create(), {}, {"changelog": {"log": marker}})
    (row,) = list_state(["Partition 0"], {"Partition 0": checkpoint}, None, JOB, JOB_ID)
    assert row.marker == f"changelog kafka.log-changelog#0 offset 41, {shown}"
    assert shown in "\n".join(render_state([row]))


def test_render_index_prints_files_and_what_a_later_snapshot_removed(store, transfer, tmp_path):
    src = _store_dir(tmp_path / "src", 4)
    first = _snapshot(transfer, src, "Partition 0", "counts", "1-1")
    (src / "OPTIONS-000003").unlink()
    (src / "000009.sst").write_bytes(b"new sst")
    blob_id, _ = _snapshot(transfer, src, "Partition 0", "counts", "2-2", previous=first)

    text = "\n".join(
        render_index(blob_id, read_index(store, blob_id, BlobMetadata("", -1, JOB, JOB_ID, "", "")))
    )

    assert f"previous index: {first[0]}" in text and "checkpoint 2-2" in text
    crc = file_crc(src / "CURRENT")
    assert f"  CURRENT     size 16  blobs 1  crc32c {crc:08x}  mode 0640\n" in text, text
    assert "000009.sst" in text and "archive/" in text and "    old.log" in text
    present, removed = text.split("\nremoved: ")
    assert "OPTIONS-000003" not in present
    assert removed.startswith("1 file(s), 300 bytes") and "OPTIONS-000003  size 300  blobs 1" in removed


def test_index_json_is_the_whole_document(store, transfer, tmp_path):
    blob_id, index = _snapshot(transfer, _store_dir(tmp_path / "src", 5), "Partition 0", "counts", "1-1")
    data = read_index_bytes(store, blob_id, BlobMetadata("", -1, JOB, JOB_ID, "Partition 0", "counts"))
    document = json.loads(index_json(data, blob_id))
    assert document == json.loads(index.to_bytes())
    assert document["snapshot-metadata"]["store-name"] == "counts"


# -- download -------------------------------------------------------------------------------------------


def test_download_restores_the_snapshot_byte_for_byte(transfer, two_tasks, tmp_path):
    checkpoints, _ = two_tasks
    ref = find_snapshot(TASKS, checkpoints, "Partition 1", "counts")
    target = tmp_path / "out" / "counts"
    result = download_snapshot(transfer, ref, target, JOB, JOB_ID)
    src = tmp_path / "src1"
    expected = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    assert sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file()) == expected
    for rel in expected:
        assert (target / rel).read_bytes() == (src / rel).read_bytes()
    assert (target / "CURRENT").stat().st_mode & 0o777 == 0o640
    assert (result.files, result.bytes) == (5, sum((src / rel).stat().st_size for rel in expected))


def test_download_refuses_a_non_empty_dir_and_takes_an_empty_one(transfer, two_tasks, tmp_path):
    checkpoints, _ = two_tasks
    ref = find_snapshot(TASKS, checkpoints, "Partition 0", "counts")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("mine")
    with pytest.raises(BlobStoreError, match="not an empty dir"):
        download_snapshot(transfer, ref, full, JOB, JOB_ID)
    assert [p.name for p in full.iterdir()] == ["keep"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert download_snapshot(transfer, ref, empty, JOB, JOB_ID).files == 5


def test_download_of_a_damaged_snapshot_fails_and_leaves_nothing(store, transfer, two_tasks, tmp_path):
    checkpoints, ids = two_tasks
    index = read_index(store, ids["Partition 0"], BlobMetadata("", -1, JOB, JOB_ID, "", ""))
    (blob,) = _blob_of(index, "CURRENT")
    (store.root / blob).write_bytes(b"MANIFEST-000099\n")
    target = tmp_path / "out"
    with pytest.raises(BlobStoreError, match="CRC32C"):
        download_snapshot(
            transfer, find_snapshot(TASKS, checkpoints, "Partition 0", "counts"), target, JOB, JOB_ID
        )
    assert not target.exists()


def test_find_snapshot_names_the_known_tasks_and_stores(two_tasks):
    checkpoints, _ = two_tasks
    with pytest.raises(
        BlobStoreError, match=r"no such task \(tasks: Partition 0, Partition 1, Partition 2\)"
    ):
        find_snapshot(TASKS, checkpoints, "Partition 9", "counts")
    with pytest.raises(BlobStoreError, match=r"stores with one: counts"):
        find_snapshot(TASKS, checkpoints, "Partition 0", "log")
    with pytest.raises(BlobStoreError, match="no checkpoint yet"):
        find_snapshot(TASKS, checkpoints, "Partition 2", "counts")


# -- gc -------------------------------------------------------------------------------------------------


def test_gc_deletes_only_expired_blobs_never_committed(store, transfer, clock, tmp_path):
    committed_id, committed = _snapshot(
        transfer, _store_dir(tmp_path / "a", 1), "Partition 0", "counts", "1-1"
    )
    transfer.remove_ttls(committed, committed_id, BlobMetadata("", -1, JOB, JOB_ID, "Partition 0", "counts"))
    failed_id, failed = _snapshot(transfer, _store_dir(tmp_path / "b", 2), "Partition 1", "counts", "1-1")
    failed_blobs = {failed_id, *failed.dir_index.present_blobs()}
    failed_bytes = sum((store.root / b).stat().st_size for b in failed_blobs)
    clock.now += TTL_S / 2
    young_id, _ = _snapshot(transfer, _store_dir(tmp_path / "c", 3), "Partition 2", "counts", "1-1")
    before = {b.blob_id for b in store.list_blobs()}
    clock.now += TTL_S * 0.75  # the failed commit's blobs expired, the young upload's did not

    dry = gc_local(store, set(), JOB, JOB_ID, dry_run=True, now=clock.now)
    assert (dry.result.blobs_deleted, dry.result.bytes_deleted) == (len(failed_blobs), failed_bytes)
    assert {b.blob_id for b in store.list_blobs()} == before, "a dry run deletes nothing"
    assert "would delete" in dry.lines("here")[0]

    report = gc_local(store, set(), JOB, JOB_ID, now=clock.now)
    assert (report.result.blobs_deleted, report.result.bytes_deleted) == (len(failed_blobs), failed_bytes)
    assert {b.blob_id for b in store.list_blobs()} == before - failed_blobs
    refs = [
        SnapshotRef("Partition 0", "counts", "1-1", committed_id),
        SnapshotRef("Partition 2", "counts", "1-1", young_id),
    ]
    assert verify_snapshots(store, refs, JOB, JOB_ID).ok


def test_gc_makes_expired_blobs_of_the_last_checkpoints_permanent(store, transfer, clock, tmp_path):
    """A crash between checkpoint and cleanup leaves a live snapshot with TTLs: gc keeps it."""
    blob_id, index = _snapshot(transfer, _store_dir(tmp_path / "a", 1), "Partition 0", "counts", "1-1")
    refs = [SnapshotRef("Partition 0", "counts", "1-1", blob_id)]
    used, unreadable = referenced_blobs(store, refs, JOB, JOB_ID)
    assert used == {blob_id, *index.dir_index.present_blobs()} and not unreadable
    clock.now += 2 * TTL_S

    dry = gc_local(store, used, JOB, JOB_ID, dry_run=True, now=clock.now)
    assert dry.result.blobs_deleted == 0 and len(dry.kept) == len(used)
    report = gc_local(store, used, JOB, JOB_ID, now=clock.now)
    assert report.result.blobs_deleted == 0 and set(report.kept) == used
    assert all(b.expires_at is None for b in store.list_blobs())
    assert verify_snapshots(store, refs, JOB, JOB_ID).ok


def test_show_says_a_mistyped_index_id_does_not_exist(store):
    base = BlobMetadata("", -1, JOB, JOB_ID, "", "")
    with pytest.raises(BlobStoreError, match="does not exist") as info:
        read_named_index(store, f"{JOB}-{JOB_ID}/Partition_0/counts/snapshot-indx", base)
    assert "corrupt" not in str(info.value) and "samsa state ls" in str(info.value)


# -- a running job: the next commit deletes the snapshot a tool is reading ---------------------------------


class LiveJob:
    """Task `Partition 0` of a running job, with a committed snapshot of `counts` and the next one uploaded;
    `commit()` does what the commit's async phase does after the upload: the checkpoint moves on to the
    new snapshot, then cleanup deletes the old index and the blobs of the files the new one removed."""

    def __init__(self, tmp_path: Path, transfer: BlobTransfer, store: LocalDirBlobStore) -> None:
        self.src = _store_dir(tmp_path / "live", 21)
        self.old_id, self.old = _snapshot(transfer, self.src, "Partition 0", "counts", "1-1")
        (self.src / "OPTIONS-000003").unlink()
        (self.src / "000009.sst").write_bytes(b"a newer sst")
        self.new_id, self.new = _snapshot(
            transfer, self.src, "Partition 0", "counts", "2-2", previous=(self.old_id, self.old)
        )
        self.checkpoint: dict[str, AnyCheckpoint] = {"Partition 0": _checkpoint(counts=self.old_id)}
        self.rereads = 0
        self._store = store

    def commit(self) -> None:
        self.checkpoint = {"Partition 0": _checkpoint(counts=self.new_id)}
        gone = [self.old_id] + [b.blob_id for _, f in removed_files(self.new.dir_index) for b in f.blobs]
        for blob_id in gone:
            (self._store.root / blob_id).unlink()

    def reread(self) -> Mapping[str, AnyCheckpoint]:
        self.rereads += 1
        return dict(self.checkpoint)

    def options_blob(self) -> str:
        (blob_id,) = _blob_of(self.old, "OPTIONS-000003")
        return blob_id


class CommitDuringRead:
    """The blob store as the tool sees it while the job runs: the first read of `blob_id` comes just after
    the job's next commit (checkpoint read by the tool before, blob read after)."""

    def __init__(self, inner: LocalDirBlobStore, blob_id: str, job: LiveJob) -> None:
        self.inner, self.blob_id, self.job, self.committed = inner, blob_id, job, False

    def get(self, blob_id, sink, metadata):
        if blob_id == self.blob_id and not self.committed:
            self.committed = True
            self.job.commit()
        return self.inner.get(blob_id, sink, metadata)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture
def live(tmp_path, transfer, store) -> LiveJob:
    return LiveJob(tmp_path, transfer, store)


@pytest.mark.parametrize("deleted", ["index", "blob"])
def test_verify_follows_a_running_jobs_checkpoint_past_a_deleted_snapshot(store, live, deleted):
    blob_id = live.old_id if deleted == "index" else live.options_blob()
    refs = blob_snapshots(TASKS, live.checkpoint)
    report = verify_snapshots(CommitDuringRead(store, blob_id, live), refs, JOB, JOB_ID, reread=live.reread)
    assert report.ok, [p.line() for p in report.problems]
    assert (report.snapshots, report.files) == (1, 5), "the new snapshot's five files, once each"
    assert live.rereads == 1


def test_verify_without_a_checkpoint_reader_reports_what_the_commit_deleted(store, live):
    refs = blob_snapshots(TASKS, live.checkpoint)
    report = verify_snapshots(CommitDuringRead(store, live.old_id, live), refs, JOB, JOB_ID)
    assert [p.detail for p in report.problems] == ["MISSING snapshot index"]


def test_verify_reports_a_missing_index_the_checkpoint_still_names(store, live):
    (store.root / live.old_id).unlink()
    report = verify_snapshots(store, blob_snapshots(TASKS, live.checkpoint), JOB, JOB_ID, reread=live.reread)
    assert [(p.blob_id, p.detail) for p in report.problems] == [(live.old_id, "MISSING snapshot index")]
    assert live.rereads == 1


def test_verify_chases_a_moving_checkpoint_a_bounded_number_of_times(store, live):
    (store.root / live.old_id).unlink()
    rereads = []

    def always_newer() -> Mapping[str, AnyCheckpoint]:
        gone = f"{JOB}-{JOB_ID}/Partition_0/counts/snapshot-index.{uuid.uuid4().hex}"
        rereads.append(gone)
        return {"Partition 0": _checkpoint(counts=gone)}

    report = verify_snapshots(store, blob_snapshots(TASKS, live.checkpoint), JOB, JOB_ID, reread=always_newer)
    assert len(rereads) == MAX_SNAPSHOT_RETRIES + 1
    (problem,) = report.problems
    assert problem.detail.startswith("MISSING snapshot index") and "moved on" in problem.detail
    assert "run it again" in problem.detail


@pytest.mark.parametrize("deleted", ["index", "blob"])
def test_download_follows_a_running_jobs_checkpoint_past_a_deleted_snapshot(store, live, tmp_path, deleted):
    blob_id = live.old_id if deleted == "index" else live.options_blob()
    transfer = BlobTransfer(CommitDuringRead(store, blob_id, live), CHUNK)
    ref = find_snapshot(TASKS, live.checkpoint, "Partition 0", "counts")
    target = tmp_path / "out"
    result = download_snapshot(transfer, ref, target, JOB, JOB_ID, reread=live.reread)
    assert result.snapshot.index_blob_id == live.new_id
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(live.src)) for p in live.src.rglob("*") if p.is_file())
    assert "OPTIONS-000003" not in files, "nothing of the gone snapshot is left behind"
    for name in files:
        assert (target / name).read_bytes() == (live.src / name).read_bytes()


def test_download_of_a_snapshot_the_checkpoint_still_names_fails_and_leaves_nothing(store, live, tmp_path):
    (store.root / live.old_id).unlink()
    ref = find_snapshot(TASKS, live.checkpoint, "Partition 0", "counts")
    target = tmp_path / "out"
    with pytest.raises(BlobStoreError, match="does not exist"):
        download_snapshot(BlobTransfer(store, CHUNK), ref, target, JOB, JOB_ID, reread=live.reread)
    assert not target.exists() and live.rereads == 1


def test_list_state_follows_a_running_jobs_checkpoint_past_a_deleted_index(store, live):
    rows = list_state(
        ["Partition 0"],
        live.checkpoint,
        CommitDuringRead(store, live.old_id, live),
        JOB,
        JOB_ID,
        reread=live.reread,
    )
    assert [(r.marker, r.note, r.files) for r in rows] == [(live.new_id, "", 5)]


def test_gc_keeps_the_blobs_of_the_snapshot_a_running_job_moved_on_to(store, live):
    refs = blob_snapshots(TASKS, live.checkpoint)
    wrapped = CommitDuringRead(store, live.old_id, live)
    used, unreadable = referenced_blobs(wrapped, refs, JOB, JOB_ID, reread=live.reread)
    assert not unreadable
    assert used == {live.new_id, *live.new.dir_index.present_blobs()}
