"""A new input with more partitions than the others, on the real broker: the changelog's refusal names the
store and why the job now has more tasks, and says the state would be split rather than only to delete the
changelog; a job keeping state over inputs of different partition counts is warned that they are not
co-partitioned (not refused: a one-partition control stream is legitimate)."""

from __future__ import annotations

import logging

import pytest
from count_job import WORDS, count_job
from job_fixtures import job_config, produce, run_job

from samsa.kafka import TopicMismatchError
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import warn_not_copartitioned
from samsa.streams import SystemStream

__all__ = ["job_config", "produce", "run_job"]

WARNED = "are not co-partitioned"


def test_a_new_input_with_more_partitions_is_refused_naming_the_store_the_input_and_the_split(
    job_config, topics, produce, run_job, kafka_admin, caplog
):
    words, words3, out = topics(2), topics(3), topics(1)
    changelog = f"{words}-counts-changelog"
    logged = {"stores.counts.changelog": f"kafka.{changelog}"}
    try:
        config = count_job(job_config, words, out, **logged)
        produce(words, [(w, w) for w in WORDS])
        run_job(config)
        assert WARNED not in caplog.text
        both = {**config, "task.inputs": f"kafka.{words},kafka.{words3}"}

        with pytest.raises(TopicMismatchError) as refused, caplog.at_level(logging.WARNING):
            run_job(both)

        message = str(refused.value)
        assert f"Topic {changelog!r} has partitions=2 but partitions=3 is required" in message, message
        assert "the changelog of store 'counts'" in message, message
        assert f"3 tasks because input kafka.{words3} has 3 partitions" in message, message
        assert f"kafka.{words} has 2" in message, message
        assert "per-key state would be split across tasks" in message, message
        assert f"Repartition kafka.{words3} to 2 partitions" in message, message
        assert "loses the store's state" in message, message
        (warning,) = [r.getMessage() for r in caplog.records if WARNED in r.getMessage()]
        assert "store counts" in warning and f"kafka.{words3} has 3, kafka.{words} has 2" in warning, warning
    finally:
        kafka_admin.delete_topics([changelog])


def _job(stores: bool = True, **extra: str) -> JobConfig:
    config = {
        "job.name": "copart",
        "task.class": "samsa_test_tasks:CountTask",
        "task.inputs": "kafka.words,kafka.control",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        **({"stores.counts.factory": "rocksdb"} if stores else {}),
        **extra,
    }
    return JobConfig(Config(config))


COUNTS = {SystemStream("kafka", "words"): 4, SystemStream("kafka", "control"): 1}


def test_inputs_of_different_partition_counts_warn_only_where_keyed_state_is_kept(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        warn_not_copartitioned(_job(), COUNTS)
    assert WARNED in caplog.text and "kafka.words has 4, kafka.control has 1 partitions" in caplog.text
    caplog.clear()
    quiet = [
        # A control stream every task reads whole is not grouped into tasks.
        _job(**{"task.broadcast.inputs": "kafka.control#0"}),
        # No store: nothing keyed is kept.
        _job(stores=False),
    ]
    with caplog.at_level(logging.WARNING):
        for job in quiet:
            warn_not_copartitioned(job, COUNTS)
        warn_not_copartitioned(
            _job(), {SystemStream("kafka", "words"): 4, SystemStream("kafka", "control"): 4}
        )
    assert WARNED not in caplog.text, caplog.text
