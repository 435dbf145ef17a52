"""The commit lifecycle (Samza's TaskInstance commit tests): order, skip/block/timeout, async failures."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from samsa.checkpoint.commit import CommitFailedError, CommitResult, TaskCommitManager
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)


class Backup:
    """A backup manager recording calls; its upload or cleanup can be held open, its upload made to fail."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.release = threading.Event()
        self.release.set()
        self.release_cleanup = threading.Event()
        self.release_cleanup.set()
        self.fail_upload: Exception | None = None

    def init(self, markers: Any) -> None: ...

    def snapshot(self, checkpoint_id: str) -> dict[str, str]:
        self.log.append("snapshot")
        return {"s": f"marker-{checkpoint_id}"}

    def upload(self, checkpoint_id: str, markers: dict[str, str]) -> Future[dict[str, str]]:
        self.log.append("upload")
        self.release.wait(10)
        future: Future[dict[str, str]] = Future()
        if self.fail_upload:
            future.set_exception(self.fail_upload)
        else:
            future.set_result(markers)
        return future

    def cleanup(self, checkpoint_id: str, markers: dict[str, str]) -> Future[None]:
        self.log.append("cleanup")
        self.release_cleanup.wait(10)
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def close(self) -> None:
        self.log.append("close")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _manager(
    log: list[str], backup: Backup, clock: Clock, written: list[CommitResult], **kw: Any
) -> TaskCommitManager:
    def write(result: CommitResult) -> None:
        log.append("checkpoint")
        written.append(result)

    return TaskCommitManager(
        "Partition 0",
        flush_outputs=lambda: log.append("flush outputs"),
        flush_stores=lambda: log.append("flush stores"),
        durable_stores={},
        backup_managers={"changelog": backup},
        write_checkpoint=write,
        executor=ThreadPoolExecutor(1),
        max_delay_ms=kw.get("max_delay_ms", 60_000),
        timeout_ms=kw.get("timeout_ms", 5_000),
        clock=clock,
    )


def test_sync_steps_then_async_steps_in_order() -> None:
    log: list[str] = []
    written: list[CommitResult] = []
    manager = _manager(log, Backup(log), Clock(), written)
    assert manager.commit({SSP: 5}, wait=True)
    assert log == [
        "flush stores",
        "flush outputs",
        "snapshot",
        "upload",
        "checkpoint",
        "cleanup",
    ]
    (result,) = written
    assert result.offsets == {SSP: 5}
    assert result.markers == {"changelog": {"s": f"marker-{result.checkpoint_id}"}}


def test_a_commit_due_while_uploading_is_skipped_within_max_delay() -> None:
    log: list[str] = []
    backup, clock, written = Backup(log), Clock(), []
    manager = _manager(log, backup, clock, written, max_delay_ms=60_000)
    backup.release.clear()
    assert manager.commit({SSP: 1})
    clock.now += 30
    assert manager.commit({SSP: 2}) is False
    assert manager.skipped == 1
    backup.release.set()
    manager.wait(5)
    assert [r.offsets[SSP] for r in written] == [1]


def test_beyond_max_delay_the_commit_blocks_until_the_previous_ends() -> None:
    log: list[str] = []
    backup, clock, written = Backup(log), Clock(), []
    manager = _manager(log, backup, clock, written, max_delay_ms=1_000, timeout_ms=10_000)
    backup.release.clear()
    assert manager.commit({SSP: 1})
    clock.now += 5
    threading.Timer(0.3, backup.release.set).start()
    assert manager.commit({SSP: 2})  # blocked ~0.3 s, then ran
    manager.wait(5)
    assert [r.offsets[SSP] for r in written] == [1, 2]
    second = log.index("snapshot", log.index("snapshot") + 1)
    assert log.index("cleanup") < second, "the second commit started only after the first ended"


def test_blocking_beyond_the_timeout_fails() -> None:
    log: list[str] = []
    backup, clock, written = Backup(log), Clock(), []
    manager = _manager(log, backup, clock, written, max_delay_ms=0, timeout_ms=200)
    backup.release.clear()
    manager.commit({SSP: 1})
    with pytest.raises(CommitFailedError, match=r"task\.commit\.timeout\.ms=200"):
        manager.commit({SSP: 2})
    backup.release.set()
    manager.wait(5)


def test_a_waited_commit_fails_once_its_cleanup_outlives_the_commit_timeout() -> None:
    # A blob store down right after the checkpoint: its cleanup retries far longer than the commit timeout,
    # and a start-up or final commit waiting for it would hold the container as long.
    log: list[str] = []
    backup, clock, written = Backup(log), Clock(), []
    manager = _manager(log, backup, clock, written, timeout_ms=300)
    backup.release_cleanup.clear()
    outcome: list[BaseException] = []

    def commit() -> None:
        try:
            manager.commit({SSP: 1}, wait=True)
        except BaseException as e:
            outcome.append(e)

    started = time.monotonic()
    waiter = threading.Thread(target=commit, daemon=True)
    waiter.start()
    try:
        waiter.join(5)
        assert not waiter.is_alive(), "the waited commit outlived task.commit.timeout.ms"
        assert time.monotonic() - started < 2
        (error,) = outcome
        assert isinstance(error, CommitFailedError)
        assert "task.commit.timeout.ms=300" in str(error)
        assert [r.offsets[SSP] for r in written] == [1], "the checkpoint was written; the cleanup ran on"
    finally:
        backup.release_cleanup.set()


def test_close_closes_the_backups_only_once_the_async_phase_in_flight_has_ended() -> None:
    log: list[str] = []
    backup, clock, written = Backup(log), Clock(), []
    manager = _manager(log, backup, clock, written)
    backup.release.clear()
    manager.commit({SSP: 1})
    started = time.monotonic()
    manager.close(timeout_s=0.2)  # the upload still runs: the backups stay open to it
    assert time.monotonic() - started < 2
    assert "close" not in log
    threading.Timer(0.2, backup.release.set).start()
    manager.close(timeout_s=5)
    assert log[-2:] == ["cleanup", "close"]


def test_an_async_failure_fails_the_next_commit_and_checkpoints_nothing() -> None:
    log: list[str] = []
    backup, clock, written = Backup(log), Clock(), []
    manager = _manager(log, backup, clock, written)
    backup.fail_upload = OSError("upload refused")
    manager.commit({SSP: 1})
    manager._in_flight.result(5)  # type: ignore[union-attr]
    assert written == []
    with pytest.raises(CommitFailedError, match="upload refused"):
        manager.commit({SSP: 2})
    backup.fail_upload = None
    assert manager.commit({SSP: 3}, wait=True), "after the failure is raised once, commits go on"
    assert [r.offsets[SSP] for r in written] == [3]


def test_a_failing_checkpoint_write_fails_the_next_commit() -> None:
    log: list[str] = []
    backup, clock = Backup(log), Clock()

    def write(result: CommitResult) -> None:
        raise RuntimeError("broker gone")

    manager = TaskCommitManager(
        "Partition 0",
        lambda: None,
        lambda: None,
        {},
        {"changelog": backup},
        write,
        ThreadPoolExecutor(1),
        60_000,
        1_000,
        clock,
    )
    manager.commit({SSP: 1})
    with pytest.raises(CommitFailedError, match="broker gone"):
        manager.wait(5)
    assert "cleanup" not in log, "no cleanup without a durable checkpoint"


def test_a_sync_failure_releases_the_permit() -> None:
    log: list[str] = []
    backup, clock, written = Backup(log), Clock(), []
    manager = _manager(log, backup, clock, written)
    manager._flush_stores = lambda: (_ for _ in ()).throw(OSError("disk full"))  # type: ignore[method-assign]
    with pytest.raises(OSError):
        manager.commit({SSP: 1})
    manager._flush_stores = lambda: None  # type: ignore[method-assign]
    assert manager.commit({SSP: 2}, wait=True)


def test_a_gated_store_is_checkpointed_off_the_loop_thread_with_the_state_of_the_snapshot(tmp_path) -> None:
    from samsa.checkpoint.commit import DurableStore
    from samsa.stores.checkpoint_dirs import checkpoint_dir
    from samsa.stores.rocksdb import RocksDbStore
    from samsa.stores.snapshot_gate import SnapshotGate

    log: list[str] = []
    written: list[CommitResult] = []
    backup = Backup(log)
    backup.release.clear()  # the async phase stays open after the checkpoint, in the upload
    store_dir = tmp_path / "store"
    engine = RocksDbStore(store_dir)
    gate = SnapshotGate(engine)
    threads: list[str] = []
    checkpoint = engine.checkpoint

    def recording_checkpoint(dest):
        threads.append(threading.current_thread().name)
        return checkpoint(dest)

    engine.checkpoint = recording_checkpoint  # type: ignore[method-assign]
    manager = TaskCommitManager(
        "Partition 0",
        flush_outputs=lambda: None,
        flush_stores=gate.flush,
        durable_stores={"s": DurableStore(engine, store_dir, ("changelog",), True, gate)},
        backup_managers={"changelog": backup},
        write_checkpoint=written.append,
        executor=ThreadPoolExecutor(1, "commit"),
        max_delay_ms=60_000,
        timeout_ms=5_000,
        clock=Clock(),
    )
    gate.put(b"k", b"before")
    assert manager.commit({SSP: 1})
    gate.put(b"k", b"after")  # the loop goes on while the commit thread checkpoints
    assert gate.get(b"k") == b"after"
    backup.release.set()
    manager.wait(5)
    assert threads and threads[0].startswith("commit"), "the checkpoint ran on the commit thread"
    (result,) = written
    snapshot = RocksDbStore(checkpoint_dir(store_dir, str(result.checkpoint_id)))
    try:
        assert snapshot.get(b"k") == b"before"
    finally:
        snapshot.close()
    assert gate.get(b"k") == b"after" and engine.get(b"k") == b"after"
    assert log[-1] == "cleanup"
    gate.close()
