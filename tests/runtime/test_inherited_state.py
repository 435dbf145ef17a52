"""A job that never started, whose store's changelog already holds committed data (another job's state, or
the same job's under another job.id), is refused rather than taking that state over and counting its inputs
again on top of it; Samza's task.transactional.state.retain.existing.state takes it over (true) or starts
the store empty (false) on purpose."""

from __future__ import annotations

import json
import logging
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from count_job import WORDS, committed_rows, count_job, final_counts, run_cli
from recreated_topics import end_offset

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.exactly_once.changelog import abort_record
from samsa.exactly_once.protocol import Producer
from samsa.kafka import KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.keys import RETAIN_EXISTING_STATE
from samsa.runtime.coordinator import coordinator_topic
from samsa.runtime.inherited_state import InheritedStateError


def _first_job(job_config, topics, produce, run_job, kafka_bootstrap, sent):
    """Job a counts `sent` into its store `counts`, logged to an explicitly named changelog."""
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    produce(words, [(w, w) for w in sent])
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}"})
    run_job(config)
    assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(sent)
    return config, words, changelog


def _second_job(job_config, topics, first, words, kind, **extra):
    """Job b on the same input and changelog: another job, or job a redeployed under a new job.id."""
    out = topics(1)
    if kind == "new-job-id":
        config = {
            **first,
            "job.id": "2",
            "test.output": out,
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
        }
        config.update(extra)
    else:
        changelog = first["stores.counts.changelog"]
        config = count_job(job_config, words, out, **{"stores.counts.changelog": changelog, **extra})
    return config, out


def _drop_internal_topics(kafka_admin, config) -> None:
    """A second job.id's checkpoint and coordinator topics (`job_config` deletes its own jobs' only)."""
    job = JobConfig(Config(config))
    internal = [checkpoint_topic(job.name, job.id), coordinator_topic(job)]
    existing = kafka_admin.partition_counts(internal)
    kafka_admin.delete_topics([t for t, n in existing.items() if n is not None])


@pytest.mark.parametrize("kind", ["another-job", "new-job-id"])
def test_a_first_start_on_a_changelog_holding_data_is_refused(
    kind, job_config, topics, produce, read_topic, run_job, kafka_admin, kafka_bootstrap
):
    sent = random.Random(11).choices(WORDS, k=120)
    first, words, changelog = _first_job(job_config, topics, produce, run_job, kafka_bootstrap, sent)
    second, out = _second_job(job_config, topics, first, words, kind)
    logged = end_offset(kafka_bootstrap, changelog)
    try:
        with pytest.raises(InheritedStateError) as refused:
            run_job(second)  # before: it took job a's counts over and counted `sent` again (2x)
        message = str(refused.value)
        job = JobConfig(Config(second))
        for named in (job.job_key, "'counts'", changelog, f"up to {logged} record(s)", RETAIN_EXISTING_STATE):
            assert named in message, message
        assert "has never started" in message and "delete topic" in message, message
        assert read_topic(out) == [], "the refused start processed nothing"
        assert end_offset(kafka_bootstrap, changelog) == logged, "nor restored or wrote anything"
    finally:
        kafka_admin.delete_topics([changelog])
        if kind == "new-job-id":
            _drop_internal_topics(kafka_admin, second)


def test_retain_existing_state_true_takes_the_state_over_on_purpose(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap
):
    sent = random.Random(12).choices(WORDS, k=80)
    first, words, changelog = _first_job(job_config, topics, produce, run_job, kafka_bootstrap, sent)
    second, out = _second_job(
        job_config, topics, first, words, "another-job", **{RETAIN_EXISTING_STATE: "true"}
    )
    try:
        run_job(second)
        # Job a's counts, then the same input read again from samza.offset.default: what was asked for.
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(sent + sent)
    finally:
        kafka_admin.delete_topics([changelog])


def test_retain_existing_state_false_starts_the_store_empty_on_every_host(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap, tmp_path
):
    sent = random.Random(13).choices(WORDS, k=80)
    first, words, changelog = _first_job(job_config, topics, produce, run_job, kafka_bootstrap, sent)
    second, out = _second_job(
        job_config, topics, first, words, "new-job-id", **{RETAIN_EXISTING_STATE: "false"}
    )
    try:
        run_job(second)
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(sent)
        # Another host (no local state): the changelog was undone at the first start, so what it holds now
        # is job b's own counts only.
        shutil.rmtree(tmp_path / "state" / JobConfig(Config(second)).job_key)
        more = random.Random(14).choices(WORDS, k=30)
        produce(words, [(w, w) for w in more])
        run_job(second)
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(sent + more)
    finally:
        kafka_admin.delete_topics([changelog])
        _drop_internal_topics(kafka_admin, second)


def test_a_changelog_of_control_records_only_does_not_refuse_a_first_start(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap
):
    words, out = topics(1), topics(1)
    changelog = topics(1, {"cleanup.policy": "compact", "min.compaction.lag.ms": "14400000"})
    sent = random.Random(15).choices(WORDS, k=40)
    produce(words, [(w, w) for w in sent])
    eos = {"job.processing.guarantee": "exactly_once", "task.outputs": f"kafka.{out}"}
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}", **eos})
    job = JobConfig(Config(config))
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    try:
        # What an exactly-once start that died before its start record leaves: abort records, no data.
        key, value, headers = abort_record(Producer.of(job.name, job.id, "Partition 0"), 1, 0)
        producer.send(changelog, value, key, 0, headers)
        producer.flush()
    finally:
        producer.close()
    run_job(config)
    assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(sent)


def test_a_store_added_to_a_job_that_ran_keeps_what_its_changelog_holds(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap, caplog
):
    sent = random.Random(16).choices(WORDS, k=40)
    first, _, changelog = _first_job(job_config, topics, produce, run_job, kafka_bootstrap, sent)
    extra = topics(1, {"cleanup.policy": "compact", "min.compaction.lag.ms": "14400000"})
    produce(extra, [("kept", "1")], partition=0)
    added = {
        **first,
        "stores.extra.factory": "rocksdb",
        "stores.extra.key.serde": "string",
        "stores.extra.msg.serde": "string",
        "stores.extra.changelog": f"kafka.{extra}",
    }
    try:
        with caplog.at_level(logging.INFO, logger="samsa.stores.changelog.restore"):
            run_job(added)  # the job has checkpoints: the new store takes its changelog over, as before
        assert "store extra of task Partition 0: no checkpoint: restoring all" in caplog.text, caplog.text
    finally:
        kafka_admin.delete_topics([changelog])


def test_samsa_run_exits_2_on_a_changelog_holding_another_jobs_state(
    job_config, topics, produce, read_topic, run_job, kafka_admin, kafka_bootstrap, tmp_path, subprocess_env
):
    sent = random.Random(17).choices(WORDS, k=40)
    first, words, changelog = _first_job(job_config, topics, produce, run_job, kafka_bootstrap, sent)
    second, out = _second_job(job_config, topics, first, words, "another-job")
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(second))
    try:
        proc = run_cli(Path(job_file), subprocess_env)
        assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "has never started" in proc.stderr and "restarting" not in proc.stderr, proc.stderr[-3000:]
        assert read_topic(out) == []
    finally:
        kafka_admin.delete_topics([changelog])
