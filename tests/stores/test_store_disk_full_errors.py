"""Writes refused for want of room (ENOSPC, EDQUOT, EFBIG; RocksDB's text) become StoreDiskFullError."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from samsa.runtime.exceptions import UserCodeError
from samsa.stores import checkpoint_dirs
from samsa.stores.exceptions import (
    StoreClosedError,
    StoreDiskFullError,
    StoreError,
    disk_full_cause,
    is_disk_full,
    no_room,
)
from samsa.stores.rocksdb import RocksDbStore

ROCKSDB_ENOSPC = (
    "IO error: No space left on device: While appending to file: /data/state/job-1/Partition_0/counts/"
    "000012.log: No space left on device"
)


def _dev_full_error() -> OSError:
    """A real ENOSPC: every write to /dev/full fails with it."""
    try:
        with open("/dev/full", "wb", buffering=0) as full:
            full.write(b"x")
    except OSError as e:
        return e
    raise AssertionError("a write to /dev/full succeeded")


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)),
        OSError(errno.EFBIG, os.strerror(errno.EFBIG)),
        Exception(ROCKSDB_ENOSPC),  # rocksdict raises bare Exception with RocksDB's status text
        Exception("IO error: While appending to file: /data/counts/000012.log: File too large"),
        Exception("IO error: While appending to file: /data/counts/000012.log: Disk quota exceeded"),
    ],
    ids=["ENOSPC", "EDQUOT", "EFBIG", "rocksdb-enospc", "rocksdb-efbig", "rocksdb-edquot"],
)
def test_writes_refused_for_want_of_room_map_to_store_disk_full(error: BaseException, tmp_path: Path) -> None:
    assert is_disk_full(error)
    full = no_room("counts", tmp_path / "counts", "write", error)
    assert isinstance(full, StoreDiskFullError) and isinstance(full, StoreError)
    assert no_room("counts", tmp_path, "write", full) is full  # mapped once, however often it is wrapped


def test_a_real_enospc_maps_too(tmp_path: Path) -> None:
    assert isinstance(no_room(None, tmp_path, "write", _dev_full_error()), StoreDiskFullError)


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.EACCES, os.strerror(errno.EACCES)),
        Exception("IO error: lock hold by current process, acquire time 1 acquiring thread 2: LOCK"),
        Exception("Corruption: block checksum mismatch"),
        StoreClosedError("counts"),
    ],
    ids=["EACCES", "rocksdb-lock", "rocksdb-corruption", "closed"],
)
def test_other_failures_are_not_disk_full(error: BaseException, tmp_path: Path) -> None:
    assert not is_disk_full(error)
    assert no_room("counts", tmp_path, "write", error) is None


def test_the_message_names_the_store_the_dir_the_free_bytes_and_the_fix(tmp_path: Path) -> None:
    store_dir = tmp_path / "state" / "job-1" / "Partition_0" / "counts"  # not made yet: its parent's disk
    full = StoreDiskFullError("counts", store_dir, "flush", Exception(ROCKSDB_ENOSPC))
    text = str(full)
    assert text.startswith(f"disk full: store 'counts' at {store_dir}: flush failed for want of room ")
    assert full.free_bytes is not None and f"; {full.free_bytes} bytes free on that disk." in text
    assert "No space left on device" in text
    assert "Free space there, or move job.logged.store.base.dir" in text and "then restart" in text


def test_a_rocksdb_write_refused_for_want_of_room_raises_store_disk_full(tmp_path: Path) -> None:
    store = RocksDbStore(tmp_path / "counts", name="counts")
    refused = Exception(ROCKSDB_ENOSPC)

    def no_space(*_: Any) -> None:
        raise refused

    try:
        store.put(b"k", b"v")
        store._put = store._delete = no_space  # as rocksdict raises when the WAL append fails
        for write in (lambda: store.put(b"k", b"w"), lambda: store.delete(b"k")):
            with pytest.raises(StoreDiskFullError, match="disk full: store 'counts' at ") as raised:
                write()
            assert raised.value.__cause__ is refused and raised.value.path == tmp_path / "counts"
        other = Exception("IO error: something else")
        store._put = lambda *_: (_ for _ in ()).throw(other)
        with pytest.raises(Exception) as raised_other:
            store.put(b"k", b"w")
        assert raised_other.value is other  # anything else goes up as it was
    finally:
        store.close()
    with pytest.raises(StoreClosedError):
        store.put(b"k", b"v")


def test_a_checkpoint_marker_refused_for_want_of_room_raises_store_disk_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint_dirs.os, "fsync", no_space)
    target = tmp_path / "counts-1-2"
    target.mkdir()
    with pytest.raises(StoreDiskFullError, match=f"disk full: {target}/CHECKPOINT-V2: write failed"):
        checkpoint_dirs.write_marker(target, "1-2", {"changelog": "m"})


def test_the_full_disk_is_found_behind_what_it_surfaced_as(tmp_path: Path) -> None:
    full = StoreDiskFullError("counts", tmp_path, "write", Exception(ROCKSDB_ENOSPC))
    try:
        try:
            raise full
        except StoreDiskFullError as e:
            raise UserCodeError("task Partition 0: process() failed") from e
    except UserCodeError as wrapped:
        assert disk_full_cause(wrapped) is full
    assert disk_full_cause(StoreClosedError("counts")) is None
