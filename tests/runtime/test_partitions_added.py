"""An input partition added since the job last ran (or while it ran) starts at its oldest offset: it holds
only messages the job never saw, and `samza.offset.default=upcoming` would skip them unread."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from partition_test_tasks import StreamRecordTask
from topic_growth import grow, produce_new

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig, StreamSettings
from samsa.runtime.offsets import start_offset
from samsa.streams import SystemStream, SystemStreamPartition

CLICKS = SystemStream("kafka", "clicks")
P2 = SystemStreamPartition("kafka", "clicks", 2)


def _settings(default: str = "upcoming", reset: bool = False) -> StreamSettings:
    config = {
        "job.name": "j",
        "task.class": "partition_test_tasks:StreamRecordTask",
        "task.inputs": "kafka.clicks",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "systems.kafka.samza.offset.default": default,
        "systems.kafka.streams.clicks.samza.reset.offset": str(reset).lower(),
    }
    return JobConfig(Config(config)).stream(CLICKS)


# -- where a partition starts -------------------------------------------------------------------------
def test_a_partition_without_a_checkpoint_of_a_checkpointed_stream_starts_at_its_oldest_offset(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, "samsa.runtime.offsets"):
        assert start_offset(P2, _settings("upcoming"), None, (3, 10), added_since=True) == 3
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("kafka.clicks#2: ")
    assert "added since" in record.getMessage() and "samza.offset.default=upcoming" in record.getMessage()
    assert start_offset(P2, _settings("oldest"), None, (3, 10), added_since=True) == 3


def test_a_stream_the_job_never_checkpointed_starts_at_samza_offset_default() -> None:
    # A stream new to task.inputs: where it starts is the user's choice.
    assert start_offset(P2, _settings("upcoming"), None, (3, 10), added_since=False) == 10
    assert start_offset(P2, _settings("oldest"), None, (3, 10), added_since=False) == 3


def test_a_checkpoint_is_kept_within_the_partition_and_reset_offset_ignores_it() -> None:
    assert start_offset(P2, _settings(), 5, (3, 10), added_since=True) == 5
    assert start_offset(P2, _settings(), 1, (3, 10), added_since=True) == 3  # deleted by retention
    assert start_offset(P2, _settings(), 12, (3, 10), added_since=True) == 10  # topic recreated
    assert start_offset(P2, _settings(reset=True), 5, (3, 10), added_since=True) == 10
    assert start_offset(P2, _settings("oldest", reset=True), 5, (3, 10), added_since=True) == 3


# -- on the broker ------------------------------------------------------------------------------------
def test_messages_written_to_a_partition_added_between_runs_are_processed(
    broker_bootstrap, job_config, topics, produce, run_job
):
    inp, out = topics(2), topics(1)
    config = job_config(
        f"kafka.{inp}",
        out,
        task="partition_test_tasks:StreamRecordTask",
        **{"systems.kafka.samza.offset.default": "upcoming", "job.container.count": "2"},
    )
    run_job(config)  # nothing to read: checkpoints Partition 0 and 1 at their (empty) ends
    produce(inp, [("k", "0")], partition=0)
    grow(broker_bootstrap, inp, 3)
    produce_new(broker_bootstrap, inp, [str(i) for i in range(3)], partition=2)
    StreamRecordTask.SEEN.clear()
    containers = run_job(config)
    assert sorted(t.name for c in containers for t in c.model.tasks) == [f"Partition {n}" for n in range(3)]
    assert Counter((t, p, o) for t, _, p, o in StreamRecordTask.SEEN) == Counter(
        {
            ("Partition 0", 0, 0): 1,
            ("Partition 2", 2, 0): 1,
            ("Partition 2", 2, 1): 1,
            ("Partition 2", 2, 2): 1,
        }
    )
    # Checkpointed now: the next start resumes partition 2 where it stopped, as any other.
    produce_new(broker_bootstrap, inp, ["3"], partition=2)
    StreamRecordTask.SEEN.clear()
    run_job(config)
    assert [(t, p, o) for t, _, p, o in StreamRecordTask.SEEN] == [("Partition 2", 2, 3)]


def test_a_partition_grown_under_an_existing_task_starts_at_its_oldest_offset(
    broker_bootstrap, job_config, topics, produce, run_job
):
    # clicks has 3 partitions, views 2: task Partition 2 exists, with a checkpoint, before views grows.
    clicks, views, out = topics(3), topics(2), topics(1)
    config = job_config(
        f"kafka.{clicks},kafka.{views}",
        out,
        task="partition_test_tasks:StreamRecordTask",
        **{"systems.kafka.samza.offset.default": "upcoming"},
    )
    run_job(config)
    grow(broker_bootstrap, views, 3)
    produce_new(broker_bootstrap, views, ["v"], partition=2)
    StreamRecordTask.SEEN.clear()
    run_job(config)
    assert list(StreamRecordTask.SEEN) == [("Partition 2", views, 2, 0)]
