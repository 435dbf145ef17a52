"""Local checkpoint dirs and their marker files, on real RocksDB checkpoints (tmp dirs)."""

import errno
import json
import logging
import os
from pathlib import Path

import pytest

from samsa.stores import checkpoint_dirs
from samsa.stores.checkpoint_dirs import (
    MARKER_FILE,
    StoreMarker,
    checkpoint_dir,
    create_checkpoint,
    delete_checkpoint_dirs,
    is_stale,
    list_checkpoint_dirs,
    read_marker,
    restore_store_dir,
    write_marker,
)
from samsa.stores.exceptions import StoreError
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore

DAY_MS = 86_400_000


def _store_with_data(store_dir: Path, count: int = 1000) -> RocksDbStore:
    store = RocksDbStore(store_dir)
    store.put_all((b"k%05d" % i, b"v%d" % i) for i in range(count))
    store.flush()
    return store


# --- naming and listing ---


def test_checkpoint_dir_is_a_sibling(tmp_path: Path) -> None:
    store_dir = tmp_path / "task_0" / "counts"
    assert checkpoint_dir(store_dir, "1700000000000-42") == tmp_path / "task_0" / "counts-1700000000000-42"


def test_listing_orders_ids_numerically_and_filters_names(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    for name in [
        "store-1700000000000-9",
        "store-1700000000000-10",  # same millis: 10 > 9 numerically, though "10" < "9" as text
        "store-999999999999-999999",  # fewer millis digits: older
        "store-x-1700000000000-1",  # store `store-x`'s checkpoint
        "store-1-1700000000000-1",  # store `store-1`'s checkpoint (three numeric parts)
        "store-1700000000000-11.tmp",  # RocksDB's unfinished checkpoint
        "store-1700000000000",
        "stores-1700000000000-1",
        "store",
    ]:
        (tmp_path / name).mkdir()
    (tmp_path / "store-1700000000001-1").write_text("a plain file")
    assert list_checkpoint_dirs(store_dir) == [
        ("999999999999-999999", tmp_path / "store-999999999999-999999"),
        ("1700000000000-9", tmp_path / "store-1700000000000-9"),
        ("1700000000000-10", tmp_path / "store-1700000000000-10"),
    ]
    assert [cid for cid, _ in list_checkpoint_dirs(tmp_path / "store-x")] == ["1700000000000-1"]


def test_listing_without_parent_dir_is_empty(tmp_path: Path) -> None:
    assert list_checkpoint_dirs(tmp_path / "missing" / "store") == []


# --- create ---


def test_create_checkpoint_hard_links_ssts_and_reopens(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with _store_with_data(store_dir) as store:
        store.put(b"memtable-only", b"x")  # not flushed: the checkpoint must still hold it
        made = create_checkpoint(store, store_dir, "1700000000000-1")
    assert made == tmp_path / "store-1700000000000-1"
    ssts = sorted(made.glob("*.sst"))
    assert ssts
    for sst in ssts:
        assert sst.stat().st_ino == (store_dir / sst.name).stat().st_ino
    with RocksDbStore(made) as copy:
        assert copy.get(b"k00999") == b"v999"
        assert copy.get(b"memtable-only") == b"x"


def test_create_checkpoint_of_in_memory_engine_is_none(tmp_path: Path) -> None:
    assert create_checkpoint(InMemoryStore("s"), tmp_path / "s", "1700000000000-1") is None
    assert not list(tmp_path.iterdir())


# --- markers ---


def test_marker_round_trip(tmp_path: Path) -> None:
    write_marker(tmp_path, "1700000000000-5", {"changelog": '{"offset": 41}', "blobstore": "idx-7"})
    marker = read_marker(tmp_path)
    assert marker is not None
    assert marker.checkpoint_id == "1700000000000-5"
    assert marker.markers == {"changelog": '{"offset": 41}', "blobstore": "idx-7"}
    assert marker.written_at == pytest.approx((tmp_path / MARKER_FILE).stat().st_mtime)
    assert not (tmp_path / f"{MARKER_FILE}.tmp").exists()
    document = json.loads((tmp_path / MARKER_FILE).read_text())
    assert document["schema-version"] == 1
    assert isinstance(document["crc32"], int)


def test_marker_overwrite_replaces_it(tmp_path: Path) -> None:
    write_marker(tmp_path, "1-1", {"changelog": "a"})
    write_marker(tmp_path, "1-2", {})
    marker = read_marker(tmp_path)
    assert marker is not None
    assert (marker.checkpoint_id, marker.markers) == ("1-2", {})


def test_marker_into_missing_dir_fails(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such checkpoint dir"):
        write_marker(tmp_path / "store-1-1", "1-1", {})
    assert not (tmp_path / "store-1-1").exists()


def test_missing_marker_is_none_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert read_marker(tmp_path) is None
    assert not caplog.records


def _edit_marker(dir: Path, edit: str) -> None:
    path = dir / MARKER_FILE
    document = json.loads(path.read_text())
    if edit == "markers":
        document["markers"]["changelog"] = "tampered"
    elif edit == "checksum":
        document["crc32"] += 1
    elif edit == "no-checksum":
        del document["crc32"]
    path.write_text(json.dumps(document))


@pytest.mark.parametrize("edit", ["markers", "checksum", "no-checksum"])
def test_mismatched_checksum_is_none_with_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, edit: str
) -> None:
    write_marker(tmp_path, "1-1", {"changelog": "real"})
    _edit_marker(tmp_path, edit)
    with caplog.at_level(logging.WARNING):
        assert read_marker(tmp_path) is None
    assert str(tmp_path / MARKER_FILE) in caplog.text
    assert "checksum" in caplog.text


@pytest.mark.parametrize("content", [b"", b"{truncated", b"[1, 2]", b"\xff\xfe not utf-8", b'{"crc32": 0}'])
def test_corrupt_marker_is_none_with_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    (tmp_path / MARKER_FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert read_marker(tmp_path) is None
    assert str(tmp_path / MARKER_FILE) in caplog.text


def test_marker_of_unknown_schema_version_is_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    payload = {"schema-version": 2, "checkpoint-id": "1-1", "markers": {}}
    payload["crc32"] = checkpoint_dirs._crc32(payload)
    (tmp_path / MARKER_FILE).write_text(json.dumps(payload))
    with caplog.at_level(logging.WARNING):
        assert read_marker(tmp_path) is None
    assert "schema-version 2" in caplog.text


def test_marker_with_non_string_marker_is_none(tmp_path: Path) -> None:
    payload = {"schema-version": 1, "checkpoint-id": "1-1", "markers": {"changelog": 5}}
    payload["crc32"] = checkpoint_dirs._crc32(payload)
    (tmp_path / MARKER_FILE).write_text(json.dumps(payload))
    assert read_marker(tmp_path) is None


# --- staleness ---


def test_staleness_against_retention() -> None:
    marker = StoreMarker("1-1", {}, written_at=1000.0)
    assert not is_stale(marker, DAY_MS, now=1000.0)
    assert not is_stale(marker, DAY_MS, now=1000.0 + 86_399.999)
    assert is_stale(marker, DAY_MS, now=1000.0 + 86_400)
    assert is_stale(marker, 0, now=1000.0)
    assert is_stale(None, DAY_MS, now=1000.0)


def test_staleness_uses_file_mtime_and_clock(tmp_path: Path) -> None:
    write_marker(tmp_path, "1-1", {})
    fresh = read_marker(tmp_path)
    assert fresh is not None
    assert not is_stale(fresh, 60_000)
    two_days_ago = fresh.written_at - 2 * 86_400
    os.utime(tmp_path / MARKER_FILE, (two_days_ago, two_days_ago))
    old = read_marker(tmp_path)
    assert old is not None
    assert is_stale(old, DAY_MS)
    assert not is_stale(old, 3 * DAY_MS)


# --- delete ---


def test_delete_keeps_listed_ids_and_other_stores(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    for name in ["store-1-1", "store-1-2", "store-2-1", "store-2-2.tmp", "store-x-1-1", "store-3-3"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "000001.sst").write_text("data")
    (tmp_path / "store-9-9").write_text("a plain file, not a dir")
    delete_checkpoint_dirs(store_dir, keep=["1-2", "3-3"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "store",
        "store-1-2",
        "store-3-3",
        "store-9-9",
        "store-x-1-1",
    ]
    delete_checkpoint_dirs(store_dir)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "store-9-9", "store-x-1-1"]


def test_delete_tolerates_a_concurrent_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_dir = tmp_path / "store"
    (tmp_path / "store-1-1").mkdir()
    (tmp_path / "store-1-2").mkdir()
    real = checkpoint_dirs.list_checkpoint_dirs

    def listed_then_gone(dir: Path) -> list[tuple[str, Path]]:
        found = real(dir)
        (tmp_path / "store-1-1").rmdir()  # another cleanup wins the race
        return found

    monkeypatch.setattr(checkpoint_dirs, "list_checkpoint_dirs", listed_then_gone)
    delete_checkpoint_dirs(store_dir)
    assert not list(tmp_path.iterdir())


def test_delete_without_parent_dir_is_a_no_op(tmp_path: Path) -> None:
    delete_checkpoint_dirs(tmp_path / "missing" / "store")


# --- restore ---


def test_restore_store_dir_reopens_with_checkpoint_data(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with _store_with_data(store_dir) as store:
        made = create_checkpoint(store, store_dir, "1700000000000-1")
        assert made is not None
        store.put(b"k00000", b"after-checkpoint")
        store.put(b"new", b"after-checkpoint")
    write_marker(made, "1700000000000-1", {"changelog": "m"})
    restore_store_dir(made, store_dir)
    assert not (store_dir / MARKER_FILE).exists()
    assert read_marker(made) is not None  # the checkpoint dir stays as it was
    for sst in made.glob("*.sst"):
        assert (store_dir / sst.name).stat().st_ino == sst.stat().st_ino
    with RocksDbStore(store_dir) as restored:
        assert restored.get(b"k00000") == b"v0"
        assert restored.get(b"new") is None
        assert len(list(restored.all())) == 1000
        restored.put(b"written-after-restore", b"1")
        restored.flush()
    with RocksDbStore(made) as checkpoint:  # writes to the restored store never reach the checkpoint
        assert checkpoint.get(b"written-after-restore") is None
        assert checkpoint.get(b"k00000") == b"v0"


def test_restore_again_after_a_crash_midway(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with _store_with_data(store_dir) as store:
        made = create_checkpoint(store, store_dir, "1-1")
    assert made is not None
    # A crash left a half-built staging dir and removed the store dir.
    staging = tmp_path / "store.restoring"
    staging.mkdir()
    (staging / "CURRENT").write_text("garbage")
    os.rename(store_dir, tmp_path / "elsewhere")
    restore_store_dir(made, store_dir)
    assert not staging.exists()
    with RocksDbStore(store_dir) as restored:
        assert restored.get(b"k00001") == b"v1"
    restore_store_dir(made, store_dir)  # and once more over an existing store dir
    with RocksDbStore(store_dir) as restored:
        assert len(list(restored.all())) == 1000


def test_restore_copies_when_hard_links_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_dir = tmp_path / "store"
    with _store_with_data(store_dir) as store:
        made = create_checkpoint(store, store_dir, "1-1")
    assert made is not None
    attempts: list[str] = []

    def cross_device(src: object, dst: object) -> None:
        attempts.append(str(src))
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(checkpoint_dirs.os, "link", cross_device)
    restore_store_dir(made, store_dir)
    assert len(attempts) == 1  # gave up linking after the first refusal
    for sst in made.glob("*.sst"):
        assert (store_dir / sst.name).stat().st_ino != sst.stat().st_ino
        assert (store_dir / sst.name).read_bytes() == sst.read_bytes()
    with RocksDbStore(store_dir) as restored:
        assert restored.get(b"k00999") == b"v999"


def test_restore_from_missing_checkpoint_dir_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such checkpoint dir") as info:
        restore_store_dir(tmp_path / "store-1-1", tmp_path / "store")
    assert str(tmp_path / "store-1-1") in str(info.value)
