"""A commit whose checkpoint marker meets a full disk fails the next commit with a `StoreDiskFullError`
naming the store (a real tiny tmpfs filled right before the marker, or a refused fsync where none can be
mounted)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from disk_full_places import small_disk, take_the_room
from held_commits import HeldCommits, held_commit_manager

from samsa.checkpoint import commit
from samsa.checkpoint.commit import CommitFailedError
from samsa.stores import checkpoint_dirs
from samsa.stores.exceptions import StoreDiskFullError
from samsa.stores.rocksdb import RocksDbStore
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


def _no_space(fd: int) -> None:
    """The answer of a full disk to an fsync (ENOSPC)."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_marker_refused_for_want_of_room_names_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with small_disk(tmp_path) as disk:
        filler = (disk or tmp_path) / "filler"

        def full_then_write(*args: Any, **kwargs: Any) -> None:
            # The store flushed and its checkpoint dir made: the disk fills up right before the marker.
            if disk is not None:
                take_the_room(filler)
            else:  # no tmpfs: the refusal a full disk gives the marker's fsync
                monkeypatch.setattr(checkpoint_dirs.os, "fsync", _no_space)
            checkpoint_dirs.write_marker(*args, **kwargs)

        monkeypatch.setattr(commit, "write_marker", full_then_write)
        store = RocksDbStore((disk or tmp_path) / "Partition_0" / "counts", name="counts")
        pool = HeldCommits()
        manager, written = held_commit_manager(store, pool)
        store.put(b"k", b"v")
        pool.go.set()
        assert manager.commit({SSP: 1})
        with pytest.raises(CommitFailedError) as raised:
            manager.wait(5)
        monkeypatch.undo()
        filler.unlink(missing_ok=True)  # room for the store's close
        store.close()
        pool.shutdown()
    full = raised.value.__cause__
    assert isinstance(full, StoreDiskFullError) and written == []
    assert full.store == "counts" and full.path.name == checkpoint_dirs.MARKER_FILE
    assert str(full).startswith("disk full: store 'counts' at "), full
