"""The blob-store backup manager's bookkeeping: the committed base, orphaned and broken snapshots."""

from __future__ import annotations

import io
import itertools
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from blob_ledger import LedgerBlobStore

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.stores.backend import TaskStoresContext
from samsa.stores.blobstore.backup import BlobStoreBackupManager
from samsa.stores.blobstore.exceptions import BlobDeletedError
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import checkpoint_dir


class Task:
    def __init__(
        self, root: Path, transfer: BlobTransfer, pool: ThreadPoolExecutor, stores: list[str]
    ) -> None:
        self.root, self.transfer, self.pool, self.stores = root, transfer, pool, stores
        self.store: LocalDirBlobStore | None = None
        self.context = TaskStoresContext(
            "job-1", "Partition 0", 0, {s: root / "state" / s for s in stores}, {s: {} for s in stores}
        )
        (root / "state").mkdir(exist_ok=True)

    def manager(
        self, markers: dict[str, str] | None, stores: list[str] | None = None
    ) -> BlobStoreBackupManager:
        made = BlobStoreBackupManager(
            self.context, stores or self.stores, self.transfer, self.pool, "job", "1"
        )
        made.init(markers)
        return made

    def checkpoint(self, files: dict[str, bytes]) -> str:
        checkpoint_id = str(CheckpointId.create())
        for store in self.stores:
            target = checkpoint_dir(self.context.store_dirs[store], checkpoint_id)
            target.mkdir(parents=True)
            for name, data in files.items():
                (target / name).write_bytes(data)
        return checkpoint_id


@pytest.fixture
def task(tmp_path: Path) -> Iterator[Task]:
    with ThreadPoolExecutor(4) as io, ThreadPoolExecutor(2) as pool:
        store = LocalDirBlobStore(tmp_path / "blobs", io, 3600.0)
        made = Task(tmp_path, BlobTransfer(store), pool, ["a", "b"])
        made.store = store
        yield made


def _exists(task: Task, blob_id: str) -> bool:
    return (task.root / "blobs" / blob_id).exists()


def test_the_next_diff_is_against_the_last_committed_snapshot_not_an_uncommitted_upload(task: Task) -> None:
    manager = task.manager(None)
    first = task.checkpoint({"x": b"1", "y": b"2"})
    committed = manager.upload(first, {}).result()
    manager.cleanup(first, committed).result()
    second = task.checkpoint({"x": b"1", "y": b"3"})
    manager.upload(second, {}).result()  # its checkpoint write fails: no cleanup
    third = task.checkpoint({"x": b"1", "y": b"4"})
    markers = manager.upload(third, {}).result()
    index = task.transfer.get_index(markers["a"], manager.base("a"))
    assert index.prev_index_blob_id == committed["a"]
    removed = {f.name for f in index.dir_index.files_removed}
    assert removed == {"y"}  # y of the first snapshot, the one committed
    manager.cleanup(third, markers).result()
    assert not _exists(task, committed["a"]), "the previous committed index is deleted at cleanup"


def test_snapshots_of_stores_no_longer_backed_up_go_after_the_next_durable_commit(task: Task) -> None:
    manager = task.manager(None)
    first = task.checkpoint({"x": b"1"})
    committed = manager.upload(first, {}).result()
    manager.cleanup(first, committed).result()
    old_blobs = set(task.transfer.get_index(committed["b"], manager.base("b")).dir_index.present_blobs())
    # Store b leaves the blob store: kept over the restart, deleted once a checkpoint without it is durable.
    restarted = task.manager(committed, stores=["a"])
    assert all(_exists(task, blob) for blob in old_blobs | {committed["b"]})
    second = task.checkpoint({"x": b"1"})
    markers = restarted.upload(second, {}).result()
    assert set(markers) == {"a"}
    restarted.cleanup(second, markers).result()
    assert not any(_exists(task, blob) for blob in old_blobs | {committed["b"]})
    assert _exists(task, markers["a"])


def test_a_broken_checkpointed_snapshot_is_replaced_by_a_full_upload(task: Task) -> None:
    manager = task.manager(None)
    first = task.checkpoint({"x": b"1", "big": b"z" * 5000})
    committed = manager.upload(first, {}).result()
    manager.cleanup(first, committed).result()
    index = task.transfer.get_index(committed["a"], manager.base("a"))
    lost = next(iter(index.dir_index.present_blobs()))
    (task.root / "blobs" / lost).unlink()
    restarted = task.manager(committed)  # warns, does not fail: the restore fell back to the changelog
    second = task.checkpoint({"x": b"1", "big": b"z" * 5000})
    markers = restarted.upload(second, {}).result()
    fresh = task.transfer.get_index(markers["a"], restarted.base("a"))
    assert fresh.prev_index_blob_id is None and len(fresh.dir_index.files_present) == 2
    restarted.cleanup(second, markers).result()
    assert not _exists(task, committed["a"]), "what was left of the broken snapshot is deleted"
    with pytest.raises(BlobDeletedError):
        task.transfer.get_index(committed["a"], restarted.base("a"))


@pytest.mark.parametrize(
    ("key", "value", "fix"),
    [
        ("task.checkpoint.write.versions", "1", "add 2 to it"),
        ("task.checkpoint.read.versions", "1", "read version 2 first"),
        ("task.checkpoint.read.versions", "1,2", "read version 2 first"),
    ],
)
def test_a_blob_backed_job_must_write_and_read_checkpoint_v2(key: str, value: str, fix: str) -> None:
    from samsa.runtime.config.config import Config
    from samsa.runtime.config.job import JobConfig
    from samsa.runtime.exceptions import ConfigError
    from samsa.runtime.validation import check_job

    config = {
        "job.name": "j",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.in",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "stores.counts.factory": "rocksdb",
        "stores.counts.backup.factories": "blobstore",
    }
    check_job(JobConfig(Config(config)))  # the defaults (write 1,2 / read 2,1) are fine
    with pytest.raises(ConfigError, match=rf"{key}={value}: store\(s\) counts .* {fix}"):
        check_job(JobConfig(Config({**config, key: value})))


def test_a_store_not_restored_from_the_snapshot_has_its_large_files_checked_before_reuse(task: Task) -> None:
    # Migration step 1 on a new host: restored from the changelog, whose rebuilt RocksDB may write a new
    # file with an old file's name and size. Name + size would call it unchanged; its content says not.
    big = 2 << 20
    manager = task.manager(None)
    first = task.checkpoint({"000012.sst": b"A" * big})
    committed = manager.upload(first, {}).result()
    manager.cleanup(first, committed).result()
    restarted = task.manager(committed)  # no blob restore recorded for the stores
    second = task.checkpoint({"000012.sst": b"B" * big})
    markers = restarted.upload(second, {}).result()
    index = task.transfer.get_index(markers["a"], restarted.base("a"))
    assert [f.name for f in index.dir_index.files_removed] == ["000012.sst"], "uploaded again"
    # Restored from that very snapshot, the store's files are trusted by name and size.
    task.context.restored_from.update(markers)
    restarted.cleanup(second, markers).result()
    trusting = task.manager(markers)
    third = task.checkpoint({"000012.sst": b"B" * big})
    again = trusting.upload(third, {}).result()
    index = task.transfer.get_index(again["a"], trusting.base("a"))
    assert not index.dir_index.files_removed and len(index.dir_index.files_present) == 1


def test_a_crafted_checkpointed_index_neither_fails_the_start_nor_the_commits(task: Task) -> None:
    from samsa.stores.blobstore.api import BlobMetadata

    crafted = (
        b'{"schema-version":1,"creation-time-millis":1,"snapshot-metadata":{"checkpoint-id":"1-1",'
        b'"job-name":"job","job-id":"1","task-name":"Partition 0","store-name":"a"},"dir-index":{'
        b'"dir-name":"","files-present":[{"file-name":"../escape","blobs":[],"file-metadata":{'
        b'"creation-time-millis":1,"last-modified-time-millis":1,"size":0,"permissions":420},"checksum":0}],'
        b'"files-removed":[],"sub-dirs-present":[],"sub-dirs-removed":[]},"prev-snapshot-index-blob-id":null}'
    )
    meta = BlobMetadata("snapshot-index", len(crafted), "job", "1", "Partition 0", "a")
    assert task.store is not None
    bad_id = task.store.put(lambda: io.BytesIO(crafted), meta).result()
    manager = task.manager({"a": bad_id})  # warns: the snapshot is unusable
    checkpoint_id = task.checkpoint({"x": b"1"})
    markers = manager.upload(checkpoint_id, {}).result()
    manager.cleanup(checkpoint_id, markers).result()  # the unusable orphan is skipped, not fatal
    index = task.transfer.get_index(markers["a"], manager.base("a"))
    assert index.prev_index_blob_id is None


def test_a_restore_starts_writing_large_files_to_disk_while_downloading(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from samsa.stores.blobstore import writeback
    from samsa.stores.blobstore.api import BlobMetadata
    from samsa.stores.blobstore.diff import dir_diff
    from samsa.stores.blobstore.index import DirIndex

    requests: list[tuple[int, int]] = []
    real = writeback.start_writeback
    monkeypatch.setattr(
        writeback,
        "start_writeback",
        lambda fd, offset, length: (requests.append((offset, length)), real(fd, offset, length)),
    )
    source = tmp_path / "source"
    source.mkdir()
    data = random.randbytes(2 * writeback.INTERVAL + 12345)
    (source / "big.sst").write_bytes(data)
    base = BlobMetadata("", -1, "job", "1", "Partition 0", "a")
    index = task.transfer.put_dir(dir_diff(source, DirIndex("")), source, base)
    task.transfer.restore_dir(index, tmp_path / "restored", base)
    assert (tmp_path / "restored" / "big.sst").read_bytes() == data
    assert requests and requests[0][0] == 0  # contiguous ranges from the start, each at least INTERVAL
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(requests))
    assert all(n >= writeback.INTERVAL for _, n in requests)


def test_a_commit_makes_permanent_only_the_blobs_it_added_and_a_restart_all_of_them(tmp_path: Path) -> None:
    with ThreadPoolExecutor(4) as io, ThreadPoolExecutor(2) as pool:
        ledger = LedgerBlobStore(LocalDirBlobStore(tmp_path / "blobs", io, 3600.0))
        task = Task(tmp_path, BlobTransfer(ledger), pool, ["a"])
        manager = task.manager(None)
        first = task.checkpoint({"x": b"1", "y": b"2"})
        committed = manager.upload(first, {}).result()
        manager.cleanup(first, committed).result()
        kept = set(task.transfer.get_index(committed["a"], manager.base("a")).dir_index.present_blobs())
        assert ledger.ttl_removed == kept | {committed["a"]}
        before = len(ledger.ttl_removed_list)
        second = task.checkpoint({"x": b"1", "y": b"3"})  # x is retained, y is new
        markers = manager.upload(second, {}).result()
        manager.cleanup(second, markers).result()
        index = task.transfer.get_index(markers["a"], manager.base("a"))
        added = set(index.dir_index.present_blobs()) - kept
        assert len(added) == 1
        # x's blob was made permanent by the first cleanup: the second asks only about y's and its index.
        assert sorted(ledger.ttl_removed_list[before:]) == sorted([*added, markers["a"]])
        before = len(ledger.ttl_removed_list)
        # A restart cannot know whether the last cleanup finished: it makes every blob permanent again.
        task.manager(markers)
        assert set(ledger.ttl_removed_list[before:]) == set(index.dir_index.present_blobs()) | {markers["a"]}


def test_the_snapshot_of_a_store_the_job_no_longer_defines_is_made_permanent_not_deleted(
    task: Task, tmp_path: Path
) -> None:
    # Its last commit crashed before the cleanup: every blob of its snapshot still has its TTL.
    cp = task.checkpoint({"x": b"1", "y": b"2"})
    markers = task.manager(None).upload(cp, {}).result()
    assert task.store is not None
    assert all(b.expires_at is not None for b in task.store.list_blobs())
    # Store b removed from the job (its marker still in the checkpoint): a start of store a only.
    (tmp_path / "now").mkdir()
    now = Task(tmp_path / "now", task.transfer, task.pool, ["a"])
    manager = now.manager(markers)
    removed = task.transfer.get_index(markers["b"], manager.base("b"))
    kept = {markers["b"], *removed.dir_index.present_blobs()}
    expiring = {b.blob_id for b in task.store.list_blobs() if b.expires_at is not None}
    assert not kept & expiring, "made permanent: it stays until `samsa blobstore gc` deletes it"
    # The next commit of store a does not delete it either.
    next_cp = now.checkpoint({"x": b"3"})
    manager.cleanup(next_cp, manager.upload(next_cp, {}).result()).result()
    assert all(_exists(task, blob) for blob in kept)
