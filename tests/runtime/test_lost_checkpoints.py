"""A job whose checkpoint topic was deleted is refused rather than counting its inputs again on top of its
restored state; `samsa checkpoint reset` is the way on that keeps the state, a first start still works."""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from pathlib import Path

import pytest
from count_job import WORDS, committed_rows, count_job, final_counts, run_cli
from recreated_topics import end_offset

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.lost_checkpoints import CheckpointsLostError


def _state_keys(kind: str, changelog: str, blobs: Path, out: str = "") -> dict[str, str]:
    if kind == "blobstore":
        return {"stores.backup.factories": "blobstore", "blobstore.local.dir": str(blobs)}
    eos = (
        {"job.processing.guarantee": "exactly_once", "task.outputs": f"kafka.{out}"}
        if kind == "exactly-once"
        else {}
    )
    return {"stores.counts.changelog": f"kafka.{changelog}", **eos}


@pytest.mark.parametrize("kind", ["changelog", "exactly-once", "blobstore"])
def test_a_deleted_checkpoint_topic_refuses_the_start_until_reset(
    kind, job_config, topics, produce, read_topic, run_job, kafka_admin, kafka_bootstrap, tmp_path
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    first = random.Random(1).choices(WORDS, k=300)
    produce(words, [(w, w) for w in first])
    config = count_job(job_config, words, out, **_state_keys(kind, changelog, tmp_path / "blobs", out))
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    try:
        run_job(config)  # a genuine first start
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(first)
        kafka_admin.delete_topics([checkpoint_topic(job.name, job.id)])
        sent = len(committed_rows(kafka_bootstrap, out))
        logged = end_offset(kafka_bootstrap, changelog) if kind != "blobstore" else 0

        if kind != "blobstore":
            # A blob-backed store's state is named by checkpoints only: no refusal (that start would start
            # the store empty, `test_a_blob_backed_store_without_a_checkpoint_starts_empty_and_counts_once`).
            with pytest.raises(CheckpointsLostError) as refused:
                run_job(config)
            message = str(refused.value)
            for named in (job.job_key, checkpoint_topic(job.name, job.id), "'counts'", "checkpoint reset"):
                assert named in message, message
            assert len(committed_rows(kafka_bootstrap, out)) == sent, "the refused start processed nothing"
            assert end_offset(kafka_bootstrap, changelog) == logged, "nor restored or wrote anything"

        # Fresh checkpoints at the inputs' ends keep the state: new inputs are counted once on top of it
        # (a blob-backed store's local state, which the fresh checkpoints name no snapshot of, included).
        kafka_admin.delete_topics([checkpoint_topic(job.name, job.id)])  # reset works without the topic too
        assert main(["checkpoint", "reset", str(job_file), "--to", "latest"]) == 0
        second = random.Random(2).choices(WORDS, k=100)
        produce(words, [(w, w) for w in second])
        run_job(config)
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(first + second)
    finally:
        if kind != "blobstore":
            kafka_admin.delete_topics([changelog])


def test_a_blob_backed_store_without_a_checkpoint_starts_empty_and_counts_once(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap, tmp_path, caplog
):
    # No checkpoint names a snapshot, and the inputs are read again: kept, the local state counted each of
    # them twice (the reviewer: 5000 -> 10000).
    words, out = topics(1), topics(1)
    sent = random.Random(4).choices(WORDS, k=50)
    produce(words, [(w, w) for w in sent])
    config = count_job(job_config, words, out, **_state_keys("blobstore", "", tmp_path / "blobs"))
    job = JobConfig(Config(config))
    run_job(config)
    kafka_admin.delete_topics([checkpoint_topic(job.name, job.id)])
    with caplog.at_level(logging.WARNING, logger="samsa.stores.blobstore.restore"):
        run_job(config)
    assert "has no checkpoint, so no committed snapshot" in caplog.text, caplog.text
    assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(sent)


def test_samsa_run_exits_2_on_a_deleted_checkpoint_topic(
    job_config, topics, produce, read_topic, run_job, kafka_admin, tmp_path, subprocess_env
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    produce(words, [(w, w) for w in random.Random(3).choices(WORDS, k=100)])
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}"})
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    try:
        run_job(config)
        sent = len(read_topic(out))
        kafka_admin.delete_topics([checkpoint_topic(job.name, job.id)])
        proc = run_cli(job_file, subprocess_env)
        assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "has started before" in proc.stderr and "restarting" not in proc.stderr, proc.stderr[-3000:]
        assert len(read_topic(out)) == sent
    finally:
        kafka_admin.delete_topics([changelog])


def test_a_job_without_state_starts_again_without_its_checkpoints(
    job_config, topics, produce, read_topic, run_job, kafka_admin
):
    words, out = topics(1), topics(1)
    produce(words, [("a", "a"), ("b", "b")])
    config = job_config(f"kafka.{words}", out)
    job = JobConfig(Config(config))
    run_job(config)
    kafka_admin.delete_topics([checkpoint_topic(job.name, job.id)])
    run_job(config)  # nothing durable to count twice: it reads its inputs again, as before
    assert len(read_topic(out)) == 4


def test_reset_of_a_job_that_never_ran_still_fails(job_config, topics, tmp_path):
    config = job_config(f"kafka.{topics(1)}", topics(1))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    assert main(["checkpoint", "reset", str(job_file), "--to", "latest"]) != 0
