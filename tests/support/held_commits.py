"""A task's commit manager over one RocksDB store whose commit pool holds each async phase until told."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from samsa.checkpoint.commit import CommitResult, DurableStore, TaskCommitManager
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.snapshot_gate import SnapshotGate


class HeldCommits(ThreadPoolExecutor):
    """A commit pool whose async phases start once `go` is set (a slow commit thread)."""

    def __init__(self) -> None:
        super().__init__(1, "commit")
        self.go = threading.Event()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def held() -> Any:
            self.go.wait(10)
            return fn(*args, **kwargs)

        return super().submit(held)


def held_commit_manager(
    store: RocksDbStore, pool: HeldCommits, timeout_ms: int = 5_000
) -> tuple[TaskCommitManager, list[CommitResult]]:
    """Task `Partition 0`'s commit manager of store `counts` on `pool`, and the checkpoints it writes."""
    written: list[CommitResult] = []
    durable = DurableStore(store, store.path, (), True, SnapshotGate(store))
    manager = TaskCommitManager(
        "Partition 0",
        flush_outputs=lambda: None,
        flush_stores=lambda: None,
        durable_stores={"counts": durable},
        backup_managers={},
        write_checkpoint=written.append,
        executor=pool,
        max_delay_ms=60_000,
        timeout_ms=timeout_ms,
    )
    return manager, written
