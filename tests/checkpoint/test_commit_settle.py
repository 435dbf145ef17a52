"""`TaskCommitManager.settle`: a failing container's bounded wait for a task's commit in flight."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from held_commits import HeldCommits, held_commit_manager

from samsa.stores.rocksdb import RocksDbStore
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


def test_settle_waits_for_the_commit_in_flight_to_end_and_write_its_checkpoint(tmp_path: Path) -> None:
    store = RocksDbStore(tmp_path / "counts", name="counts")
    pool = HeldCommits()
    manager, written = held_commit_manager(store, pool, 60_000)
    assert manager.settle(0.0), "nothing in flight"
    assert manager.commit({SSP: 3})
    assert not manager.settle(0.2), "ended while held"
    threading.Timer(0.2, pool.go.set).start()
    assert manager.settle(10)
    assert [r.offsets for r in written] == [{SSP: 3}] and manager.failure is None
    store.close()
    pool.shutdown()


def test_settle_waits_no_longer_than_the_commit_timeout_unless_told(tmp_path: Path) -> None:
    store = RocksDbStore(tmp_path / "counts", name="counts")
    pool = HeldCommits()
    manager, written = held_commit_manager(store, pool, 300)
    assert manager.commit({SSP: 3})
    started = time.monotonic()
    assert not manager.settle(10)
    assert time.monotonic() - started < 2, "waited past task.commit.timeout.ms"
    started = time.monotonic()
    assert not manager.settle(0.3, within_timeout=False)  # an abandoned one: waited for a while more
    assert time.monotonic() - started >= 0.3
    pool.go.set()
    assert manager.settle(10, within_timeout=False) and written
    store.close()
    pool.shutdown()
