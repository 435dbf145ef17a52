"""A restart long after its checkpoint (older than 0.9 x the changelog's min.compaction.lag.ms) still undoes
the changelog writes made after it, so the inputs read again from the checkpoint count once: real broker,
a container killed -9 right after a commit's sync phase (the changelog then holds writes past the
checkpoint)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from count_job import WORDS, committed_rows, count_job, final_counts

LAG_MS = 2000  # the changelog's min.compaction.lag.ms: the restart comes later than 0.9 x that


def _run(job_file: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One container of the job, in a subprocess, until caught up (no supervisor restarts it)."""
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", "--container-id", "0", "--until-caught-up", str(job_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("case", ["same-host", "other-host", "exactly-once"])
def test_writes_after_an_old_checkpoint_are_undone_and_inputs_count_once(
    case: str,
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    kafka_admin: Any,
    kafka_bootstrap: str,
    tmp_path: Path,
    subprocess_env: dict[str, str],
) -> None:
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    extra = {
        "stores.counts.changelog": f"kafka.{changelog}",
        "stores.counts.changelog.min.compaction.lag.ms": str(LAG_MS),
        "task.commit.ms": "60000",
    }
    if case == "exactly-once":
        extra |= {
            "job.processing.guarantee": "exactly_once",
            "task.commit.ms": "1000",
            "task.outputs": f"kafka.{out}",
        }
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(count_job(job_config, words, out, **extra)))
    first, second = random.Random(7).choices(WORDS, k=200), random.Random(8).choices(WORDS, k=100)
    try:
        produce(words, [(w, w) for w in first])
        done = _run(job_file, subprocess_env)
        assert done.returncode == 0, done.stderr[-3000:]
        produce(words, [(w, w) for w in second])
        # Crash in the next commit after the start-up one, once its changelog writes are flushed.
        crash = subprocess_env | {"SAMSA_CRASH_AT": "after-snapshot", "SAMSA_CRASH_SKIP": "1"}
        crashed = _run(job_file, crash)
        assert crashed.returncode == -9, crashed.stderr[-3000:]
        time.sleep(1.5 * LAG_MS / 1000)
        if case == "other-host":
            shutil.rmtree(tmp_path / "state")
        restarted = _run(job_file, subprocess_env)
        assert restarted.returncode == 0, restarted.stderr[-3000:]
        plan = [line for line in restarted.stderr.splitlines() if "restore plan" in line]
        assert plan and "undoing" in plan[0], restarted.stderr[-3000:]
        assert "KEPT" not in restarted.stderr, restarted.stderr[-3000:]
        rows = committed_rows(kafka_bootstrap, out) if case == "exactly-once" else read_topic(out)
        assert final_counts(rows) == Counter(first + second)
    finally:
        kafka_admin.delete_topics([changelog])
