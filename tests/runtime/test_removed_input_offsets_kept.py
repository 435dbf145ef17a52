"""An input removed from task.inputs for a while and added back resumes where it stopped: each checkpoint
keeps the offsets (and input marks, counts) of the partitions its task does not read now, instead of the
stream starting over at samza.offset.default (read twice with `oldest`, records skipped with `upcoming`)."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from job_files import write_job_file
from job_fixtures import run_in_process
from recreated_topics import produce_fresh, recreate
from wordcount_jobs import changelogged_wordcount, latest_counts, seeded_words

from samsa.checkpoint.model import CheckpointV2
from samsa.cli import main
from samsa.kafka import KafkaAdmin
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.streams import SystemStreamPartition


@pytest.fixture
def changelog(kafka_admin: KafkaAdmin) -> Iterator[str]:
    """The name of a changelog topic the job creates, deleted after the test."""
    name = f"kept-counts-{uuid.uuid4().hex[:10]}"
    yield name
    kafka_admin.delete_topics([name])


def _show(tmp_path: Path, config: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["checkpoint", "show", str(write_job_file(tmp_path, config))]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("guarantee", "default"),
    [
        ("at_least_once", "oldest"),
        ("at_least_once", "upcoming"),
        ("exactly_once", "oldest"),
        ("exactly_once", "upcoming"),
    ],
)
def test_an_input_added_back_resumes_where_it_stopped(
    guarantee: str,
    default: str,
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_bootstrap: str,
    changelog: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    words, words2, out = topics(2), topics(2), topics(1)
    extra = {"job.processing.guarantee": guarantee}
    both = changelogged_wordcount(job_config, [words, words2], out, changelog, **extra)
    one = {**both, "task.inputs": f"kafka.{words}"}
    truth: Counter[str] = Counter()

    first, second = seeded_words(40, 0), seeded_words(30, 1)
    produce(words, first)
    produce(words2, second)
    truth.update(k for k, _ in first + second)
    run_in_process(both)
    assert latest_counts(kafka_bootstrap, out) == truth

    # words2 leaves task.inputs for a run: its offsets stay in every checkpoint, flagged kept.
    third = seeded_words(20, 2)
    produce(words, third)
    truth.update(k for k, _ in third)
    run_in_process(one)
    assert latest_counts(kafka_bootstrap, out) == truth
    checkpoints = checkpoint_manager(JobConfig(Config(one))).read_last()
    kept = {ssp for cp in checkpoints.values() for ssp in cp.kept_inputs}
    assert kept == {SystemStreamPartition("kafka", words2, p) for p in (0, 1)}
    for cp in checkpoints.values():
        assert {ssp.stream for ssp in cp.offsets} == {words, words2}
        if isinstance(cp, CheckpointV2):  # the marks of the kept partitions stay for the recreated check
            assert {ssp.stream for ssp in cp.input_marks} == {words, words2}
    shown = _show(tmp_path, one, capsys)
    assert f"kafka.{words2}#0  offset " in shown and "not an input now" in shown
    assert shown.count("not an input now") == 2

    # While it is not an input, more lands in words2 (with `upcoming`, they must not be skipped).
    late = seeded_words(10, 3) if default == "upcoming" else []
    if late:
        produce(words2, late)
        truth.update(k for k, _ in late)
    added_back = {**both, f"systems.kafka.streams.{words2}.samza.offset.default": default}
    with caplog.at_level(logging.INFO, "samsa.runtime.offsets"):
        run_in_process(added_back)
    assert latest_counts(kafka_bootstrap, out) == truth
    assert f"{words2}" in caplog.text and "added back to the inputs; resuming at offset" in caplog.text
    # Read again: nothing is kept any more, and the next start resumes as usual.
    checkpoints = checkpoint_manager(JobConfig(Config(both))).read_last()
    assert all(not cp.kept_inputs for cp in checkpoints.values())
    assert "not an input now" not in _show(tmp_path, both, capsys)


def test_an_input_recreated_while_not_an_input_is_read_from_its_start(
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_admin: KafkaAdmin,
    kafka_bootstrap: str,
    changelog: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    words, words2, out = topics(1), topics(1), topics(1)
    both = changelogged_wordcount(job_config, [words, words2], out, changelog)
    one = {**both, "task.inputs": f"kafka.{words}"}
    old = seeded_words(30, 0)
    produce(words, seeded_words(5, 1))
    produce(words2, old)
    run_in_process(both)
    run_in_process(one)
    # Deleted and recreated while not an input, with more records than the kept offset: the kept offset is
    # of the old topic, and the kept mark of its first record tells it.
    recreate(kafka_admin, words2, 1)
    new = seeded_words(40, 2)
    produce_fresh(kafka_bootstrap, words2, new)
    with caplog.at_level(logging.INFO, "samsa.runtime.offsets"):
        run_in_process(both)
    assert latest_counts(kafka_bootstrap, out) == Counter(k for k, _ in seeded_words(5, 1) + old + new)
    assert f"topic {words2!r} partition 0 was deleted and recreated" in caplog.text
    assert "added back to the inputs" not in caplog.text


def test_a_reset_drops_the_kept_offsets(
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_bootstrap: str,
    changelog: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    words, words2, out = topics(1), topics(1), topics(1)
    both = changelogged_wordcount(job_config, [words, words2], out, changelog)
    one = {**both, "task.inputs": f"kafka.{words}"}
    produce(words, seeded_words(5, 0))
    produce(words2, seeded_words(7, 1))
    run_in_process(both)
    run_in_process(one)
    assert "not an input now" in _show(tmp_path, one, capsys)
    assert main(["checkpoint", "reset", "--to", "earliest", str(write_job_file(tmp_path, one))]) == 0
    (checkpoint,) = checkpoint_manager(JobConfig(Config(one))).read_last().values()
    assert checkpoint.offsets == {SystemStreamPartition("kafka", words, 0): 0}
    assert not checkpoint.kept_inputs
    assert "not an input now" not in _show(tmp_path, one, capsys)
