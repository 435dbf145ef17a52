"""A word count that first records what its store holds: what a task sees of a bootstrapped store."""

from __future__ import annotations

from typing import Any

from samsa_test_tasks import CountTask

from samsa import TaskContext


class ProbeCountTask(CountTask):
    """`CountTask`, whose init lists its `counts` store into `SEEN[task name]` before any message."""

    SEEN: dict[str, dict[str, Any]] = {}

    def init(self, context: TaskContext) -> None:
        super().init(context)
        ProbeCountTask.SEEN[context.task_name] = dict(self.store.all())
