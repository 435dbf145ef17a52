"""A commit's async phase meeting a store closed under it (a container stopping after a failure) or a
full disk: told as a consequence, or in one line, never as an ERROR of its own; nothing checkpointed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from held_commits import HeldCommits, held_commit_manager

from samsa.checkpoint.commit import CommitFailedError
from samsa.stores.exceptions import StoreDiskFullError
from samsa.stores.rocksdb import RocksDbStore
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


def test_a_store_closed_under_the_commit_is_told_as_a_consequence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = RocksDbStore(tmp_path / "counts", name="counts")
    pool = HeldCommits()
    manager, written = held_commit_manager(store, pool)
    caplog.set_level(logging.WARNING, logger="samsa.checkpoint.commit")
    assert manager.commit({SSP: 1})
    store.close()  # the container stopping after its task failed (a full disk, say)
    pool.go.set()
    with pytest.raises(CommitFailedError):
        manager.wait(5)
    assert written == [], "nothing checkpointed"
    # Before: ERROR "task Partition 0: commit failed in its async phase: StoreClosedError(...)", first.
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "commit abandoned: store 'counts' was closed under it as the container stops" in caplog.text
    assert "StoreClosedError" not in caplog.text
    pool.shutdown()


def test_a_full_disk_in_the_async_phase_fails_the_next_commit_with_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RocksDbStore(tmp_path / "counts", name="counts")
    pool = HeldCommits()
    manager, written = held_commit_manager(store, pool)
    full = StoreDiskFullError("counts", store.path, "flush", Exception("IO error: No space left on device"))

    def no_space() -> None:
        raise full

    monkeypatch.setattr(store, "flush", no_space)
    caplog.set_level(logging.WARNING, logger="samsa.checkpoint.commit")
    pool.go.set()
    assert manager.commit({SSP: 1})
    with pytest.raises(CommitFailedError) as raised:
        manager.wait(5)
    assert raised.value.__cause__ is full and written == []
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert f"commit failed, disk full at {store.path}" in caplog.text
    assert manager.failure is None  # told once, by the commit that raised it
    store.close()
    pool.shutdown()
