"""Damaged RocksDB files: told as damage (never as a lock) at open, read and iteration; a copy with a
backup is set aside and deleted, checkpoint dirs and all, by the next start; one without a backup is kept,
and its failure is not restarted."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from samsa.deploy.restarts import DAMAGED_STORE_EXIT, unmendable_exit
from samsa.serde.registry import SerdeRegistry
from samsa.stores.backend import TaskStoresContext
from samsa.stores.exceptions import (
    DamagedStoreError,
    LocalStoreDiscardedError,
    StoreCorruptError,
    StoreError,
)
from samsa.stores.factory import store_specs
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.storage_manager import ContainerStorage, TaskStoresModel


def _filled(path: Path, keys: int, pad: int = 0) -> None:
    store = RocksDbStore(path)
    store.put_all((b"k%05d" % i, b"v" * (8 + pad)) for i in range(keys))
    store.flush()
    store.close()


def _flip(path: Path) -> Path:
    (sst,) = sorted(path.glob("*.sst"))
    data = bytearray(sst.read_bytes())
    data[100:300] = bytes(b ^ 0x5A for b in data[100:300])
    sst.write_bytes(data)
    return sst


def test_a_damaged_sst_at_open_is_damage_naming_the_file_not_a_lock(tmp_path: Path) -> None:
    path = tmp_path / "counts"
    _filled(path, 20)
    sst = _flip(path)
    with pytest.raises(StoreCorruptError) as info:
        RocksDbStore(path, name="counts")
    error = info.value
    assert "locked" not in str(error) and "Corruption:" in str(error)
    assert (error.store, error.path, error.file, error.action) == ("counts", path, str(sst), "open")


def test_a_truncated_sst_at_open_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "counts"
    _filled(path, 20)
    (sst,) = sorted(path.glob("*.sst"))
    sst.write_bytes(sst.read_bytes()[:-50])
    with pytest.raises(StoreCorruptError, match="damaged") as info:
        RocksDbStore(path, name="counts")
    assert "locked" not in str(info.value) and info.value.file is not None


def test_a_store_held_by_another_is_still_told_as_locked(tmp_path: Path) -> None:
    first = RocksDbStore(tmp_path / "counts")
    try:
        with pytest.raises(StoreError, match="it is locked") as info:
            RocksDbStore(tmp_path / "counts")
        assert not isinstance(info.value, StoreCorruptError)
    finally:
        first.close()


def test_reads_and_iterations_meeting_damage_raise_it_instead_of_a_bare_error_or_a_silent_end(
    tmp_path: Path,
) -> None:
    path = tmp_path / "counts"
    _filled(path, 3000, pad=40)  # many data blocks: the open reads only the index at the file's end
    sst = _flip(path)
    store = RocksDbStore(path, name="counts")
    try:
        with pytest.raises(StoreCorruptError) as read:
            store.get(b"k00001")
        assert (read.value.action, read.value.file) == ("read", str(sst))
        with pytest.raises(StoreCorruptError):
            store.get_all([b"k00001", b"k02000"])
        # rocksdict's iterator ends early, silently, at the damaged block: never a short store.
        with pytest.raises(StoreCorruptError) as walk:
            list(store.all())
        assert walk.value.action == "iterate"
        with pytest.raises(StoreCorruptError):
            list(store.range(b"k00000", b"k99999"))
        assert store.get(b"k02999") == b"v" * 48, "an intact block still reads"
        assert len(list(store.range(b"k02990", b"k03000"))) == 10, "an intact range still ends cleanly"
    finally:
        store.close()


# -- the storage manager: set aside, then deleted at the next start; or kept --------------------------------


class _Restore:
    def __init__(self, context: TaskStoresContext) -> None:
        self.context = context

    def init(self, markers: Any, checkpoint_id: Any = None) -> None:
        self.seen = {s: d.exists() for s, d in self.context.store_dirs.items()}

    def restore(self, stop: threading.Event) -> None:
        pass

    def close(self) -> None:
        pass


class _Backend:
    def restore_manager(self, context: TaskStoresContext) -> _Restore:
        return _Restore(context)


def _storage(tmp_path: Path) -> ContainerStorage:
    config = {
        **{f"stores.{s}.factory": "rocksdb" for s in ("logged", "logged-b", "blob", "scratch", "adj")},
        "stores.logged.changelog": "kafka.logged-log",
        "stores.logged-b.changelog": "kafka.logged-b-log",
        "stores.blob.backup.factories": "blobstore",
    }
    return ContainerStorage(
        "job-1",
        [TaskStoresModel("Partition 0", 0)],
        store_specs(config),
        config,
        SerdeRegistry({}),
        tmp_path / "state",
        tmp_path / "state",
        {"changelog": _Backend(), "blobstore": _Backend()},  # type: ignore[dict-item]
        None,
        read_only={"adj": "stream kafka.customers"},
    )


def _damage(store_dir: Path, action: str = "read") -> StoreCorruptError:
    text = f"Corruption: block checksum mismatch: type = 4  in {store_dir}/000013.sst offset 66 size 897"
    return StoreCorruptError(store_dir.name, store_dir, action, Exception(text))


def _dirs(task_dir: Path, store: str) -> list[Path]:
    made = [
        task_dir / store,
        task_dir / f"{store}-1795542452386-214973",
        task_dir / f"{store}-1795542452999-1",
    ]
    for path in made:
        path.mkdir(parents=True)
        (path / "000013.sst").write_bytes(b"damaged")
    return made


def test_a_damaged_copy_with_a_changelog_is_set_aside_then_deleted_with_its_checkpoint_dirs(
    tmp_path: Path,
) -> None:
    storage = _storage(tmp_path)
    task_dir = tmp_path / "state" / "job-1" / "Partition_0"
    damaged, other = _dirs(task_dir, "logged"), _dirs(task_dir, "logged-b")
    storage.restore({"Partition 0": None}, {}, threading.Event())

    failure = storage.damaged(_damage(task_dir / "logged"))

    assert isinstance(failure, LocalStoreDiscardedError) and unmendable_exit(failure) is None
    assert "kafka.logged-log" in str(failure) and str(task_dir / "logged") in str(failure)
    assert (task_dir / "logged.damaged").exists() and all(p.exists() for p in damaged)
    storage.restore({"Partition 0": None}, {}, threading.Event())  # the restart
    assert not any(p.exists() for p in damaged), "the damaged copy or a checkpoint dir of it was kept"
    assert not (task_dir / "logged.damaged").exists()
    assert all(p.exists() for p in other), "store logged-b's dirs went with store logged's"


def test_damage_met_in_a_checkpoint_dir_sets_its_store_aside(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    task_dir = tmp_path / "state" / "job-1" / "Partition_0"
    _dirs(task_dir, "logged")
    storage.restore({"Partition 0": None}, {}, threading.Event())
    failure = storage.damaged(_damage(task_dir / "logged-1795542452386-214973"))
    assert isinstance(failure, LocalStoreDiscardedError) and (task_dir / "logged.damaged").exists()


def test_a_blob_backed_copy_is_set_aside_whether_or_not_the_start_checkpoint_has_its_snapshot(
    tmp_path: Path,
) -> None:
    # The restart restores the task's last completed commit, whatever the start's checkpoint held: a store
    # new to it (no snapshot there) has had snapshots uploaded by the commits since, or was empty at the
    # commit the restart resumes from (second read: it was refused as having no backup, exit 74).
    storage = _storage(tmp_path)
    task_dir = tmp_path / "state" / "job-1" / "Partition_0"
    _dirs(task_dir, "blob")
    for markers in ({"blobstore": {"blob": "idx"}}, {"blobstore": {}}, None):
        storage.restore({"Partition 0": markers}, {"Partition 0": "1-1"}, threading.Event())
        failure = storage.damaged(_damage(task_dir / "blob"))
        assert isinstance(failure, LocalStoreDiscardedError), (markers, failure)
        assert "its blob-store snapshot, as of the task's last completed commit" in str(failure), failure
        (task_dir / "blob.damaged").unlink()


def test_a_damaged_adjunct_store_is_kept_with_how_to_rebuild_it(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    task_dir = tmp_path / "state" / "job-1" / "Partition_0"
    kept = _dirs(task_dir, "adj")
    storage.restore({"Partition 0": None}, {}, threading.Event())
    failure = storage.damaged(_damage(task_dir / "adj"))
    assert isinstance(failure, DamagedStoreError) and unmendable_exit(failure) == DAMAGED_STORE_EXIT
    assert "kafka.customers" in str(failure) and f"delete {task_dir / 'adj'}" in str(failure)
    assert all(p.exists() for p in kept)


def test_damage_of_a_path_of_no_store_of_the_container_is_told_as_it_is(tmp_path: Path) -> None:
    damage = _damage(tmp_path / "elsewhere" / "logged")
    assert _storage(tmp_path).damaged(damage) is damage
