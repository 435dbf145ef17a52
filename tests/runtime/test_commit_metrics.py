"""Per task: when its last commit completed, each commit phase's timing, its stores' size on disk; and the
deserialization error counters exist at 0 from the task's start."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from count_job import count_job

from samsa.runtime.store_metrics import dir_size

PHASES = {"flush_stores", "flush_outputs", "snapshot", "local_checkpoint", "upload", "checkpoint", "cleanup"}


def test_a_run_records_its_last_commit_its_phases_and_its_store_size(
    job_config: Any, topics: Any, produce: Any, kafka_admin: Any, run_job: Any
) -> None:
    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in ["apple", "pear", "plum", "apple"]])
    changelog = f"{words}-counts-changelog"
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}"})
    before = time.time()
    try:
        (container,) = run_job(config)
    finally:
        kafka_admin.delete_topics([changelog])
    metrics = container.registry.snapshot()
    task = {"task": "Partition 0"}
    (last,) = metrics["samsa_last_commit_timestamp_seconds"]
    assert last["labels"] == task and before < last["value"] <= time.time()  # type: ignore[operator]
    phases = {r["labels"]["phase"]: r for r in metrics["samsa_commit_phase_seconds"]}  # type: ignore[index]
    assert set(phases) == PHASES
    assert all(r["count"] >= 2 for r in phases.values())  # the start-up commit and the final one at least
    (size,) = metrics["samsa_store_size_bytes"]
    assert size["labels"] == {**task, "store": "counts"}
    assert size["value"] > 0  # type: ignore[operator]


def test_deserialization_error_counters_start_at_0_for_every_task_and_input(
    job_config: Any, topics: Any, produce: Any, run_job: Any
) -> None:
    words = topics(2)
    produce(words, [(None, "fine")], partition=0)
    (container,) = run_job(job_config(f"kafka.{words}", topics(1)))
    rows = container.registry.snapshot()["samsa_deserialization_errors_total"]
    series = {(r["labels"]["task"], r["labels"]["topic"]): r["value"] for r in rows}  # type: ignore[index]
    assert series == {("Partition 0", words): 0, ("Partition 1", words): 0}


def test_dir_size_counts_the_files_below_and_is_0_for_a_missing_dir(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.sst").write_bytes(b"x" * 10)
    (tmp_path / "sub" / "b").write_bytes(b"y" * 5)
    assert dir_size(tmp_path) == 15
    assert dir_size(tmp_path / "gone") == 0
