"""A stopped job whose changelogged store holds state is refused at its next start when a grouped input grew
meanwhile (its keys moved to other tasks, even with the task count unchanged), on the real broker and
RocksDB; after its changelog and local state are deleted it starts over."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from count_job import WORDS, count_job, final_counts, run_cli
from topic_growth import grow, produce_new

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.cli import main
from samsa.kafka import KafkaAdmin, KafkaConsumer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator, coordinator_topic
from samsa.runtime.exceptions import StateKeysMovedError
from samsa.streams import SystemStream


def _two_input_count_job(
    job_config: Callable[..., dict[str, str]], a: str, b: str, out: str, changelog: str
) -> dict[str, str]:
    return count_job(
        job_config,
        a,
        out,
        **{"task.inputs": f"kafka.{a},kafka.{b}", "stores.counts.changelog": f"kafka.{changelog}"},
    )


def _ends(bootstrap: str, topics: tuple[str, ...]) -> dict[tuple[str, int], int]:
    """The high watermark of every partition of `topics`: what was ever written to them."""
    config = {"bootstrap.servers": bootstrap}
    with KafkaAdmin(config) as admin, KafkaConsumer(config) as consumer:
        counts = admin.require_topics(topics)
        return {(t, p): consumer.watermarks((t, p))[1] for t, n in counts.items() for p in range(n)}


def _local_state(config: dict[str, str]) -> Path:
    job = JobConfig(Config(config))
    return job.logged_store_dir / job.job_key


def _store_files(config: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Each file of the tasks' `counts` dirs and local checkpoints, with its size and modification time."""
    files = (f for d in _local_state(config).glob("*/counts*") for f in d.rglob("*") if f.is_file())
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in files}


def test_a_start_after_a_grouped_input_grew_is_refused_until_the_state_starts_over(
    broker_bootstrap, kafka_admin, job_config, topics, produce, read_topic, run_job, tmp_path, subprocess_env
):
    a, b, out = topics(4), topics(2), topics(1)
    changelog = f"{a}-counts-changelog"
    # Words of a and of b apart: a key of both would be counted in two tasks already (a has 4 partitions).
    to_a, to_b = random.Random(7).choices(WORDS[:4], k=30), random.Random(8).choices(WORDS[4:], k=30)
    produce(a, [(w, w) for w in to_a])
    produce(b, [(w, w) for w in to_b])
    config = _two_input_count_job(job_config, a, b, out, changelog)
    job = JobConfig(Config(config))
    try:
        run_job(config)
        assert final_counts(read_topic(out)) == Counter(to_a + to_b)
        stored = JobCoordinator(job).read_model()
        written = (out, changelog, checkpoint_topic(job.name, job.id), coordinator_topic(job))
        before, outputs = _ends(broker_bootstrap, written), read_topic(out)
        local = _store_files(config)
        assert local, "the store's local dirs"

        grow(broker_bootstrap, b, 4)  # still 4 tasks (a has 4): only the keys of b moved
        produce_new(broker_bootstrap, b, ["kiwi"], partition=3)

        with pytest.raises(StateKeysMovedError) as refused:
            JobCoordinator(job).prepare()
        message = str(refused.value)
        assert message.startswith(f"job {job.job_key}: "), message
        assert f"kafka.{b}: 2 -> 4 partitions" in message and f"kafka.{a}:" not in message, message
        assert f"store 'counts' (changelog kafka.{changelog})" in message, message
        assert f"delete changelog topic(s) {changelog}" in message, message

        # End to end: `samsa run` (the local supervisor) exits 2, a lone container 78 (not restarted).
        job_file = tmp_path / "job.yaml"
        job_file.write_text(json.dumps(config))
        proc = run_cli(job_file, subprocess_env)
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert f"kafka.{b}: 2 -> 4 partitions" in proc.stderr and "store 'counts'" in proc.stderr
        proc = run_cli(job_file, subprocess_env, "--container-id", "0")
        assert proc.returncode == 78, proc.stderr[-3000:]

        # The refused starts published, fenced, restored and committed nothing.
        assert JobCoordinator(job).read_model() == stored
        assert _ends(broker_bootstrap, written) == before
        assert _store_files(config) == local

        # Starting the state over: its changelog and local directories deleted and its changelog positions
        # dropped from the checkpoints (else refused as a lost changelog), the start goes through.
        assert "forget-changelog <job config> --store counts" in message, message
        kafka_admin.delete_topics([changelog])
        shutil.rmtree(_local_state(config))
        assert main(["checkpoint", "forget-changelog", str(job_file), "--store", "counts"]) == 0
        (container,) = run_job(config)
        assert container.model.input_counts[SystemStream("kafka", b)] == 4
        assert final_counts(read_topic(out)[len(outputs) :]) == {"k": 1}  # the new message, counted anew
    finally:
        kafka_admin.delete_topics([t for t, n in kafka_admin.partition_counts([changelog]).items() if n])


def test_an_empty_changelog_and_a_job_without_stores_start_with_the_new_model(
    broker_bootstrap, kafka_admin, job_config, topics, run_job
):
    a, b, out = topics(4), topics(2), topics(1)
    changelog = f"{a}-counts-changelog"
    stateful = _two_input_count_job(job_config, a, b, out, changelog)
    stateless = job_config(f"kafka.{a},kafka.{b}", out)
    try:
        for config in (stateful, stateless):
            run_job(config)  # no input: the changelog is created, and stays empty
        grow(broker_bootstrap, b, 4)
        for config in (stateful, stateless):
            model: Any = JobCoordinator(JobConfig(Config(config))).prepare()
            assert model.partition_counts()[SystemStream("kafka", b)] == 4
    finally:
        kafka_admin.delete_topics([changelog])


def test_a_grown_task_count_is_refused_naming_the_stream_before_the_changelog_size(
    broker_bootstrap, kafka_admin, job_config, topics, produce, run_job
):
    # One input of 2 partitions grown to 3: 3 tasks, a changelog of 2. The changelog's size would refuse the
    # start too, but only the partition change says why and what to do.
    words, out = topics(2), topics(1)
    changelog = f"{words}-counts-changelog"
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}"})
    try:
        produce(words, [("fig", "fig")])
        run_job(config)
        grow(broker_bootstrap, words, 3)
        with pytest.raises(StateKeysMovedError, match=rf"kafka\.{words}: 2 -> 3 partitions"):
            JobCoordinator(JobConfig(Config(config))).prepare()
        assert kafka_admin.partition_counts([changelog]) == {changelog: 2}
    finally:
        kafka_admin.delete_topics([changelog])


def test_a_store_with_both_backends_meets_the_changelog_refusal_first_naming_the_blob_store_fix(
    broker_bootstrap, kafka_admin, job_config, topics, produce, run_job, tmp_path
):
    # The coordinator refuses before any container restores a snapshot: one refusal, naming both fixes.
    a, b, out = topics(4), topics(2), topics(1)
    changelog = f"{a}-counts-changelog"
    config = {
        **_two_input_count_job(job_config, a, b, out, changelog),
        "stores.counts.backup.factories": "changelog,blobstore",
        "blobstore.local.dir": str(tmp_path / "blobs"),
    }
    try:
        produce(b, [("fig", "fig")])
        run_job(config)
        grow(broker_bootstrap, b, 4)
        with pytest.raises(StateKeysMovedError) as refused:
            JobCoordinator(JobConfig(Config(config))).prepare()
        assert "store(s) 'counts' are backed up to the blob store too" in str(refused.value)
        assert "new job.id" in str(refused.value)
    finally:
        kafka_admin.delete_topics([changelog])
