"""The metrics of a container's stores and commits: restore progress while it runs, and per completed commit
its time, its phases' timings and the size of each store's local files."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from samsa.checkpoint.commit import CommitReport
from samsa.runtime import metrics as m
from samsa.stores.backend import RestoreProgress, TaskStoresContext

_RECORDS_DOC = "Records replayed into the store at start, so far while it restores"
_BYTES_DOC = "Bytes replayed into the store at start, so far while it restores"
_REMAINING_DOC = (
    "Records left to restore into the store (its changelog's offsets still to read); NaN while unknown "
    "(a blob-store download before its changelog tail), 0 once restored or with nothing to restore"
)


def restore_gauges(
    registry: m.MetricsRegistry, contexts: Iterable[TaskStoresContext], durable: Iterable[str]
) -> None:
    """Per task and durable store: records and bytes restored so far, and records left, read at scrape
    time from the very `RestoreProgress` the restore updates and its reporter logs."""
    stores = list(durable)
    for context in contexts:
        for store in stores:
            labels = {"task": context.task_name, "store": store}
            progress = context.progress
            registry.gauge_fn(
                m.STORE_RESTORED_RECORDS, _RECORDS_DOC, labels, _field(progress, store, "records")
            )
            registry.gauge_fn(m.STORE_RESTORED_BYTES, _BYTES_DOC, labels, _field(progress, store, "bytes"))
            registry.gauge_fn(
                m.STORE_RESTORE_REMAINING_RECORDS, _REMAINING_DOC, labels, _left(progress, store)
            )


def _field(progress: Mapping[str, RestoreProgress], store: str, name: str) -> Callable[[], float]:
    def read() -> float:
        p = progress.get(store)  # made once the restore plans the store: none until then, or at all
        return 0 if p is None else int(getattr(p, name))

    return read


def _left(progress: Mapping[str, RestoreProgress], store: str) -> Callable[[], float]:
    def read() -> float:
        p = progress.get(store)
        if p is None or p.done:
            return 0
        if p.total_records is None:
            return math.nan
        return max(0, p.total_records - p.records)

    return read


_LAST_COMMIT_DOC = (
    "When the task's checkpoint was last known current, in epoch seconds: its last commit completed (its "
    "checkpoint written), or a timer's commit found nothing new to write since"
)


def last_commit_gauge(registry: m.MetricsRegistry, task: str) -> m.Gauge:
    """The task's `samsa_last_commit_timestamp_seconds`: set by each completed commit and by each idle one."""
    return registry.gauge(m.LAST_COMMIT_TIMESTAMP, _LAST_COMMIT_DOC, {"task": task})


class CommitMetrics:
    """Records each completed commit of a task (`TaskCommitManager.on_committed`, on the commit thread)."""

    def __init__(self, registry: m.MetricsRegistry, task: str, store_dirs: Mapping[str, Path]) -> None:
        self._last = last_commit_gauge(registry, task)
        self._registry = registry
        self._task = task
        self._store_dirs = dict(store_dirs)
        self._sizes = {
            store: registry.gauge(
                m.STORE_SIZE_BYTES,
                "Size of the store's local files (its live dir), in bytes, as of the task's last commit",
                {"task": task, "store": store},
            )
            for store in self._store_dirs
        }

    def __call__(self, report: CommitReport) -> None:
        for phase, seconds in report.phases.items():
            self._registry.timer(
                m.COMMIT_PHASE_SECONDS,
                "Time in each phase of the task's commit (flush_stores, flush_outputs, snapshot, "
                "local_checkpoint, upload, checkpoint, cleanup)",
                {"task": self._task, "phase": phase},
            ).update_ns(int(seconds * 1e9))
        for store, gauge in self._sizes.items():
            gauge.set(dir_size(self._store_dirs[store]))
        self._last.set(report.committed_at)


def dir_size(path: Path) -> int:
    """Bytes of the regular files under `path` (0 when it is gone); files vanishing meanwhile are skipped."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except OSError:
                continue  # compacted away while we walked: not part of the store any more
    return total
