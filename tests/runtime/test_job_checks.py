"""Start-up checks of a job's streams: per-stream keys name one of its streams, a changelog its own topic."""

from __future__ import annotations

import logging

import pytest

from samsa.exceptions import SamsaError
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.validation import check_job


def job(raw: dict[str, str] | None = None, **extra: str) -> JobConfig:
    """A job reading kafka.sums-in into store `sums`, plus `raw` keys and `extra` ones (`__` for dots)."""
    config = {
        "job.name": "sums",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.sums-in",
        "task.outputs": "kafka.sums-out",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "stores.sums.factory": "rocksdb",
        "stores.sums.changelog": "kafka.sums-changelog",
    }
    config.update({k.replace("__", "."): v for k, v in extra.items()})
    return JobConfig(Config({**config, **(raw or {})}))


def check_error(raw: dict[str, str] | None = None, **extra: str) -> str:
    with pytest.raises(SamsaError) as info:
        check_job(job(raw, **extra))
    return str(info.value)


# -- per-stream keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("samza.offset.default", "oldest"),
        ("samza.reset.offset", "true"),
        ("samza.bootstrap", "true"),
    ],
)
def test_a_consumption_key_naming_no_stream_of_the_job_is_an_error(setting: str, value: str) -> None:
    key = f"systems.kafka.streams.sums-inn.{setting}"
    message = check_error({key: value})
    assert message.startswith(f"{key}: stream kafka.sums-inn is none of the job's streams")
    assert "kafka.sums-in (an input)" in message and "kafka.sums-out (an output)" in message
    assert "kafka.sums-changelog (the changelog of store sums)" in message
    assert "did you mean kafka.sums-in?" in message


def test_a_stream_of_another_system_is_not_the_jobs_stream() -> None:
    message = check_error(
        systems__other__samza__factory="kafka",
        systems__other__bootstrap__servers="localhost:9093",
        raw={"systems.other.streams.sums-in.samza.offset.default": "oldest"},
    )
    assert "stream other.sums-in is none of the job's streams" in message


def test_a_serde_key_of_a_stream_sent_to_outside_task_outputs_passes_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As the README's word count: its output stream's serde, the stream not in task.outputs (as in Samza).
    # It may also be a typo that silently leaves the stream meant on the system's serde: a warning.
    key = "systems.kafka.streams.sent-unlisted.samza.msg.serde"
    checked = job({key: "string"})
    with caplog.at_level(logging.INFO, "samsa.runtime.validation"):
        check_job(checked)
        check_job(checked)  # a supervisor prepares the job again on a partition change: still one
    (record,) = [r for r in caplog.records if key in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "only if the task sends to that stream (list the stream in task.outputs" in record.getMessage()
    assert "did you mean" not in record.getMessage()


def test_a_blank_serde_key_of_no_stream_of_the_job_is_unset_and_warns_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The word-count demo renames the job.yaml's output and unsets its serde key with a blank override.
    key = "systems.kafka.streams.sums-out-old.samza.msg.serde"
    with caplog.at_level(logging.INFO, "samsa.runtime.validation"):
        check_job(job({key: ""}))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_stream_unlike_every_stream_of_the_job_gets_no_suggestion(caplog: pytest.LogCaptureFixture) -> None:
    # The reviewer's f5: `out` was "close" to `sin` with the system prefix counted in.
    with caplog.at_level(logging.INFO, "samsa.runtime.validation"):
        check_job(job({"task.inputs": "kafka.sin", "systems.kafka.streams.out.samza.msg.serde": "string"}))
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "kafka.out is none of the job's streams" in record.getMessage()
    assert "did you mean" not in record.getMessage()


def test_a_typod_serde_key_of_a_dotted_input_is_a_warning_naming_the_stream_meant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The reviewer's f1: input kafka.my.events, serde key for my-events; the job ran on the string serde.
    key = "systems.kafka.streams.my-events.samza.msg.serde"
    with caplog.at_level(logging.INFO, "samsa.runtime.validation"):
        check_job(job({"task.inputs": "kafka.my.events", key: "json"}))
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.getMessage().startswith(f"{key}: stream kafka.my-events is none of the job's streams")
    assert "did you mean kafka.my.events?" in record.getMessage()


@pytest.mark.parametrize(
    "stream",
    [
        "sums-in",
        "sums-out",
        "sums-changelog",
        "adj-in",
        "bcast",
        "__samsa_checkpoint_ver_1_for_sums_1",
        "samsa-dlq-sums-1",
    ],
)
def test_per_stream_keys_of_every_kind_of_the_jobs_streams_pass(
    stream: str, caplog: pytest.LogCaptureFixture
) -> None:
    extra = {
        "stores.adj.factory": "inmemory",
        "stores.adj.adstore.input": "kafka.adj-in",
        "task.broadcast.inputs": "kafka.bcast#0",
        "task.deserialization.error.policy": "dlq",
        f"systems.kafka.streams.{stream}.samza.offset.default": "oldest",
        f"systems.kafka.streams.{stream}.samza.key.serde": "string",
    }
    check_job(job(extra))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- changelogs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("stream", "role"), [("sums-in", "an input"), ("sums-out", "an output")])
def test_a_changelog_on_the_jobs_own_input_or_output_is_refused(stream: str, role: str) -> None:
    message = check_error(stores__sums__changelog=f"kafka.{stream}")
    assert message.startswith(f"stores.sums.changelog names kafka.{stream}, which is {role} of the job;")
    assert "a changelog needs a topic of its own" in message
    assert "cleanup.policy" not in message and "delete" not in message


def test_a_changelog_on_an_adjunct_stream_is_refused() -> None:
    message = check_error(
        stores__adj__factory="inmemory",
        stores__adj__adstore__input="kafka.adj-in",
        stores__sums__changelog="kafka.adj-in",
    )
    assert "which is the adjunct input of store adj of the job" in message


def test_two_stores_sharing_a_changelog_are_refused_before_topics_are_touched() -> None:
    message = check_error(stores__other__factory="rocksdb", stores__other__changelog="kafka.sums-changelog")
    assert (
        "stores.sums.changelog" in message and "'other'" in message and "a changelog stream each" in message
    )


def test_a_job_with_its_own_changelog_passes() -> None:
    check_job(job())


def test_config_errors_name_the_problem_key_type() -> None:
    # The stream checks raise the runtime's ConfigError, as the other start-up checks do.
    with pytest.raises(ConfigError):
        check_job(job(stores__sums__changelog="kafka.sums-in"))
