"""The supervisors' watch of a running job's input partition counts and what they do on a change, shared by
the local supervisor and the Spark driver (Samza's job coordinator with its StreamPartitionCountMonitor)."""

from __future__ import annotations

import logging
from types import TracebackType

from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.job_model import JobModel
from samsa.runtime.partition_monitor import (
    Changes,
    PartitionCountMonitor,
    describe,
    durable_stores,
    monitor_interval_s,
)

log = logging.getLogger(__name__)


class PartitionWatch:
    """Watches the inputs of one job model while its containers run (`with PartitionWatch(job, model)`),
    every `job.coordinator.monitor-partition-change.frequency.ms`; nothing is watched when that is -1."""

    def __init__(self, job: JobConfig, model: JobModel) -> None:
        self.job = job
        interval = monitor_interval_s(job)
        self._monitor: PartitionCountMonitor | None = None
        if interval is not None:
            fetch = JobCoordinator(job).partition_counts
            self._monitor = PartitionCountMonitor(model.partition_counts(), fetch, interval)
        self._warned = False

    def __enter__(self) -> PartitionWatch:
        if self._monitor is not None:
            self._monitor.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._monitor is not None:
            self._monitor.stop()

    def changed(self) -> Changes:
        """The inputs whose partition count differs from the model's (empty while none does); the first
        time, logs the warning that the supervisor now stops the containers."""
        if self._monitor is None or not self._monitor.changes:
            return {}
        changes = dict(self._monitor.changes)
        if not self._warned:
            self._warned = True
            log.warning(
                "input partition count changed while job %s runs: %s; the new partitions are in no task of "
                "its job model: stopping its containers (final commit)",
                self.job.job_key,
                describe(changes),
            )
        return changes


def restarts_on_change(job: JobConfig, changes: Changes) -> bool:
    """Once a change stopped the job's containers (final commit): True, logged, when the job starts again
    with a new job model; False, with the error, when it has durable stores (as Samza: their state is kept
    per task, and the new count moves keys to other tasks), and the supervisor then stops it, failed."""
    stores = durable_stores(job)
    if stores:
        log.error(
            "input partitions changed while job %s ran (%s), and the job has durable stores (%s): their "
            "state is kept per task, and a new partition count moves keys to other tasks, so the job is "
            "not restarted (Samza fails it too); its containers stopped with a final commit. See "
            "docs/running.md (input partitions added) for how to go on with the new count",
            job.job_key,
            describe(changes),
            ", ".join(stores),
        )
        return False
    log.info(
        "job %s: its containers stopped with a final commit; restarting the job with a new job model, so "
        "that the new partitions are read",
        job.job_key,
    )
    return True
