"""Two jobs whose job.name (or job.id) differ only by '_' vs '-' get the same coordinator and checkpoint
topics: the second to start is refused, naming both, instead of resuming from the other's checkpoints."""

from __future__ import annotations

import json
import logging
import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from job_fixtures import run_in_process

from samsa.checkpoint.kafka_manager import OWNER_KEY, checkpoint_topic
from samsa.checkpoint.model import VERSION_OF_KEY_TYPE, parse_key
from samsa.checkpoint.starts import ContainerStart
from samsa.cli import main
from samsa.exceptions import InvalidConfigError
from samsa.kafka import KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager, coordinator_topic
from samsa.runtime.job_model import JobIdentity, JobModel, build_job_model
from samsa.streams import SystemStream


@pytest.fixture(autouse=True)
def _default_signal_handlers() -> Iterator[None]:
    # `samsa run` installs its stop handlers in this process: put pytest's back.
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _pair(
    job_config: Callable[..., dict[str, str]], source: str, sinks: tuple[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Job `ident_<hex>` (id 1) and job `ident-<hex>` (id 1), both reading `source`."""
    hexed = uuid.uuid4().hex[:8]
    first = job_config(f"kafka.{source}", sinks[0], **{"job.name": f"ident_{hexed}", "job.id": "1"})
    second = job_config(f"kafka.{source}", sinks[1], **{"job.name": f"ident-{hexed}", "job.id": "1"})
    return first, second


def _assert_names_both(message: str, first: dict[str, str], second: dict[str, str], topic: str) -> None:
    for named in (
        f"job.name={first['job.name']!r}",
        f"job.name={second['job.name']!r}",
        topic,
        "Give one of the two jobs another job.name or job.id",
    ):
        assert named in message, message


def test_a_job_named_like_another_but_for_an_underscore_is_refused_its_topics(
    job_config: Callable[..., dict[str, str]],
    topics: Callable[..., str],
    produce: Callable[..., None],
    read_topic: Callable[..., list[Any]],
    kafka_admin: Any,
) -> None:
    source, sink_a, sink_b = topics(), topics(), topics()
    produce(source, [("k", f"v{i}") for i in range(5)])
    first, second = _pair(job_config, source, (sink_a, sink_b))
    job_a, job_b = JobConfig(Config(first)), JobConfig(Config(second))
    assert coordinator_topic(job_a) == coordinator_topic(job_b), "the clash this guards against"
    run_in_process(first)  # runs and commits
    assert len(read_topic(sink_a)) == 5

    with pytest.raises(InvalidConfigError) as refused:
        run_in_process(second)  # before: it resumed from the first job's offsets and sent nothing
    _assert_names_both(str(refused.value), second, first, coordinator_topic(job_b))
    assert len(read_topic(sink_b)) == 0
    # Nothing of the first job was touched: it restarts as before, from its own checkpoints.
    produce(source, [("k", "v5")])
    run_in_process(first)
    assert len(read_topic(sink_a)) == 6
    assert JobCoordinator(job_a).read_model() is not None


def test_the_checkpoint_topic_names_its_job_when_the_coordinator_topic_is_gone(
    job_config: Callable[..., dict[str, str]],
    topics: Callable[..., str],
    produce: Callable[..., None],
    read_topic: Callable[..., list[Any]],
    kafka_admin: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, sink_a, sink_b = topics(), topics(), topics()
    produce(source, [("k", f"v{i}") for i in range(3)])
    first, second = _pair(job_config, source, (sink_a, sink_b))
    job_a = JobConfig(Config(first))
    run_in_process(first)
    kafka_admin.delete_topics([coordinator_topic(job_a)])

    with pytest.raises(InvalidConfigError) as refused:
        run_in_process(second)
    _assert_names_both(str(refused.value), second, first, checkpoint_topic(job_a.name, job_a.id))
    assert len(read_topic(sink_b)) == 0
    # The checkpoint tools refuse the other job's checkpoints too: a reset would have moved them.
    job_file = tmp_path / "second.yaml"
    job_file.write_text(json.dumps(second))
    before = checkpoint_manager(job_a).read_last()
    with caplog.at_level(logging.ERROR):
        assert main(["checkpoint", "reset", str(job_file), "--to", "earliest"]) == 2
    for named in (f"job.name={first['job.name']!r}", f"job.name={second['job.name']!r}", "nothing was read"):
        assert named in caplog.text, caplog.text
    assert checkpoint_manager(job_a).read_last() == before
    run_in_process(first)  # its own checkpoints: it goes on, nothing sent again
    assert len(read_topic(sink_a)) == 3


def test_the_cli_refuses_the_clashing_job_with_exit_2(
    job_config: Callable[..., dict[str, str]],
    topics: Callable[..., str],
    produce: Callable[..., None],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, sink_a, sink_b = topics(), topics(), topics()
    produce(source, [("k", "v0")])
    first, second = _pair(job_config, source, (sink_a, sink_b))
    run_in_process(first)
    job_file = tmp_path / "second.yaml"
    job_file.write_text(json.dumps(second))
    with caplog.at_level(logging.ERROR):
        assert main(["run", str(job_file), "--until-caught-up"]) == 2
    _assert_names_both(caplog.text, second, first, coordinator_topic(JobConfig(Config(second))))


def test_a_new_job_with_an_underscore_in_its_name_is_warned_at_its_first_start(
    job_config: Callable[..., dict[str, str]],
    topics: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A refusal would break every user whose job names hold '_': a warning tells of the shared names.
    underscored, _ = _pair(job_config, topics(), (topics(), topics()))
    _, dashed = _pair(job_config, topics(), (topics(), topics()))
    warning = f"job.name={underscored['job.name']!r} contains '_'"
    with caplog.at_level(logging.WARNING):
        JobCoordinator(JobConfig(Config(underscored))).prepare()
    assert warning in caplog.text
    assert f"job.name={underscored['job.name'].replace('_', '-')!r} with job.id='1'" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        JobCoordinator(JobConfig(Config(underscored))).prepare()  # it has run: told once is enough
        JobCoordinator(JobConfig(Config(dashed))).prepare()
    assert "contains '_'" not in caplog.text


def test_a_job_that_ran_under_an_older_samsa_is_known_by_its_start_records(
    job_config: Callable[..., dict[str, str]], topics: Callable[..., str], kafka_bootstrap: str
) -> None:
    # An older Samsa's job model names no job; its containers' start records name `<job.name>-<job.id>`.
    source = topics()
    first, second = _pair(job_config, source, (topics(), topics()))
    older = JobConfig(Config(first))
    built = build_job_model({SystemStream("kafka", source): 1}, 1)
    assert built.job is None
    JobCoordinator(older).create_resources()
    JobCoordinator(older).publish(built)
    start = ContainerStart(older.job_key, "0", 1, "host", 1, 1_700_000_000_000)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    try:
        producer.send(coordinator_topic(older), start.encode(), key=start.key, partition=0)
        producer.flush()
    finally:
        producer.close()

    with pytest.raises(InvalidConfigError) as refused:
        JobCoordinator(JobConfig(Config(second))).prepare()
    _assert_names_both(str(refused.value), second, first, coordinator_topic(older))
    # The job itself goes on with its model, which now names it.
    assert JobCoordinator(older).prepare() == built
    assert JobCoordinator(older).read_model().job == JobIdentity(older.name, older.id)  # type: ignore[union-attr]


# -- record compatibility (no broker) ---------------------------------------------------------------------


def _model(job: JobIdentity | None = None) -> JobModel:
    return replace(build_job_model({SystemStream("kafka", "in"): 2}, 1), job=job)


def test_a_job_model_of_an_older_samsa_without_its_job_is_read() -> None:
    stamped = _model(JobIdentity("a_b", "1"))
    older = json.loads(stamped.to_json())
    del older["job"]
    model = JobModel.from_json(json.dumps(older).encode())
    assert model.job is None
    assert model == stamped, "the same tasks: no new model to publish, no container fenced"


def test_a_stamped_job_model_keeps_the_format_older_readers_read() -> None:
    data = json.loads(_model(JobIdentity("a_b", "1")).to_json())
    unstamped = json.loads(_model().to_json())
    assert data.pop("job") == {"name": "a_b", "id": "1"}
    assert data == unstamped  # the same version and keys: an older reader ignores the new one
    assert JobModel.from_json(_model(JobIdentity("a_b", "1")).to_json()).job == JobIdentity("a_b", "1")


def test_the_checkpoint_topics_job_record_is_skipped_by_checkpoint_readers() -> None:
    # Older Samsas read every key as a checkpoint key and skip the types they do not know.
    kind, task = parse_key(OWNER_KEY)
    assert kind not in VERSION_OF_KEY_TYPE
    assert task == ""
