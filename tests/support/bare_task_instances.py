"""A TaskInstance of one input partition with no stores, collector or coordinator: for tests that call a
task's methods through the runtime's wrappers (user-code errors, exits)."""

from __future__ import annotations

from samsa import StreamTask
from samsa.runtime.job_model import TaskModel
from samsa.runtime.metrics import MetricsRegistry
from samsa.runtime.task_instance import TaskInstance
from samsa.streams import SystemStreamPartition


class _NoStores:
    def flush(self) -> None: ...

    def close(self) -> None: ...


def bare_task_instance(task: StreamTask, ssp: SystemStreamPartition) -> TaskInstance:
    """Task "Partition 0" reading `ssp`, no window timer, commits every minute."""
    return TaskInstance(
        TaskModel("Partition 0", (ssp,)),
        task,
        _NoStores(),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        MetricsRegistry(),
        -1,
        60_000,
    )
