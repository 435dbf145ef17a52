"""Restore is visible in the metrics while it runs: the endpoint is served from before it, a gauge says the
container restores, and per store the records restored so far and those left follow the restore."""

from __future__ import annotations

import math
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from count_job import count_job

from samsa.kafka.embedded import free_port
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.metrics import MetricsRegistry
from samsa.runtime.store_metrics import restore_gauges
from samsa.stores.backend import RestoreProgress, TaskStoresContext
from samsa.stores.storage_manager import ContainerStorage


def _values(registry: MetricsRegistry, name: str) -> dict[tuple[str, str], float]:
    rows = registry.snapshot().get(name, [])
    return {(r["labels"]["task"], r["labels"]["store"]): r["value"] for r in rows}  # type: ignore[index]


def test_the_gauges_follow_the_progress_the_restore_updates(tmp_path: Path) -> None:
    context = TaskStoresContext("job-1", "Partition 3", 3, {"counts": tmp_path / "counts"}, {"counts": {}})
    registry = MetricsRegistry()
    restore_gauges(registry, [context], ["counts"])
    key = ("Partition 3", "counts")
    # Registered before the restore plans the store: nothing to restore yet.
    assert _values(registry, "samsa_store_restore_remaining_records") == {key: 0}
    progress = context.progress.setdefault("counts", RestoreProgress("Partition 3", "counts"))
    assert math.isnan(_values(registry, "samsa_store_restore_remaining_records")[key]), "unknown yet"
    progress.total_records = 100
    progress.records, progress.bytes = 30, 4_000
    assert _values(registry, "samsa_store_restore_remaining_records") == {key: 70}
    assert _values(registry, "samsa_store_restored_records") == {key: 30}
    assert _values(registry, "samsa_store_restored_bytes") == {key: 4_000}
    progress.records, progress.done = 100, True
    assert _values(registry, "samsa_store_restore_remaining_records") == {key: 0}
    assert _values(registry, "samsa_store_restored_records") == {key: 100}


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def test_metrics_are_served_during_the_restore_with_its_progress(
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_admin: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in ["apple", "pear", "plum", "apple", "fig"]])
    changelog = f"{words}-counts-changelog"
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}"})
    port = free_port()
    scrapes: list[str] = []
    restore = ContainerStorage.restore

    def scraped_restore(self: ContainerStorage, *args: Any, **kwargs: Any) -> None:
        scrapes.append(_scrape(port))  # as the restore begins
        restore(self, *args, **kwargs)
        scrapes.append(_scrape(port))  # as it ends, the container still restoring

    try:
        job = JobConfig(Config(config))
        Container(job, JobCoordinator(job).prepare().container("0"), until_caught_up=True).run()
        # Another host: no local state, every count comes back from the changelog.
        moved = {
            **config,
            "job.logged.store.base.dir": str(tmp_path / "other-host"),
            "metrics.prometheus.port": str(port),
        }
        monkeypatch.setattr(ContainerStorage, "restore", scraped_restore)
        job = JobConfig(Config(moved))
        container = Container(job, JobCoordinator(job).prepare().container("0"), until_caught_up=True)
        container.run()
    finally:
        kafka_admin.delete_topics([changelog])
    begun, ended = scrapes
    series = '{task="Partition 0",store="counts"}'
    assert 'samsa_container_restoring{container="0"} 1\n' in begun
    assert f"samsa_store_restored_records{series} 0\n" in begun
    assert f"samsa_store_restore_remaining_records{series} " in begun
    assert 'samsa_container_restoring{container="0"} 1\n' in ended
    restored = re.search(rf"^samsa_store_restored_records{re.escape(series)} (\d+)$", ended, re.M)
    assert restored is not None and int(restored[1]) >= 4, ended  # apple, pear, plum, fig at least
    assert f"samsa_store_restore_remaining_records{series} 0\n" in ended
    final = container.registry.snapshot()
    assert final["samsa_container_restoring"] == [{"labels": {"container": "0"}, "value": 0}]
