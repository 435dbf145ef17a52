"""Durable state on the real broker and RocksDB: changelog-backed stores survive crashes exactly."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
import systems_fixtures
from count_job import WORDS, count_job, final_counts, run_cli

# Every test here runs on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin


def _count_job(job_config, topics, words: str, out: str, **extra: str) -> dict[str, str]:
    return count_job(
        job_config, words, out, **{"stores.counts.changelog": f"kafka.{words}-counts-changelog", **extra}
    )


def test_state_survives_a_graceful_restart(job_config, topics, produce, read_topic, run_job, kafka_admin):
    words, out = topics(2), topics(2)
    first = random.Random(1).choices(WORDS, k=300)
    produce(words, [(w, w) for w in first])
    config = _count_job(job_config, topics, words, out)
    try:
        run_job(config)
        second = random.Random(2).choices(WORDS, k=200)
        produce(words, [(w, w) for w in second])
        run_job(
            config
        )  # a fresh start of the container: state comes back from the local checkpoint / changelog
        assert final_counts(read_topic(out)) == Counter(first + second)
    finally:
        kafka_admin.delete_topics([f"{words}-counts-changelog"])


def test_state_is_restored_from_the_changelog_on_a_new_host(
    job_config, topics, produce, read_topic, run_job, kafka_admin, tmp_path
):
    words, out = topics(2), topics(2)
    first = random.Random(3).choices(WORDS, k=300)
    produce(words, [(w, w) for w in first])
    config = _count_job(job_config, topics, words, out)
    try:
        run_job(config)
        second = random.Random(4).choices(WORDS, k=100)
        produce(words, [(w, w) for w in second])
        moved = {**config, "job.logged.store.base.dir": str(tmp_path / "other-host")}
        (container,) = run_job(moved)  # no local state at all: everything comes from the changelog
        assert final_counts(read_topic(out)) == Counter(first + second)
        restored = container.registry.snapshot()["samsa_store_restored_records"]
        assert sum(r["value"] for r in restored) >= len(set(first)), "the counts came back from the changelog"
        assert container.registry.snapshot()["samsa_container_restore_seconds"][0]["count"] == 1
    finally:
        kafka_admin.delete_topics([f"{words}-counts-changelog"])


@pytest.mark.parametrize("crash", ["during-processing", "after-snapshot", "after-upload", "after-checkpoint"])
def test_a_kill_9_anywhere_leaves_exact_counts(
    crash, job_config, topics, produce, read_topic, kafka_admin, tmp_path, subprocess_env
):
    words, out = topics(4), topics(4)
    sent = random.Random(5).choices(WORDS, k=1500)
    produce(words, [(w, w) for w in sent])
    marker = tmp_path / "crashed"
    extra = {"task.commit.ms": "100", "test.sleep.us": "300"}
    env = dict(subprocess_env)
    if crash == "during-processing":
        extra |= {"test.kill.at.value": "250", "test.kill.marker": str(marker)}
    else:
        # Skip the start-up commit and the first timer commit: crash in a commit made mid-run.
        env |= {"SAMSA_CRASH_AT": crash, "SAMSA_CRASH_ONCE": str(marker), "SAMSA_CRASH_SKIP": "2"}
    config = _count_job(job_config, topics, words, out, **extra)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    try:
        proc = run_cli(job_file, env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert marker.exists(), f"the container did crash ({crash})"
        assert "restarting" in proc.stderr
        # Outputs may repeat (at-least-once), but the store counted every input exactly once.
        assert final_counts(read_topic(out)) == Counter(sent)
    finally:
        kafka_admin.delete_topics([f"{words}-counts-changelog"])


def test_a_stop_during_restore_ends_cleanly_without_processing(
    job_config, topics, produce, read_topic, run_job, kafka_admin, tmp_path, caplog
):
    from samsa.runtime.config.config import Config
    from samsa.runtime.config.job import JobConfig
    from samsa.runtime.container import Container
    from samsa.runtime.coordinator import JobCoordinator

    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in random.Random(6).choices(WORDS, k=200)])
    config = _count_job(job_config, topics, words, out)
    try:
        run_job(config)
        produced = len(read_topic(out))
        produce(words, [("late", "late")])
        moved = {**config, "job.logged.store.base.dir": str(tmp_path / "new-host")}  # forces a replay
        job = JobConfig(Config(moved))
        container = Container(job, JobCoordinator(job).prepare().container("0"), until_caught_up=True)
        caplog.set_level("INFO", logger="samsa.runtime.container")
        container.stop()  # as a SIGTERM arriving while the stores restore
        assert container.run() is False
        assert "stopped while restoring" in caplog.text
        assert len(read_topic(out)) == produced, "nothing was processed"
    finally:
        kafka_admin.delete_topics([f"{words}-counts-changelog"])
