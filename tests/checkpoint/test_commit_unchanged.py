"""What a timer's commit of an idle task needs to know: whether anything changed since the last completed
commit (`TaskCommitManager.unchanged`), and whether the task wrote its stores (`TaskStorage.writes`, cached
writes included)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from samsa.checkpoint.commit import CommitFailedError, TaskCommitManager
from samsa.serde.builtin import LongSerde, StringSerde
from samsa.stores.backend import TaskStoresContext
from samsa.stores.cached import CachedStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.readonly import ReadOnlyStore
from samsa.stores.serialized import SerializedStore
from samsa.stores.storage_manager import TaskStorage
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


class Backup:
    """A backup manager whose upload can be held open or made to fail."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.release.set()
        self.fail: Exception | None = None

    def init(self, markers: Any) -> None: ...

    def snapshot(self, checkpoint_id: str) -> dict[str, str]:
        return {}

    def upload(self, checkpoint_id: str, markers: dict[str, str]) -> Future[dict[str, str]]:
        assert self.release.wait(10)
        future: Future[dict[str, str]] = Future()
        if self.fail is not None:
            future.set_exception(self.fail)
        else:
            future.set_result(markers)
        return future

    def cleanup(self, checkpoint_id: str, markers: dict[str, str]) -> Future[None]:
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def close(self) -> None: ...


@pytest.fixture
def backup() -> Backup:
    return Backup()


@pytest.fixture
def manager(backup: Backup) -> Any:
    pool = ThreadPoolExecutor(1)
    yield TaskCommitManager(
        "Partition 0",
        flush_outputs=lambda: None,
        flush_stores=lambda: None,
        durable_stores={},
        backup_managers={"changelog": backup},
        write_checkpoint=lambda result: None,
        executor=pool,
        max_delay_ms=60_000,
        timeout_ms=5_000,
    )
    backup.release.set()
    pool.shutdown()


def test_unchanged_only_against_the_last_completed_commit(manager: TaskCommitManager) -> None:
    assert not manager.unchanged({SSP: 5}, 3), "no commit yet: the first one always runs"
    assert manager.start({SSP: 5}, force=True, writes=3)
    manager.wait()
    assert manager.unchanged({SSP: 5}, 3)
    assert not manager.unchanged({SSP: 6}, 3), "new input"
    assert not manager.unchanged({SSP: 5}, 4), "a store write"
    assert not manager.unchanged({SSP: 5}, None), "stores that cannot tell"
    assert not manager.unchanged({SSP: 5, SystemStreamPartition("kafka", "in", 1): 0}, 3)


def test_an_idle_task_commits_again_once_its_last_commit_is_as_old_as_the_bound(backup: Backup) -> None:
    # A changelog restore judges the tail after a checkpoint by the checkpoint's age (undo needs what
    # compaction keeps for min.compaction.lag.ms): an idle task's checkpoint must not age past it.
    now = [100.0]
    pool = ThreadPoolExecutor(1)
    manager = TaskCommitManager(
        "Partition 0",
        flush_outputs=lambda: None,
        flush_stores=lambda: None,
        durable_stores={},
        backup_managers={"changelog": backup},
        write_checkpoint=lambda result: None,
        executor=pool,
        max_delay_ms=60_000,
        timeout_ms=5_000,
        clock=lambda: now[0],
        max_idle_ms=1_000,
    )
    try:
        assert manager.start({SSP: 5}, force=True, writes=0)
        manager.wait()
        now[0] += 0.9
        assert manager.unchanged({SSP: 5}, 0)
        now[0] += 0.2
        assert not manager.unchanged({SSP: 5}, 0), "the checkpoint would outgrow the bound"
        assert manager.start({SSP: 5}, writes=0)
        manager.wait()
        assert manager.unchanged({SSP: 5}, 0), "a new commit restarts the bound"
    finally:
        pool.shutdown()


def test_the_idle_bound_is_half_the_tightest_restore_age_limit_of_the_changelogged_stores() -> None:
    from samsa.stores.changelog.settings import idle_commit_bound_ms

    assert idle_commit_bound_ms([]) == float("inf")
    # Defaults: 0.9 x 4 h compaction lag = 3.24 h, under the 1-day delete retention.
    assert idle_commit_bound_ms([("counts", {})]) == 0.9 * 14_400_000 / 2
    tight = {"changelog.delete.retention.ms": "600000"}
    assert idle_commit_bound_ms([("counts", {}), ("seen", tight)]) == 300_000
    assert idle_commit_bound_ms([("x", {"changelog.min.compaction.lag.ms": "0"})]) == 0


def test_not_unchanged_while_a_commit_is_in_flight(manager: TaskCommitManager, backup: Backup) -> None:
    assert manager.start({SSP: 5}, force=True, writes=0)
    manager.wait()
    backup.release.clear()
    assert manager.start({SSP: 5}, requested=True, writes=0)
    assert not manager.unchanged({SSP: 5}, 0), "its failure would go unreported"
    backup.release.set()
    manager.wait()
    assert manager.unchanged({SSP: 5}, 0)


def test_a_failure_recorded_for_the_next_commit_is_never_left_out(
    manager: TaskCommitManager, backup: Backup
) -> None:
    assert manager.start({SSP: 5}, force=True, writes=0)
    manager.wait()
    backup.fail = RuntimeError("upload failed")
    assert manager.start({SSP: 5}, requested=True, writes=0)
    future = manager._in_flight
    assert future is not None
    future.exception(timeout=10)
    assert not manager.unchanged({SSP: 5}, 0), "the next commit must run to raise it"
    with pytest.raises(CommitFailedError, match="upload failed"):
        manager.start({SSP: 5}, writes=0)


def _storage(stores: dict[str, Any], writers: dict[str, Any] | None = None) -> TaskStorage:
    context = TaskStoresContext("job-1", "Partition 0", 0, {}, {})
    return TaskStorage(context, stores, writers)


def test_the_write_count_sees_writes_still_in_the_cache_and_not_reads_or_flushes() -> None:
    typed = SerializedStore(InMemoryStore("counts"), StringSerde(), LongSerde())
    cached = CachedStore(typed, cache_size=100, write_batch_size=50)
    plain = SerializedStore(InMemoryStore("plain"), StringSerde(), LongSerde())
    storage = _storage({"counts": cached, "plain": plain})
    before = storage.writes()
    assert before is not None
    cached.get("a")
    list(cached.all())
    assert storage.writes() == before, "reads are no writes"
    cached.put("a", 1)
    assert storage.writes() != before, "a write held in the cache counts"
    after_put = storage.writes()
    storage.flush()
    assert storage.writes() == after_put, "a commit's flush is no write of the task"
    cached.put("a", 2)  # the same key again, after the flush
    assert storage.writes() != after_put
    mark = storage.writes()
    cached.put("a", 3)  # the same dirty key once more: still counted as changed since the flush
    cached.delete("b")
    cached.put_all([("c", 1)])
    cached.delete_all(["c"])
    assert storage.writes() != after_put and storage.writes() >= mark
    mark = storage.writes()
    plain.put("x", 1)
    plain.delete("x")
    plain.put_all([("y", 1)])
    plain.delete_all(["y"])
    assert storage.writes() == mark + 4


def test_the_write_count_of_stores_the_system_writes_and_of_other_tasks_stores(tmp_path: Path) -> None:
    adjunct = SerializedStore(InMemoryStore("ref"), StringSerde(), StringSerde())
    shared = SerializedStore(InMemoryStore("shared"), StringSerde(), StringSerde())
    storage = _storage(
        {"ref": ReadOnlyStore(adjunct, "ref", "stream refs"), "shared": ReadOnlyStore(shared, "shared", "x")},
        writers={"ref": adjunct},
    )
    before = storage.writes()
    shared.put("k", "another task's write")
    assert storage.writes() == before, "the shared store's keeper counts it"
    adjunct.put_all([("k", "v")])
    assert storage.writes() == before + 1
    unknown = _storage({"custom": InMemoryStore("custom")})
    assert unknown.writes() is None, "a store that cannot tell: never taken as idle"
