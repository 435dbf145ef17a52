"""A changelog holding only control records (exactly-once abort and commit records, transaction markers,
aborted writes) is not state: a job whose first start died before its first checkpoint starts again; a
changelog with one committed data record among them still refuses a start without checkpoints."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from count_job import WORDS, count_job, final_counts

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.exactly_once.changelog import abort_record, commit_record
from samsa.exactly_once.protocol import Producer
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer, KafkaProducer
from samsa.runtime import lost_checkpoints
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager
from samsa.runtime.lost_checkpoints import CheckpointsLostError, started_containers, stores_with_state
from samsa.runtime.state import ContainerState


class _Crash(Exception):
    """The first start dying between its changelog abort records and its start-up commit."""


def _committed(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of the committed records of partition 0 of `topic`."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    tp = (topic, 0)
    try:
        end = consumer.watermarks(tp)[1]
        consumer.assign({tp: OFFSET_BEGINNING})
        rows: list[tuple[int, bytes | None, bytes | None]] = []
        for _ in range(150):
            if consumer.position([tp]).get(tp, -1) >= end:
                break
            rows += [(m.offset(), m.key(), m.value()) for m in consumer.consume(1000, 0.2)]
        assert consumer.position([tp]).get(tp, -1) >= end, f"could not read {topic} to its end"
        return rows
    finally:
        consumer.close()


def _eos_job(job_config, topics, produce, sent):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    produce(words, [(w, w) for w in sent])
    config = count_job(
        job_config,
        words,
        out,
        **{
            "stores.counts.changelog": f"kafka.{changelog}",
            "job.processing.guarantee": "exactly_once",
            "task.outputs": f"kafka.{out}",
        },
    )
    return config, out, changelog


def test_an_exactly_once_first_start_cut_before_its_first_checkpoint_starts_again(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap, monkeypatch
):
    sent = random.Random(5).choices(WORDS, k=60)
    config, out, changelog = _eos_job(job_config, topics, produce, sent)
    job = JobConfig(Config(config))

    def crash(*args, **kwargs):
        raise _Crash("killed after the abort records, before the restore and the start-up commit")

    try:
        with monkeypatch.context() as patched:
            patched.setattr(ContainerState, "start", crash)
            with pytest.raises(_Crash):
                run_job(config)
        # What the next start finds: a start record, no checkpoint, a changelog of abort records only.
        assert started_containers(job) == ["0"]
        assert checkpoint_manager(job).read_records((1, 2)) == {}
        logged = _committed(kafka_bootstrap, changelog)
        assert logged and all(key.startswith(b"\x00samsa.eos\x00abort:") for _, key, _ in logged), logged

        run_job(config)  # refused before (CheckpointsLostError): the changelog holds no state
        assert final_counts([(0, *row) for row in _committed(kafka_bootstrap, out)]) == Counter(sent)
    finally:
        kafka_admin.delete_topics([changelog])


def _store_job(job_config, topics, exactly_once: bool) -> tuple[JobConfig, str]:
    words, out = topics(1), topics(1)
    changelog = topics(1)
    eos = {"job.processing.guarantee": "exactly_once", "task.outputs": f"kafka.{out}"} if exactly_once else {}
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}", **eos})
    return JobConfig(Config(config)), changelog


def _control_records(producer: KafkaProducer, changelog: str, job: JobConfig) -> None:
    """What exactly-once starts and commits write to a changelog besides the store's writes."""
    identity = Producer.of(job.name, job.id, "Partition 0")
    for record in (abort_record(identity, 1, 0), commit_record(identity, 1, 1), abort_record(identity, 2, 1)):
        key, value, headers = record
        producer.send(changelog, value, key, 0, headers)
    producer.flush()


def _aborted_writes(bootstrap: str, changelog: str, n: int) -> None:
    """`n` store writes in a transaction that is aborted: they count in the watermarks only."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}"})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(n):
            producer.send(changelog, (i + 1).to_bytes(8, "big"), WORDS[i % len(WORDS)].encode(), 0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_aborted_writes_and_control_records_are_no_state(exactly_once, job_config, topics, kafka_bootstrap):
    job, changelog = _store_job(job_config, topics, exactly_once)
    _aborted_writes(kafka_bootstrap, changelog, 5)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    try:
        _control_records(producer, changelog, job)
    finally:
        producer.close()
    _aborted_writes(kafka_bootstrap, changelog, 3)
    assert [key[:11] for _, key, _ in _committed(kafka_bootstrap, changelog)] == [b"\x00samsa.eos\x00"] * 3
    assert stores_with_state(job, 1) == {}


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_committed_write_after_control_records_is_state(exactly_once, job_config, topics, kafka_bootstrap):
    job, changelog = _store_job(job_config, topics, exactly_once)
    _aborted_writes(kafka_bootstrap, changelog, 4)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    try:
        _control_records(producer, changelog, job)
        producer.send(changelog, (7).to_bytes(8, "big"), b"fig", 0)  # untagged: a restore applies it
        producer.flush()
    finally:
        producer.close()
    held = stores_with_state(job, 1)
    assert list(held) == ["counts"] and changelog in held["counts"], held


def test_a_changelog_with_data_and_no_checkpoint_of_a_started_job_is_refused(
    job_config, topics, kafka_bootstrap, run_job, produce, kafka_admin
):
    sent = random.Random(6).choices(WORDS, k=30)
    config, _, changelog = _eos_job(job_config, topics, produce, sent)
    job = JobConfig(Config(config))
    try:
        run_job(config)
        kafka_admin.delete_topics([checkpoint_topic(job.name, job.id)])
        with pytest.raises(CheckpointsLostError, match="'counts'"):
            JobCoordinator(job).prepare()
    finally:
        kafka_admin.delete_topics([changelog])


def test_a_changelog_not_read_to_a_decision_in_time_counts_as_state(
    job_config, topics, kafka_bootstrap, monkeypatch
):
    job, changelog = _store_job(job_config, topics, exactly_once=True)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    try:
        _control_records(producer, changelog, job)
    finally:
        producer.close()
    monkeypatch.setattr(lost_checkpoints, "_DECIDE_S", 0.0)
    held = stores_with_state(job, 1)
    assert list(held) == ["counts"] and "within" in held["counts"], held


def test_the_first_data_record_decides_without_reading_the_changelog_whole(
    job_config, topics, kafka_bootstrap, monkeypatch
):
    job, changelog = _store_job(job_config, topics, exactly_once=True)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    try:
        _control_records(producer, changelog, job)
        for i in range(5000):
            producer.send(changelog, i.to_bytes(8, "big"), f"key-{i}".encode(), 0)
        producer.flush()
    finally:
        producer.close()
    read: list[int] = []
    consume = KafkaConsumer.consume

    def counted(self, max_messages, timeout):
        msgs = consume(self, max_messages, timeout)
        read.append(len(msgs))
        return msgs

    monkeypatch.setattr(KafkaConsumer, "consume", counted)
    held = stores_with_state(job, 1)
    assert "partition 0, offset 3" in held["counts"], held  # after the three control records
    assert sum(read) < 5000, read
