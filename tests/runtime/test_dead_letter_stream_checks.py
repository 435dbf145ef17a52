"""The dead-letter stream (`task.deserialization.dlq.stream`) is a topic of its own: never one the job
reads, a store's changelog or an internal topic; set without the dlq policy, it is a warning."""

from __future__ import annotations

import logging

import pytest

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.validation import check_job

DLQ_KEY = "task.deserialization.dlq.stream"


def job(**extra: str) -> JobConfig:
    """A dlq-policy job reading kafka.dl-in into store `sums` (changelog kafka.dl-changelog), plus `extra`
    keys (`__` for dots)."""
    config = {
        "job.name": "dl",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.dl-in",
        "task.outputs": "kafka.dl-out",
        "task.deserialization.error.policy": "dlq",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "stores.sums.factory": "rocksdb",
        "stores.sums.changelog": "kafka.dl-changelog",
        "stores.adj.factory": "inmemory",
        "stores.adj.adstore.input": "kafka.dl-adj",
        "task.broadcast.inputs": "kafka.dl-bcast#0",
    }
    config.update({k.replace("__", "."): v for k, v in extra.items()})
    return JobConfig(Config(config))


def refused(config: JobConfig) -> str:
    with pytest.raises(ConfigError) as info:
        check_job(config)
    return str(info.value)


@pytest.mark.parametrize(
    ("stream", "role"),
    [
        ("dl-in", "an input"),
        ("dl-bcast", "a broadcast input"),
        ("dl-adj", "the adjunct input of store adj"),
    ],
)
def test_a_dead_letter_stream_the_job_reads_is_refused_as_it_would_loop(stream: str, role: str) -> None:
    # Each bad record sent there would be read again and sent again: 1,360 sends in 10 s in the review.
    message = refused(job(**{DLQ_KEY: f"kafka.{stream}"}))
    assert message.startswith(f"{DLQ_KEY} names kafka.{stream}, which is {role} of the job; ")
    assert "read again" in message and "a topic of its own" in message
    assert "delete" not in message


@pytest.mark.parametrize(
    ("stream", "role"),
    [
        ("dl-changelog", "the changelog of store sums"),
        ("__samsa_checkpoint_ver_1_for_dl_1", "the checkpoint topic"),
        ("__samsa_coordinator_dl_1", "the coordinator topic"),
    ],
)
def test_a_dead_letter_stream_on_a_changelog_or_internal_topic_is_refused(stream: str, role: str) -> None:
    message = refused(job(**{DLQ_KEY: f"kafka.{stream}"}))
    assert message.startswith(f"{DLQ_KEY} names kafka.{stream}, which is {role} of the job; ")
    assert "corrupt it" in message


def test_the_default_dead_letter_stream_named_as_an_input_is_refused_naming_the_key_to_set() -> None:
    config = job(task__inputs="kafka.samsa-dlq-dl-1")
    message = refused(config)
    assert message.startswith(
        "the default dead-letter stream kafka.samsa-dlq-dl-1, which is an input of the job; "
    )
    assert f"set {DLQ_KEY} to a topic of its own" in message


def test_a_dead_letter_stream_of_its_own_or_an_output_passes() -> None:
    check_job(job(**{DLQ_KEY: "kafka.dl-dead"}))
    check_job(job(**{DLQ_KEY: "kafka.dl-out"}))  # nothing reads an output back into the job
    check_job(job())  # the default, samsa-dlq-dl-1


def test_an_input_named_as_dead_letter_stream_without_the_dlq_policy_is_only_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = job(**{DLQ_KEY: "kafka.dl-in", "task.deserialization.error.policy": "skip"})
    check_job(config)  # no record is sent there: nothing loops
    check_job(config)  # a supervisor prepares the job again: warned once
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{DLQ_KEY}=kafka.dl-in is set, but task.deserialization.error.policy=skip")
    assert "set task.deserialization.error.policy=dlq to use it, or remove the key" in warnings[0]


def test_no_warning_without_the_key_or_with_the_dlq_policy(caplog: pytest.LogCaptureFixture) -> None:
    check_job(job(**{"task.deserialization.error.policy": "fail"}))
    check_job(job(**{DLQ_KEY: "kafka.dl-dead"}))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
