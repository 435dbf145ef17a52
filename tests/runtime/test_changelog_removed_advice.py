"""`stores.<s>.changelog` removed from a job that ran with it, on the real broker: the start is refused before
the store's local copy is deleted, the refusal says to set the changelog back (naming the topic the
checkpoint holds) or to give the state up with `samsa checkpoint forget-store`, and that way on works."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
from count_job import WORDS, count_job, final_counts, store_counts
from job_fixtures import job_config, produce, read_topic, run_job, subprocess_env

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.stores.exceptions import RestoreSourceError

__all__ = ["job_config", "produce", "read_topic", "run_job", "subprocess_env"]


def test_removing_a_changelog_is_refused_with_advice_that_can_be_followed(
    job_config, topics, produce, read_topic, run_job, tmp_path, kafka_admin, subprocess_env
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    logged = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}"})
    unlogged = {k: v for k, v in logged.items() if k != "stores.counts.changelog"}
    store_dir = (
        tmp_path / "state" / JobConfig(Config(logged)).job_key / "Partition_0" / "counts"
    )  # job_config's job.logged.store.base.dir
    try:
        produce(words, [(w, w) for w in WORDS])
        run_job(logged)
        assert store_counts(store_dir) == Counter(WORDS)

        with pytest.raises(RestoreSourceError) as refused:
            run_job(unlogged)

        message = str(refused.value)
        assert "store 'counts' of task 'Partition 0'" in message, message
        assert "before anything of the store is deleted" in message, message
        assert f"set stores.counts.changelog=kafka.{changelog} back" in message, message
        assert "samsa checkpoint forget-store <job config> --store counts" in message, message
        assert "restore.factories" not in message, "advice that needs the removed changelog key"
        assert store_counts(store_dir) == Counter(WORDS), "the store was deleted before the refusal"

        # Its way on: give the state up with the config as it is now (no changelog), then start.
        job_file = tmp_path / "unlogged.yaml"
        job_file.write_text(json.dumps(unlogged))
        command = ["checkpoint", "forget-store", str(job_file), "--store", "counts"]
        forget = subprocess.run(
            [sys.executable, "-m", "samsa.cli", *command],
            env=subprocess_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert forget.returncode == 0, forget.stdout + forget.stderr
        produce(words, [(WORDS[0], WORDS[0])])
        run_job(unlogged)
        assert final_counts(read_topic(out))[WORDS[0]] == 1, "the store did not start empty"
    finally:
        kafka_admin.delete_topics([changelog])
