"""Uploading diffs and restoring snapshots through a blob store (the fake, and the embedded local one)."""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from samsa.stores.blobstore import checksum
from samsa.stores.blobstore.api import SNAPSHOT_INDEX_PATH, BlobMetadata, BlobStoreManager, Opener
from samsa.stores.blobstore.diff import dir_diff
from samsa.stores.blobstore.exceptions import (
    BlobDeletedError,
    BlobStoreError,
    CorruptBlobError,
    IndexFormatError,
    UnsafeIndexError,
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
from samsa.stores.blobstore.s3 import S3BlobStore
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.changelog.exceptions import RestoreInterrupted

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_blob_store import FakeBlobStore

BASE = BlobMetadata("", -1, "job", "1", "Partition 0", "counts")
CHUNK = 1000

# rel path -> (content, mode); a value of None is an (empty) dir.
TREE: dict[str, tuple[bytes, int] | None] = {
    "CURRENT": (b"MANIFEST-000005\n", 0o644),
    "empty": (b"", 0o600),
    "exact-chunk.sst": (bytes(range(256)) * 3 + b"x" * 232, 0o444),  # 1000 bytes
    "three-and-a-half.sst": (os.urandom(3500), 0o640),
    "run.sh": (b"#!/bin/sh\n", 0o755),
    "sub/000012.sst": (os.urandom(1001), 0o644),
    "sub/deeper/OPTIONS": (b"[opts]\n", 0o600),
    "sub/deeper/empty-too": (b"", 0o644),
    "sub/empty-dir": None,
    "empty-top": None,
}


def write_tree(root: Path, tree: dict[str, tuple[bytes, int] | None]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, value in tree.items():
        path = root / rel
        if value is None:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(value[0])
        os.chmod(path, value[1])
    return root


def read_tree(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """What `write_tree` would need to make `root` again (empty dirs listed; dirs holding files not)."""
    out: dict[str, tuple[bytes, int] | None] = {}
    for parent, dirs, files in os.walk(root):
        for name in files:
            path = Path(parent) / name
            out[path.relative_to(root).as_posix()] = (path.read_bytes(), path.stat().st_mode & 0o777)
        if not dirs and not files and Path(parent) != root:
            out[Path(parent).relative_to(root).as_posix()] = None
    return out


def listing(root: Path) -> list[tuple[str, bool, int]]:
    """Every entry under `root`: (path, is a link, size)."""
    out = []
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(parent) / name
            out.append((str(path), path.is_symlink(), os.lstat(path).st_size))
    return sorted(out)


def snapshot(index: DirIndex, prev: str | None = None) -> SnapshotIndex:
    return SnapshotIndex(1, SnapshotMetadata("1-1", "job", "1", "Partition 0", "counts"), index, prev)


def upload(transfer: BlobTransfer, root: Path, previous: DirIndex | None = None) -> DirIndex:
    return transfer.put_dir(dir_diff(root, previous or DirIndex("")), root, BASE)


def find(index: DirIndex, rel: str) -> FileIndex:
    *dirs, name = rel.split("/")
    for d in dirs:
        index = next(s for s in index.subdirs_present if s.name == d)
    return next(f for f in index.files_present if f.name == name)


@pytest.fixture
def fake() -> Iterator[FakeBlobStore]:
    store = FakeBlobStore(workers=4)
    yield store
    store.close()


@pytest.fixture
def transfer(fake: FakeBlobStore) -> BlobTransfer:
    return BlobTransfer(fake, chunk_size=CHUNK)


@pytest.fixture(params=["fake", "inline", "local", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStoreManager]:
    """The fake on a pool and answering inline (synchronously), the embedded local store, S3 on moto."""
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        endpoint = request.getfixturevalue("moto_endpoint")
        with ThreadPoolExecutor(4) as executor:
            s3 = S3BlobStore(bucket, "snapshots", executor, 1, endpoint_url=endpoint, region="us-east-1")
            s3.init()
            yield s3
            s3.close()
        return
    if request.param == "local":
        with ThreadPoolExecutor(4) as executor:
            local = LocalDirBlobStore(tmp_path / "blobs", executor, ttl_s=3600)
            local.init()
            yield local
            local.close()
        return
    store = FakeBlobStore(workers=4, inline=request.param == "inline")
    yield store
    store.close()


# -- round trips ---------------------------------------------------------------------------------------


def test_put_dir_then_restore_dir_reproduces_the_tree(any_store: BlobStoreManager, tmp_path: Path) -> None:
    transfer = BlobTransfer(any_store, chunk_size=CHUNK)
    source = write_tree(tmp_path / "checkpoint", TREE)

    index = upload(transfer, source)
    blob_id = transfer.put_index(snapshot(index))
    restored_index = transfer.get_index(blob_id, BASE).dir_index
    transfer.restore_dir(restored_index, tmp_path / "restored", BASE)

    assert restored_index == index
    assert read_tree(tmp_path / "restored") == TREE
    assert [f.name for f in index.files_present] == sorted(f.name for f in index.files_present)
    assert find(index, "empty").blobs == ()
    assert len(find(index, "exact-chunk.sst").blobs) == 1
    assert len(find(index, "sub/000012.sst").blobs) == 2
    for rel, value in TREE.items():
        if value is not None:
            f = find(index, rel)
            assert (f.size, f.checksum, f.metadata.permissions) == (
                len(value[0]),
                checksum.extend(0, value[0]),
                value[1],
            )


def test_restore_is_incremental_after_a_second_upload(transfer: BlobTransfer, tmp_path: Path) -> None:
    source = write_tree(tmp_path / "c1", TREE)
    first = upload(transfer, source)
    (source / "CURRENT").write_bytes(b"MANIFEST-000009\n")
    (source / "run.sh").unlink()
    (source / "sub" / "new.sst").write_bytes(b"n" * 2500)

    second = upload(transfer, source, first)
    transfer.restore_dir(second, tmp_path / "restored", BASE)

    assert read_tree(tmp_path / "restored") == read_tree(source)
    assert find(second, "three-and-a-half.sst") == find(first, "three-and-a-half.sst")
    assert {f.name for f in second.files_removed} == {"CURRENT", "run.sh"}


def test_chunked_file_is_stored_as_blobs_at_offsets(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    data = os.urandom(3500)
    path = tmp_path / "data.sst"
    path.write_bytes(data)

    f = transfer.put_file(path, "sub/data.sst", BASE)

    assert [b.offset for b in f.blobs] == [0, 1000, 2000, 3000]
    assert [fake.blobs[b.blob_id] for b in f.blobs] == [
        data[0:1000],
        data[1000:2000],
        data[2000:3000],
        data[3000:],
    ]
    assert [fake.metadata[b.blob_id].payload_size for b in f.blobs] == [1000, 1000, 1000, 500]
    assert {fake.metadata[b.blob_id].payload_path for b in f.blobs} == {"sub/data.sst"}
    assert f.checksum == checksum.file_crc(path)
    assert f.size == 3500

    # The index may list blobs in any order: restore writes them by offset.
    shuffled = replace(f, blobs=(f.blobs[2], f.blobs[0], f.blobs[3], f.blobs[1]))
    transfer.restore_dir(DirIndex("", files_present=(shuffled,)), tmp_path / "restored", BASE)

    assert (tmp_path / "restored" / "data.sst").read_bytes() == data


class RereadingStore(FakeBlobStore):
    """Reads each put's body twice, seeking back in between (as an HTTP client checksumming a body)."""

    def _put(self, source: Opener, metadata: BlobMetadata, fault: object) -> str:
        with source() as stream:
            stream.read(10)
            stream.seek(0, os.SEEK_END)
            stream.seek(0)
            first = stream.read()
        return super()._put(lambda: io.BytesIO(first), metadata, None)


def test_a_body_read_twice_is_checksummed_once(tmp_path: Path) -> None:
    store = RereadingStore()
    transfer = BlobTransfer(store, chunk_size=CHUNK)
    data = os.urandom(2500)
    (tmp_path / "f").write_bytes(data)

    f = transfer.put_file(tmp_path / "f", "f", BASE)

    assert f.checksum == checksum.extend(0, data)
    assert [len(store.blobs[b.blob_id]) for b in f.blobs] == [1000, 1000, 500]
    store.close()


def test_put_file_records_metadata_from_stat(transfer: BlobTransfer, tmp_path: Path) -> None:
    path = tmp_path / "OPTIONS"
    path.write_bytes(b"abc")
    os.chmod(path, 0o640)
    os.utime(path, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))

    f = transfer.put_file(path, "OPTIONS", BASE)

    stat = os.stat(path)
    assert f.metadata == FileMetadata(stat.st_ctime_ns // 1_000_000, 1_600_000_000_123, 3, 0o640)
    assert f.name == "OPTIONS"


def test_empty_file_has_no_blobs(fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    path.touch()

    f = transfer.put_file(path, "LOCK", BASE)

    assert (f.blobs, f.size, f.checksum) == ((), 0, 0)
    assert fake.ledger == []


def test_put_file_refuses_what_is_not_a_regular_file(transfer: BlobTransfer, tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "pipe")

    for name in ("link", "pipe"):
        with pytest.raises(BlobStoreError, match=f"{tmp_path / name}.*not a regular file"):
            transfer.put_file(tmp_path / name, name, BASE)
    with pytest.raises(BlobStoreError, match="missing"):
        transfer.put_file(tmp_path / "missing", "missing", BASE)


def test_many_chunks_on_a_synchronous_store_do_not_recurse(tmp_path: Path) -> None:
    store = FakeBlobStore(inline=True)
    transfer = BlobTransfer(store, chunk_size=1)
    data = os.urandom(3000)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_bytes(data)

    index = upload(transfer, tmp_path / "src")
    transfer.restore_dir(index, tmp_path / "dst", BASE)

    assert len(index.files_present[0].blobs) == 3000
    assert (tmp_path / "dst" / "f").read_bytes() == data


def test_progress_reports_bytes_and_files(transfer: BlobTransfer, tmp_path: Path) -> None:
    index = upload(transfer, write_tree(tmp_path / "c", TREE))
    calls: list[tuple[int, int]] = []
    caller = threading.get_ident()
    threads: set[int] = set()

    def progress(size: int, files: int) -> None:
        threads.add(threading.get_ident())
        calls.append((size, files))

    transfer.restore_dir(index, tmp_path / "restored", BASE, progress=progress)

    files = [v for v in TREE.values() if v is not None]
    assert sum(c[0] for c in calls) == sum(len(v[0]) for v in files)
    assert sum(c[1] for c in calls) == len(files)
    assert threads == {caller}


# -- retries -------------------------------------------------------------------------------------------


def test_retried_put_after_a_partial_read_keeps_the_checksum(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    data = os.urandom(3500)
    path = tmp_path / "f.sst"
    path.write_bytes(data)
    puts = []

    def fail_third_chunk_once(op: str, blob_id: str | None, meta: BlobMetadata) -> None:
        puts.append(meta)
        if len(puts) == 3:  # chunk 2's first attempt fails after 300 of its bytes
            fake.fail_next("put", 1, after_bytes=300)

    fake.on("put", fail_third_chunk_once)

    f = transfer.put_file(path, "f.sst", BASE)

    assert fake.attempts["put"] == 5
    assert f.checksum == checksum.extend(0, data)
    transfer.restore_dir(DirIndex("", files_present=(f,)), tmp_path / "restored", BASE)
    assert (tmp_path / "restored" / "f.sst").read_bytes() == data


def test_retried_get_reopens_the_sink_at_the_chunk(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    data = os.urandom(3500)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f.sst").write_bytes(data)
    index = upload(transfer, tmp_path / "src")
    blobs = index.files_present[0].blobs
    fake.fail_next("get", 1, after_bytes=500, only=blobs[2].blob_id)
    fake.fail_next("get", 2, after_bytes=999, only=blobs[3].blob_id)

    transfer.restore_dir(index, tmp_path / "dst", BASE)

    assert (tmp_path / "dst" / "f.sst").read_bytes() == data
    assert fake.attempts["get"] == 4 + 3


def test_put_gives_up_after_the_store_retries_run_out(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    fake.fail_next("put", fake.max_attempts)

    with pytest.raises(BlobStoreError, match="injected put failure"):
        transfer.put_file(tmp_path / "f", "f", BASE)


# -- failures ------------------------------------------------------------------------------------------


def test_first_failure_of_put_dir_is_raised_and_nothing_left_running(tmp_path: Path) -> None:
    store = FakeBlobStore(workers=1)
    transfer = BlobTransfer(store, chunk_size=CHUNK)
    root = write_tree(tmp_path / "c", {f"f{i:02d}": (os.urandom(2500), 0o644) for i in range(20)})
    boom = BlobStoreError("boom: disk on fire")
    store.fail_next("put", 1, error=boom, only="f03")

    with pytest.raises(BlobStoreError) as info:
        upload(transfer, root)

    assert info.value is boom
    assert store.pending() == 0
    store.close()


def test_file_growing_during_upload_fails_naming_it(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    path = tmp_path / "grows.sst"
    path.write_bytes(b"a" * 2500)

    def append_once(op: str, blob_id: str | None, meta: BlobMetadata) -> None:
        if fake.attempts["put"] == 0:
            with open(path, "ab") as f:
                f.write(b"more")

    fake.on("put", append_once)

    with pytest.raises(BlobStoreError, match=f"{path} changed while it was uploaded"):
        transfer.put_file(path, "grows.sst", BASE)


def test_file_shrinking_during_upload_fails_naming_it(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    path = tmp_path / "shrinks.sst"
    path.write_bytes(b"a" * 2500)

    def truncate_once(op: str, blob_id: str | None, meta: BlobMetadata) -> None:
        if fake.attempts["put"] == 0:
            os.truncate(path, 1500)

    fake.on("put", truncate_once)

    with pytest.raises(BlobStoreError, match=f"{path} changed while it was uploaded.*500 bytes"):
        upload(transfer, tmp_path)


@pytest.mark.parametrize("damage", [None, b"short"], ids=["flipped-byte", "wrong-length"])
def test_corrupt_blob_fails_restore_naming_file_and_blob(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path, damage: bytes | None
) -> None:
    index = upload(transfer, write_tree(tmp_path / "c", TREE))
    f = find(index, "sub/000012.sst")
    fake.corrupt(f.blobs[1].blob_id, damage)

    with pytest.raises(CorruptBlobError) as info:
        transfer.restore_dir(index, tmp_path / "restored", BASE)

    message = str(info.value)
    assert "sub/000012.sst" in message
    assert f.blobs[1].blob_id in message
    assert "counts" in message


def test_deleted_blob_fails_restore_naming_store_file_and_blob(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = upload(transfer, write_tree(tmp_path / "c", TREE))
    gone = find(index, "sub/deeper/OPTIONS").blobs[0].blob_id
    fake.mark_deleted(gone)

    with pytest.raises(BlobDeletedError) as info:
        transfer.restore_dir(index, tmp_path / "restored", BASE)

    assert info.value.blob_id == gone
    for part in (gone, "sub/deeper/OPTIONS", "counts", "Partition 0"):
        assert part in str(info.value)


def test_index_whose_blobs_do_not_cover_a_file_is_refused(transfer: BlobTransfer, tmp_path: Path) -> None:
    meta = FileMetadata(0, 0, 2000, 0o644)
    bad = [
        FileIndex("no-blobs", (), meta, 0),
        FileIndex("not-from-zero", (FileBlob("b1", 500),), meta, 0),
        FileIndex("twice-at-zero", (FileBlob("b1", 0), FileBlob("b2", 0)), meta, 0),
        FileIndex("past-the-end", (FileBlob("b1", 0), FileBlob("b2", 2000)), meta, 0),
    ]
    for f in bad:
        with pytest.raises(IndexFormatError, match=f.name):
            transfer.restore_dir(DirIndex("", files_present=(f,)), tmp_path / "t", BASE)
    assert not (tmp_path / "t").exists()


# -- crafted indexes -----------------------------------------------------------------------------------


def crafted(name: str, good: FileIndex) -> dict[str, DirIndex]:
    """Indexes naming `name` somewhere, after entries that are fine (FileIndex does not check names)."""
    bad_file = replace(good, name=name)
    fine = DirIndex("fine", files_present=(good,))
    return {
        "root-file": DirIndex("", files_present=(good, bad_file)),
        "root-dir": DirIndex("", subdirs_present=(fine, DirIndex(name, files_present=(good,)))),
        "nested-file": DirIndex("", subdirs_present=(fine, DirIndex("a", files_present=(good, bad_file)))),
        "nested-dir": DirIndex(
            "", files_present=(good,), subdirs_present=(DirIndex("a", subdirs_present=(DirIndex(name),)),)
        ),
    }


@pytest.mark.parametrize("name", ["../x", "/etc/x", "a/b", "..", "", "."])
@pytest.mark.parametrize("where", ["root-file", "root-dir", "nested-file", "nested-dir"])
def test_crafted_index_is_refused_before_anything_is_written(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path, name: str, where: str
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "good").write_bytes(b"good")
    good = upload(transfer, tmp_path / "src").files_present[0]
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_bytes(b"keep")
    before = listing(tmp_path)
    gets_before = fake.attempts["get"]

    with pytest.raises(UnsafeIndexError, match="nothing was written"):
        transfer.restore_dir(crafted(name, good)[where], target, BASE)

    assert listing(tmp_path) == before
    assert fake.attempts["get"] == gets_before


def test_crafted_index_from_json_is_refused(
    transfer: BlobTransfer, fake: FakeBlobStore, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "good").write_bytes(b"good")
    index = snapshot(upload(transfer, tmp_path / "src"))
    data = index.to_bytes().replace(b'"file-name":"good"', b'"file-name":"../good"')
    bad_id = transfer.put_index(index)
    fake.corrupt(bad_id, data)

    with pytest.raises(UnsafeIndexError, match=bad_id):
        transfer.get_index(bad_id, BASE)


@pytest.mark.parametrize("kind", ["file", "dir", "target"])
def test_symlink_in_target_is_refused_and_nothing_written(
    transfer: BlobTransfer, tmp_path: Path, kind: str
) -> None:
    index = upload(
        transfer, write_tree(tmp_path / "src", {"a": (b"a", 0o644), "sub/victim": (b"new", 0o644)})
    )
    outside = write_tree(tmp_path / "outside", {"victim": (b"old", 0o644)})
    target = tmp_path / "target"
    if kind == "target":
        target.symlink_to(outside)
    else:
        target.mkdir()
        if kind == "file":
            (target / "sub").mkdir()
            (target / "sub" / "victim").symlink_to(outside / "victim")
        else:
            (target / "sub").symlink_to(outside)
    before = listing(tmp_path)

    with pytest.raises(UnsafeIndexError, match="link"):
        transfer.restore_dir(index, target, BASE)

    assert listing(tmp_path) == before
    assert (outside / "victim").read_bytes() == b"old"


def test_existing_file_in_target_is_replaced_not_written_through(
    transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = upload(transfer, write_tree(tmp_path / "src", {"data.sst": (b"restored", 0o644)}))
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "checkpoint-copy").write_bytes(b"old contents")
    os.link(tmp_path / "checkpoint-copy", target / "data.sst")  # a hard link, as RocksDB checkpoints make

    transfer.restore_dir(index, target, BASE)

    assert (target / "data.sst").read_bytes() == b"restored"
    assert (tmp_path / "checkpoint-copy").read_bytes() == b"old contents"


# -- stop ----------------------------------------------------------------------------------------------


def test_stop_interrupts_restore(tmp_path: Path) -> None:
    store = FakeBlobStore(workers=1)
    transfer = BlobTransfer(store, chunk_size=CHUNK)
    index = upload(transfer, write_tree(tmp_path / "c", {f"f{i}": (b"x" * 2500, 0o644) for i in range(10)}))
    stop = threading.Event()

    def stop_during_first_get(op: str, blob_id: str | None, meta: BlobMetadata) -> None:
        if not stop.is_set():
            stop.set()
            store.cancelled.wait(5)  # until the restore cancelled the queued gets

    store.on("get", stop_during_first_get)

    with pytest.raises(RestoreInterrupted) as info:
        transfer.restore_dir(index, tmp_path / "restored", BASE, stop=stop)

    assert (info.value.task, info.value.store) == ("Partition 0", "counts")
    assert store.pending() == 0
    assert len(store.done("get")) < 30
    store.close()


def test_stop_set_before_restore_writes_nothing(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = upload(transfer, write_tree(tmp_path / "c", TREE))
    stop = threading.Event()
    stop.set()

    with pytest.raises(RestoreInterrupted):
        transfer.restore_dir(index, tmp_path / "restored", BASE, stop=stop)

    assert not (tmp_path / "restored").exists()
    assert fake.attempts["get"] == 0


# -- TTLs and deletes ----------------------------------------------------------------------------------


def test_remove_ttls_makes_the_index_permanent_last(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = snapshot(upload(transfer, write_tree(tmp_path / "c", TREE)))
    index_id = transfer.put_index(index)

    transfer.remove_ttls(index, index_id, BASE)

    done = fake.done("remove_ttl")
    assert done[-1] == index_id
    assert set(done) == set(index.dir_index.present_blobs()) | {index_id}
    assert len(done) == len(set(done))
    assert fake.permanent == set(done)


def test_remove_ttls_leaves_the_index_expiring_when_a_file_fails(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = snapshot(upload(transfer, write_tree(tmp_path / "c", TREE)))
    index_id = transfer.put_index(index)
    victim = find(index.dir_index, "sub/000012.sst").blobs[1].blob_id
    fake.fail_next("remove_ttl", 1, error=BlobStoreError("throttled for good"), only=victim)

    with pytest.raises(BlobStoreError, match="throttled for good"):
        transfer.remove_ttls(index, index_id, BASE)

    assert index_id not in fake.done("remove_ttl")
    assert index_id not in fake.permanent


def test_remove_ttls_of_a_deleted_blob_names_the_file(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = snapshot(upload(transfer, write_tree(tmp_path / "c", TREE)))
    index_id = transfer.put_index(index)
    gone = find(index.dir_index, "sub/deeper/OPTIONS").blobs[0].blob_id
    fake.mark_deleted(gone)

    with pytest.raises(BlobDeletedError, match="sub/deeper/OPTIONS") as info:
        transfer.remove_ttls(index, index_id, BASE)

    assert info.value.blob_id == gone
    assert index_id not in fake.permanent


def test_delete_removed_deletes_exactly_the_dropped_blobs_and_the_previous_index(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    source = write_tree(tmp_path / "c", TREE)
    first = upload(transfer, source)
    first_id = transfer.put_index(snapshot(first))
    (source / "CURRENT").write_bytes(b"MANIFEST-000009\n")
    (source / "run.sh").unlink()
    for path in sorted((source / "sub").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (source / "sub").rmdir()
    second = snapshot(upload(transfer, source, first), prev=first_id)
    second_id = transfer.put_index(second)
    dropped = {
        b.blob_id
        for rel in ("CURRENT", "run.sh", "sub/000012.sst", "sub/deeper/OPTIONS")
        for b in find(first, rel).blobs
    }

    transfer.delete_removed(second, BASE)
    transfer.delete_removed(second, BASE)  # idempotent

    assert set(fake.done("delete")) == dropped | {first_id}
    assert set(second.dir_index.present_blobs()) | {second_id} <= fake.live()
    transfer.restore_dir(second.dir_index, tmp_path / "restored", BASE)
    assert read_tree(tmp_path / "restored") == read_tree(source)


def test_delete_removed_never_deletes_a_present_blob(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = upload(transfer, write_tree(tmp_path / "c", {"a": (b"a", 0o644), "d/b": (b"b", 0o644)}))
    shared = find(index, "d/b")
    odd = replace(index, subdirs_removed=(DirIndex("old", files_present=(shared,)),))

    transfer.delete_removed(snapshot(odd), BASE)

    assert fake.done("delete") == []


def _two_snapshots(transfer: BlobTransfer, tmp_path: Path) -> tuple[SnapshotIndex, str, set[str]]:
    """A second snapshot of TREE with CURRENT rewritten and run.sh gone: (it, its index id, what it dropped
    (those files' blobs and the first index))."""
    source = write_tree(tmp_path / "c", TREE)
    first = upload(transfer, source)
    first_id = transfer.put_index(snapshot(first))
    (source / "CURRENT").write_bytes(b"MANIFEST-000009\n")
    (source / "run.sh").unlink()
    second = snapshot(upload(transfer, source, first), prev=first_id)
    dropped = {b.blob_id for rel in ("CURRENT", "run.sh") for b in find(first, rel).blobs} | {first_id}
    return second, transfer.put_index(second), dropped


def test_make_permanent_deletes_the_dropped_blobs_while_the_ttls_go(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    second, second_id, dropped = _two_snapshots(transfer, tmp_path)
    deleting = threading.Event()
    overlapped: list[bool] = []
    fake.on("delete", lambda op, blob_id, meta: deleting.set())

    def index_ttl(op: str, blob_id: str | None, meta: BlobMetadata) -> None:
        if blob_id == second_id:  # the last TTL request: deletes must not wait for it
            overlapped.append(deleting.wait(5))

    fake.on("remove_ttl", index_ttl)

    transfer.make_permanent(second, second_id, BASE)

    assert overlapped == [True]
    assert set(fake.done("delete")) == dropped
    assert fake.permanent >= set(second.dir_index.present_blobs()) | {second_id}
    assert fake.done("remove_ttl")[-1] == second_id


def test_make_permanent_raises_the_ttl_failure_after_its_deletes_finished(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    second, second_id, dropped = _two_snapshots(transfer, tmp_path)
    fake.on("delete", lambda op, blob_id, meta: threading.Event().wait(0.05))
    fake.fail_next("remove_ttl", 1, error=BlobStoreError("throttled for good"), only=second_id)

    with pytest.raises(BlobStoreError, match="throttled for good"):
        transfer.make_permanent(second, second_id, BASE)

    assert set(fake.done("delete")) == dropped, "every delete finished before the failure was raised"
    assert second_id not in fake.permanent


def test_delete_snapshot_deletes_everything_and_the_index_last(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    source = write_tree(tmp_path / "c", TREE)
    first = upload(transfer, source)
    (source / "CURRENT").write_bytes(b"MANIFEST-000009\n")
    second = snapshot(upload(transfer, source, first))
    second_id = transfer.put_index(second)

    transfer.delete_snapshot(second, second_id, BASE)

    done = fake.done("delete")
    assert done[-1] == second_id
    assert fake.live() == set()
    assert set(done) == set(fake.blobs)


def test_delete_of_missing_blobs_succeeds(tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as executor:
        local = LocalDirBlobStore(tmp_path / "blobs", executor, ttl_s=3600)
        local.init()
        transfer = BlobTransfer(local, chunk_size=CHUNK)
        index = snapshot(upload(transfer, write_tree(tmp_path / "c", TREE)))
        index_id = transfer.put_index(index)

        transfer.delete_snapshot(index, index_id, BASE)
        transfer.delete_snapshot(index, index_id, BASE)

        assert list(local.list_blobs()) == []
        local.close()


# -- index blobs ---------------------------------------------------------------------------------------


def test_index_blob_round_trip_and_failures(
    fake: FakeBlobStore, transfer: BlobTransfer, tmp_path: Path
) -> None:
    index = snapshot(upload(transfer, write_tree(tmp_path / "c", TREE)), prev="older")

    blob_id = transfer.put_index(index)

    assert transfer.get_index(blob_id, BASE) == index
    assert fake.metadata[blob_id].payload_path == SNAPSHOT_INDEX_PATH
    assert fake.metadata[blob_id].store_name == "counts"
    fake.corrupt(blob_id, b"{not json")
    with pytest.raises(IndexFormatError, match=blob_id):
        transfer.get_index(blob_id, BASE)
    fake.mark_deleted(blob_id)
    with pytest.raises(BlobDeletedError, match="snapshot-index of store counts") as info:
        transfer.get_index(blob_id, BASE)
    assert info.value.blob_id == blob_id
