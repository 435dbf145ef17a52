"""Watches a running job's inputs for a partition count other than its job model's (Samza's
StreamPartitionCountMonitor): a partition added while the job runs is in no task until the job restarts."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from samsa.kafka import TopicNotFoundError
from samsa.runtime.config.job import JobConfig
from samsa.stores.backends import store_backends
from samsa.stores.factory import store_specs
from samsa.streams import SystemStream

log = logging.getLogger(__name__)

FREQUENCY_KEY = "job.coordinator.monitor-partition-change.frequency.ms"

#: stream -> (its partition count in the job model, its count now)
Changes = dict[SystemStream, tuple[int, int]]


class PartitionCountMonitor:
    """Every `interval_s`, `fetch()`es the inputs' partition counts (one metadata request per system) on a
    thread of its own, so a slow broker never holds up its owner; `changes` holds the first difference from
    `expected` found, and then the watch ends."""

    def __init__(
        self,
        expected: Mapping[SystemStream, int],
        fetch: Callable[[], Mapping[SystemStream, int]],
        interval_s: float,
    ) -> None:
        self.expected = dict(expected)
        self._fetch = fetch
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False
        self._deleted: list[SystemStream] = []  # the inputs last found deleted (warned of once)
        #: The streams whose partition count changed (empty until one did).
        self.changes: Changes = {}

    def start(self) -> PartitionCountMonitor:
        # A daemon thread: a watch stuck in a metadata request never keeps the process alive.
        self._thread = threading.Thread(target=self._watch, name="samsa-partition-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def check(self) -> Changes:
        """One look now: the streams whose count differs from the model's (also kept in `changes`)."""
        counts = self._fetch()
        found = {
            ss: (n, counts[ss]) for ss, n in sorted(self.expected.items()) if ss in counts and counts[ss] != n
        }
        if found:
            self.changes = found
        return found

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if self.check():
                    return
            except TopicNotFoundError as e:
                deleted = sorted(ss for ss in self.expected if ss.stream in e.topics)
                if not deleted:
                    self._warn_failing(e)  # an output topic: the start-up check's advice fits
                elif deleted != self._deleted:
                    self._warn_deleted(deleted)
                self._deleted = deleted
                self._failing = True
                continue
            except Exception as e:
                self._warn_failing(e)
                self._failing = True
                continue
            self._failing = False
            self._deleted = []

    def _warn_failing(self, error: Exception) -> None:
        # The broker may be away for a while; the containers say so themselves. Logged once per run of
        # failures, then looked at again at the next interval.
        if not self._failing:
            log.warning(
                "could not read the input streams' partition counts (%s); looking again every %.0f s (%s)",
                error,
                self.interval_s,
                FREQUENCY_KEY,
            )

    def _warn_deleted(self, deleted: list[SystemStream]) -> None:
        # Not the start-up advice ("create them first"): the job ran on these topics, and still runs.
        for ss in deleted:
            log.warning(
                "input stream %s was deleted while the job ran: its %d partitions receive nothing now (the "
                "job's other inputs are still processed), and the job will not start again while it is "
                "missing. To read it again, recreate topic %r with %d partitions and restart the job (a "
                "recreated topic is read from its oldest offset); to go on without it, remove %s from "
                "task.inputs and restart the job. Looking again every %.0f s (%s)",
                ss,
                self.expected[ss],
                ss.stream,
                self.expected[ss],
                ss,
                self.interval_s,
                FREQUENCY_KEY,
            )


SWITCH_KEY = "job.coordinator.monitor-partition-change"


def monitor_interval_s(job: JobConfig) -> float | None:
    """`job.coordinator.monitor-partition-change.frequency.ms` in seconds; None when turned off (-1, or
    Samza's switch `job.coordinator.monitor-partition-change=false`)."""
    if not job.config.value(SWITCH_KEY):
        return None
    ms: int = job.config.value(FREQUENCY_KEY)
    return None if ms < 0 else ms / 1000


def describe(changes: Changes) -> str:
    """`kafka.clicks: 2 -> 3 partitions, ...`, for log lines."""
    return ", ".join(f"{ss}: {was} -> {now} partitions" for ss, (was, now) in changes.items())


def durable_stores(job: JobConfig) -> list[str]:
    """The job's stores with a backup (changelog or blob store): their state is kept per task, and a new
    partition count moves keys to other tasks."""
    specs = store_specs(job.config)
    return sorted(s for s, spec in specs.items() if store_backends(job.config, spec).durable)
