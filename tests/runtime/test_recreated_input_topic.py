"""An input topic deleted and recreated while the job was down is read from its start: the checkpointed
offsets, of the old topic, would skip the new records before them (the checkpoint records a mark of each
partition's first record to tell)."""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

import pytest
from job_fixtures import run_in_process
from recreated_topics import delete_records_before, produce_fresh, recreate
from wordcount_jobs import changelogged_wordcount, latest_counts, seeded_words

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.model import CheckpointV2, decode_v2, encode
from samsa.kafka import KafkaAdmin, KafkaConsumer
from samsa.kafka.record_marks import RecordMark, read_marks
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.runtime.offsets import recreated_since, start_offset
from samsa.streams import SystemStreamPartition


@pytest.fixture
def changelog(kafka_admin: KafkaAdmin) -> Iterator[str]:
    """The name of a changelog topic the job creates, deleted after the test."""
    name = f"counts-{uuid.uuid4().hex[:10]}"
    yield name
    kafka_admin.delete_topics([name])


def _checkpoints(config: dict[str, str]) -> dict[str, Any]:
    return checkpoint_manager(JobConfig(Config(config))).read_last()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_recreated_input_topic_is_read_from_its_start(
    guarantee: str,
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_admin: KafkaAdmin,
    kafka_bootstrap: str,
    caplog: pytest.LogCaptureFixture,
    changelog: str,
) -> None:
    words, out = topics(2), topics(1)
    old = seeded_words(50, 0)
    produce(words, old)
    config = changelogged_wordcount(
        job_config, words, out, changelog, **{"job.processing.guarantee": guarantee}
    )
    run_in_process(config)
    assert latest_counts(kafka_bootstrap, out) == Counter(k for k, _ in old)
    # While the job is down the topic is deleted and recreated; more words land in it than it had.
    recreate(kafka_admin, words, 2)
    new = seeded_words(80, 1)
    produce_fresh(kafka_bootstrap, words, new)
    with caplog.at_level(logging.WARNING, "samsa.runtime.offsets"):
        run_in_process(config)
    assert latest_counts(kafka_bootstrap, out) == Counter(k for k, _ in old + new)
    assert f"topic {words!r} partition 0 was deleted and recreated" in caplog.text
    assert f"topic {words!r} partition 1 was deleted and recreated" in caplog.text
    marks = [
        m for cp in _checkpoints(config).values() if isinstance(cp, CheckpointV2) for m in cp.input_marks
    ]
    assert sorted(ssp.partition for ssp in marks) == [0, 1]
    # The next start finds the marks of the new topic: it resumes where it stopped, counting nothing twice.
    caplog.clear()
    more = seeded_words(10, 2)
    produce_fresh(kafka_bootstrap, words, more)
    with caplog.at_level(logging.WARNING, "samsa.runtime.offsets"):
        run_in_process(config)
    assert latest_counts(kafka_bootstrap, out) == Counter(k for k, _ in old + new + more)
    assert "recreated" not in caplog.text


def test_a_recreated_input_topic_shorter_than_the_checkpoint_is_read_from_its_start(
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_admin: KafkaAdmin,
    kafka_bootstrap: str,
    changelog: str,
) -> None:
    words, out = topics(1), topics(1)
    old = seeded_words(30, 0)
    produce(words, old)
    config = changelogged_wordcount(job_config, words, out, changelog)
    run_in_process(config)
    recreate(kafka_admin, words, 1)
    new = seeded_words(5, 1)
    produce_fresh(kafka_bootstrap, words, new)
    # `upcoming` would start past the checkpoint's end, at the new topic's end: its records unread.
    run_in_process({**config, "systems.kafka.samza.offset.default": "upcoming"})
    assert latest_counts(kafka_bootstrap, out) == Counter(k for k, _ in old + new)


def test_retention_moving_the_low_watermark_is_not_taken_for_a_recreated_topic(
    job_config: Any,
    topics: Any,
    produce: Any,
    kafka_bootstrap: str,
    caplog: pytest.LogCaptureFixture,
    changelog: str,
) -> None:
    words, out = topics(1), topics(1)
    old = seeded_words(20, 0)
    produce(words, old)
    config = changelogged_wordcount(job_config, words, out, changelog)
    run_in_process(config)
    new = seeded_words(10, 1)
    produce(words, new)
    # Retention removes the first records, the marked one among them, but none the job did not read.
    delete_records_before(kafka_bootstrap, words, 0, 15)
    with caplog.at_level(logging.WARNING, "samsa.runtime.offsets"):
        run_in_process(config)
    assert latest_counts(kafka_bootstrap, out) == Counter(k for k, _ in old + new)
    assert "recreated" not in caplog.text


# -- the decision ----------------------------------------------------------------------------------------
MARK = RecordMark(5, 1_700_000_000_000, "ab")
P0 = SystemStreamPartition("kafka", "words", 0)


def test_a_first_record_before_the_marked_one_means_a_recreated_topic() -> None:
    why = recreated_since(MARK, RecordMark(0, 1_700_000_000_000, "ab"))
    assert why is not None and "offset 0, before offset 5" in why


def test_another_record_at_the_marked_offset_means_a_recreated_topic() -> None:
    assert "timestamp" in (recreated_since(MARK, RecordMark(5, 1_800_000_000_000, "ab")) or "")
    assert "another key or value" in (recreated_since(MARK, RecordMark(5, MARK.timestamp, "cd")) or "")


def test_the_marked_record_still_there_or_gone_by_retention_tells_nothing() -> None:
    assert recreated_since(MARK, MARK) is None
    assert recreated_since(MARK, RecordMark(9, 1, "x")) is None  # retention or compaction removed it
    assert recreated_since(MARK, None) is None  # empty now: the watermarks decide
    assert recreated_since(None, RecordMark(0, 1, "x")) is None  # a checkpoint of an older Samsa


def test_a_recreated_partition_starts_at_its_oldest_offset(caplog: pytest.LogCaptureFixture) -> None:
    settings = JobConfig(Config(_unit_config("upcoming"))).stream(P0.system_stream)
    with caplog.at_level(logging.WARNING, "samsa.runtime.offsets"):
        assert start_offset(P0, settings, 7, (0, 20), False, recreated="why") == 0
    assert "topic 'words' partition 0 was deleted and recreated since the checkpoint (why)" in caplog.text
    assert start_offset(P0, settings, 7, (0, 20), False) == 7  # no mark: as before
    assert start_offset(P0, settings, 30, (0, 20), False, recreated="why") == 0
    assert start_offset(P0, settings, 30, (0, 20), False) == 20
    reset = JobConfig(
        Config({**_unit_config("upcoming"), "systems.kafka.streams.words.samza.reset.offset": "true"})
    )
    assert start_offset(P0, reset.stream(P0.system_stream), 7, (0, 20), False, recreated="why") == 20


def _unit_config(default: str) -> dict[str, str]:
    return {
        "job.name": "j",
        "task.class": "samsa.examples.wordcount.task:WordCount",
        "task.inputs": "kafka.words",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "systems.kafka.samza.offset.default": default,
    }


def test_checkpoint_marks_round_trip_and_a_checkpoint_without_them_reads_as_before() -> None:
    cp = CheckpointV2(CheckpointId.create(), {P0: 7}, input_marks={P0: MARK})
    assert decode_v2(encode(cp), "t@0") == cp
    plain = CheckpointV2(cp.checkpoint_id, {P0: 7})
    assert b"inputMarks" not in encode(plain)  # the bytes of a checkpoint without marks stay as before
    assert decode_v2(encode(plain), "t@0").input_marks == {}
    # An unreadable mark is dropped, not fatal: it only lets a start check the topic.
    data = json.loads(encode(cp))
    data["inputMarks"][0]["timestamp"] = "x"
    assert decode_v2(json.dumps(data).encode(), "t@0") == plain


class _Silent:
    """A consumer that reads nothing (a broker that does not answer)."""

    def assign(self, positions: object) -> None:
        pass

    def consume(self, n: int, timeout: float) -> list[object]:
        return []

    def unassign(self) -> None:
        self.unassigned = True


def test_reading_the_first_records_times_out_naming_the_partition() -> None:
    consumer = _Silent()
    with pytest.raises(TimeoutError, match=r"could not read kafka\.words#0 at offset 3 within 0 s to check"):
        read_marks(cast(KafkaConsumer, consumer), {P0: 3}, "check", timeout_s=0.3)
    assert consumer.unassigned
