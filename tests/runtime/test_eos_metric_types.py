"""The exactly-once counts (`samsa_eos_*_total`) are exposed as Prometheus counters, not gauges: `rate()`
and `increase()` and OpenMetrics tooling expect a `_total` series to be a counter."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from samsa.runtime.eos_tasks import ExactlyOnceTasks
from samsa.runtime.metrics import MetricsRegistry
from samsa.runtime.prometheus import render


def test_every_eos_total_series_is_typed_counter_and_reads_its_source() -> None:
    registry = MetricsRegistry()
    tasks: Any = object.__new__(ExactlyOnceTasks)  # only _metrics is under test: no job, broker or stores
    tasks._registry, tasks._alignment_wait = registry, {}
    tasks.job = SimpleNamespace(eos_barrier_timeout_ms=1000)
    aligner = SimpleNamespace(
        duplicates_dropped=5, stale_dropped=6, waiting_for=lambda: [], alignment_wait=lambda: 0.0
    )
    eos = SimpleNamespace(
        versions_committed=1,
        rewinds=2,
        reread_messages=3,
        versions_merged=4,
        aligner=aligner,
        buffer=SimpleNamespace(messages=0, bytes_used=0),
    )
    tasks._metrics(SimpleNamespace(name="Partition 0"), eos)
    lines = render(registry).splitlines()
    types = {line.split()[2]: line.split()[3] for line in lines if line.startswith("# TYPE ")}
    totals = {name: kind for name, kind in types.items() if name.endswith("_total")}
    assert totals == {
        "samsa_eos_versions_committed_total": "counter",
        "samsa_eos_rewinds_total": "counter",
        "samsa_eos_reread_messages_total": "counter",
        "samsa_eos_versions_merged_total": "counter",
        "samsa_eos_duplicates_dropped_total": "counter",
        "samsa_eos_stale_dropped_total": "counter",
    }
    values = {line.split("{")[0]: line.split()[-1] for line in lines if not line.startswith("#")}
    assert values["samsa_eos_rewinds_total"] == "2" and values["samsa_eos_stale_dropped_total"] == "6"
