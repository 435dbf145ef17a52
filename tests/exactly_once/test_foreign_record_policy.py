"""A record without the exactly-once header on an intermediate stream (a stray producer's) is a bad message:
`task.deserialization.error.policy` applies to it, and skipping it leaves exactly-once intact."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from eos_pipeline import Pipeline, truth

from samsa.deploy.restarts import BAD_RECORD_EXIT, unmendable_exit
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer, KafkaProducer
from samsa.runtime.exceptions import MessageDeserializationError
from samsa.testing.scheduler import DeterministicScheduler

LINES = ["a b c", "b c d", "a a e", "f g a", "c c c", "d e f g"] * 3
# Scheduler steps after which a stray record lands on the intermediate stream, and its partition: amid
# the upstream job's versions, while both jobs run.
STRAYS = {1: 0, 40: 1, 90: 0, 160: 1, 260: 0}


def _run_with_strays(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, **extra: str) -> list[int]:
    """Both jobs in one scheduler, stray records sent to the intermediate stream as they run; returns the
    strays' partitions in the order sent."""
    producer = KafkaProducer({"bootstrap.servers": pipeline.url})
    sent: list[int] = []
    due = sorted(STRAYS.items())
    step = DeterministicScheduler._loop_step

    def loop_step(self: DeterministicScheduler, slot: Any) -> None:
        while len(sent) < len(due) and due[len(sent)][0] <= self.step_no:
            partition = due[len(sent)][1]
            producer.send(pipeline.stream(1), b"hello", key=b"stray", partition=partition)
            producer.flush()
            sent.append(partition)
        step(self, slot)

    monkeypatch.setattr(DeterministicScheduler, "_loop_step", loop_step)
    try:
        scheduler = DeterministicScheduler(7)
        for config in pipeline.configs(commit_ms=50, **extra):
            scheduler.add_job(config)
        scheduler.run()
    finally:
        producer.close()
    return sent


def test_skip_passes_over_stray_records_and_every_word_is_still_counted_once(
    kafka_bootstrap: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    pipeline = Pipeline(tmp_path, stages=2, tasks=(2, 2), intermediate_partitions=(2,), url=kafka_bootstrap)
    try:
        pipeline.feed(LINES)
        with caplog.at_level(logging.WARNING, logger="samsa"):
            sent = _run_with_strays(pipeline, monkeypatch, **{"task.deserialization.error.policy": "skip"})
        assert len(sent) >= 3, "strays landed while the jobs ran"
        expected = truth(LINES)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
        skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipping message at")]
        assert len(skipped) >= len(sent)
        assert all(f"topic {pipeline.stream(1)} partition " in m and " offset " in m for m in skipped)
        assert "without the samsa.eos header" in skipped[0]
    finally:
        pipeline.close()


def test_dlq_sends_stray_records_raw_to_the_dead_letter_stream(
    kafka_bootstrap: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = Pipeline(tmp_path, stages=2, tasks=(2, 2), intermediate_partitions=(2,), url=kafka_bootstrap)
    try:
        pipeline.feed(LINES)
        sent = _run_with_strays(pipeline, monkeypatch, **{"task.deserialization.error.policy": "dlq"})
        expected = truth(LINES)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        dead = _read_all(pipeline, f"samsa-dlq-stage1-{pipeline.suffix}-1")
        # At least once: a record read again (after a rewind or a restart) is sent again.
        assert len(dead) >= len(sent)
        for key, value, headers in dead:
            assert (key, value) == (b"stray", b"hello")
            named = dict(headers)
            assert named["samsa.source.topic"] == pipeline.stream(1).encode()
            assert b"without the samsa.eos header" in named["samsa.error"]
    finally:
        pipeline.close()


def test_fail_stops_the_task_naming_the_record_and_a_supervisor_does_not_restart_it(
    kafka_bootstrap: str, tmp_path: Any
) -> None:
    pipeline = Pipeline(tmp_path, stages=2, tasks=(1, 1), intermediate_partitions=(1,), url=kafka_bootstrap)
    try:
        pipeline.feed(["a b", "c"])
        upstream, downstream = pipeline.configs(commit_ms=50)
        pipeline.run_in_turn(1, upstream)
        producer = KafkaProducer({"bootstrap.servers": pipeline.url})
        producer.send(pipeline.stream(1), b"hello", key=b"stray")
        producer.close()
        end = len(_read_all(pipeline, pipeline.stream(1)))
        with pytest.raises(MessageDeserializationError) as failure:
            pipeline.run_in_turn(1, downstream)
        message = str(failure.value)
        assert f"topic {pipeline.stream(1)} partition 0 offset {end - 1}" in message
        assert "task.deserialization.error.policy to skip or dlq" in message
        assert unmendable_exit(failure.value) == BAD_RECORD_EXIT
    finally:
        pipeline.close()


def _read_all(pipeline: Pipeline, topic: str) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    """(key, value, headers) of every record of the topic's partition 0, to its end."""
    consumer = KafkaConsumer({"bootstrap.servers": pipeline.url})
    try:
        end = consumer.watermarks((topic, 0))[1]
        consumer.assign({(topic, 0): OFFSET_BEGINNING})
        out: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = []
        deadline = time.monotonic() + 30
        while len(out) < end:
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            out += [(m.key(), m.value(), m.headers() or []) for m in consumer.consume(1000, 0.1)]
        return out
    finally:
        consumer.close()
