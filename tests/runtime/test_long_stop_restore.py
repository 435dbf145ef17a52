"""A restart long after a clean stop (older than 0.9 x the changelog's delete.retention.ms) reuses the local
copy and undoes what follows the checkpoint, without rewriting the changelog: an exactly-once stop leaves
only its commit record after the checkpoint, no gap, so no delete can be gone (it rewrote every key of the
store at each such restart, and recorded that as a rebuild in the checkpoint). Real broker, containers in
subprocesses."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from count_job import WORDS, count_job

RETENTION_MS = 2000  # the changelog's delete.retention.ms: the restart comes later than 0.9 x that


def _run(job_file: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One container of the job, in a subprocess, until caught up."""
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", "--container-id", "0", "--until-caught-up", str(job_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_an_exactly_once_restart_long_after_a_clean_stop_does_not_rewrite_the_changelog(
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_admin: Any,
    tmp_path: Path,
    subprocess_env: dict[str, str],
) -> None:
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    extra = {
        "stores.counts.changelog": f"kafka.{changelog}",
        "stores.counts.changelog.min.compaction.lag.ms": "1000",
        "stores.counts.changelog.delete.retention.ms": str(RETENTION_MS),
        "job.processing.guarantee": "exactly_once",
        "task.commit.ms": "500",
        "task.outputs": f"kafka.{out}",
    }
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(count_job(job_config, words, out, **extra)))
    try:
        produce(words, [(w, w) for w in random.Random(7).choices(WORDS, k=200)])
        done = _run(job_file, subprocess_env)
        assert done.returncode == 0, done.stderr[-3000:]
        time.sleep(1.5 * RETENTION_MS / 1000)
        again = _run(job_file, subprocess_env)
        assert again.returncode == 0, again.stderr[-3000:]
        plan = [line for line in again.stderr.splitlines() if "restore plan" in line]
        assert plan and "reusing" in plan[0] and "show a gap" in plan[0], again.stderr[-3000:]
        assert "seeded changelog" not in again.stderr, again.stderr[-3000:]
        assert "recorded in its checkpoint" not in again.stderr, again.stderr[-3000:]
    finally:
        kafka_admin.delete_topics([changelog])
