"""OutgoingMessage(partition_key=...) places a record as Samza's partition key does: by the Kafka default
partitioner's partition (murmur2) of the partition key in the stream's key serde, the record keeping its
key; the same partition on Kafka, the in-memory system, the TestRunner and under exactly-once."""

from __future__ import annotations

from typing import Any

import outgoing_test_tasks
import pytest
import systems_fixtures

from samsa import OutgoingMessage
from samsa.kafka.partitioner import partition_for
from samsa.runtime import collector as collector_module
from samsa.runtime.collector import OutputCollector
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError, TaskError
from samsa.serde.exceptions import SerializationError
from samsa.serde.registry import SerdeRegistry
from samsa.testing import TestRunner

# The job tests here run on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin

KEYS = [f"user:{n}" for n in range(12)]
STRINGS = {"systems.kafka.samza.key.serde": "string", "systems.kafka.samza.msg.serde": "string"}


def _by_group(key: str) -> int:
    """Where ByPartitionKey's records of `key` go among 4 partitions: by their partition key, the group."""
    return partition_for(key.split(":")[1].encode(), 4)


def test_the_keys_here_are_placed_elsewhere_by_their_partition_key_than_by_their_own() -> None:
    assert any(_by_group(k) != partition_for(k.encode(), 4) for k in KEYS)


class Producer:
    def __init__(self, counts: dict[str, int]) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.counts = counts
        self.asked: list[str] = []

    def send(self, *args: Any) -> None:
        self.sent.append(args)

    def partition_count(self, topic: str) -> int | None:
        self.asked.append(topic)
        return self.counts.get(topic)


def _collector(counts: dict[str, int], **extra: str) -> tuple[OutputCollector, Producer]:
    config = Config(
        {
            **extra,
            "job.name": "j",
            "task.class": "m:T",
            "task.inputs": "kafka.in",
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.bootstrap.servers": "localhost:9092",
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.streams.counts.samza.key.serde": "long",
        }
    )
    producer = Producer(counts)
    registry = SerdeRegistry(config)
    return OutputCollector(JobConfig(config), {"kafka": producer}, registry), producer  # type: ignore[dict-item]


def test_the_collector_places_by_the_partition_key_in_the_streams_key_serde() -> None:
    collector, producer = _collector({"out": 4, "counts": 8})
    collector.send(OutgoingMessage("kafka", "out", key="user:1", value=b"a", partition_key="1"))
    collector.send(OutgoingMessage("kafka", "out", key="user:2", value=b"b", partition_key="2"))
    collector.send(OutgoingMessage("kafka", "counts", key=5, value=b"c", partition_key=7))
    assert producer.sent == [
        ("out", b"a", b"user:1", partition_for(b"1", 4), None, None),
        ("out", b"b", b"user:2", partition_for(b"2", 4), None, None),
        ("counts", b"c", (5).to_bytes(8, "big"), partition_for((7).to_bytes(8, "big"), 8), None, None),
    ]
    assert producer.asked == ["out", "counts"], "each stream's partition count is read once"


def test_a_partition_key_sent_to_a_topic_that_does_not_exist_is_refused_naming_it() -> None:
    collector, producer = _collector({})
    with pytest.raises(TaskError, match=r"send to kafka\.out with partition_key: topic 'out' does not exist"):
        collector.send(OutgoingMessage("kafka", "out", key="k", value=b"v", partition_key="p"))
    assert producer.sent == []


def test_a_partition_key_the_key_serde_refuses_names_the_partition_key() -> None:
    collector, producer = _collector({"counts": 2})
    with pytest.raises(SerializationError) as info:
        collector.send(OutgoingMessage("kafka", "counts", key=1, value=b"v", partition_key="seven"))
    assert "while sending the partition key to kafka.counts" in info.value.__notes__
    assert producer.sent == []


def test_a_job_places_by_partition_key_alike_on_kafka_and_in_memory(
    job_config, topics, produce, read_topic, run_job
) -> None:
    inputs, out = topics(1), topics(4)
    config = job_config(f"kafka.{inputs}", out, task="outgoing_test_tasks:ByPartitionKey")
    produce(inputs, [(k, f"v{n}") for n, k in enumerate(KEYS)])
    run_job(config)
    records = read_topic(out, headers=True)
    assert sorted(key.decode() for _, _, key, _, _ in records) == sorted(KEYS * 2)
    for partition, _, key, _, _ in records:
        assert partition == _by_group(key.decode()), key
    with_headers = [headers for *_, headers in records if headers]
    assert with_headers == [[("h", b"1"), ("s", b"str")]] * len(KEYS)


@pytest.mark.parametrize(
    "guarantee",
    [
        {},
        {"job.processing.guarantee": "exactly_once", "task.outputs": "kafka.out"},
        {
            "job.processing.guarantee": "exactly_once",
            "task.outputs": "kafka.out",
            "systems.kafka.streams.out.samza.intermediate": "true",
        },
    ],
    ids=["at-least-once", "exactly-once-sink", "exactly-once-intermediate"],
)
def test_the_test_runner_places_by_partition_key_as_kafka_does(tmp_path, guarantee: dict[str, str]) -> None:
    config = {**STRINGS, "test.output": "out", **guarantee}
    with TestRunner.of(outgoing_test_tasks.ByPartitionKey, state_dir=tmp_path).with_config(config) as runner:
        runner.add_input("in", [(k, "v") for k in KEYS]).add_output("out", partitions=4)
        messages = runner.run(timeout=20).messages("out")
    assert sorted(m.key for m in messages) == sorted(KEYS * 2)
    for m in messages:
        assert m.partition == _by_group(m.key), m
    # Given as a dict with a str value, the headers read back as a Kafka consumer gets them (the exactly-once
    # header of an intermediate stream's records after them).
    with_headers = [list(m.headers)[:2] for m in messages if ("h", b"1") in m.headers]
    assert with_headers == [[("h", b"1"), ("s", b"str")]] * len(KEYS)


@pytest.mark.parametrize("partitioner", ["consistent_random", "consistent", "fnv1a_random", "random"])
def test_a_partition_key_on_a_system_whose_partitioner_is_not_murmur2_is_refused_naming_the_key(
    partitioner: str,
) -> None:
    # Keyed records would be placed by the other hash, partition-key records by murmur2: key=pk and
    # partition_key=pk would land apart.
    collector, producer = _collector({"out": 4}, **{"systems.kafka.producer.partitioner": partitioner})
    collector.send(OutgoingMessage("kafka", "out", key="k", value=b"by key"))  # its key: the producer's
    with pytest.raises(ConfigError) as refused:
        collector.send(OutgoingMessage("kafka", "out", key="user:1", value=b"a", partition_key="1"))
    message = str(refused.value)
    assert f"systems.kafka.producer.partitioner={partitioner}" in message and "partition_key" in message
    assert "murmur2_random" in message and "kafka.out" in message
    assert len(producer.sent) == 1


@pytest.mark.parametrize("partitioner", ["murmur2", "murmur2_random"])
def test_a_partition_key_on_a_murmur2_partitioner_is_placed(partitioner: str) -> None:
    collector, producer = _collector({"out": 4}, **{"systems.kafka.producer.partitioner": partitioner})
    collector.send(OutgoingMessage("kafka", "out", key="user:1", value=b"a", partition_key="1"))
    assert producer.sent == [("out", b"a", b"user:1", partition_for(b"1", 4), None, None)]


def test_a_grown_topics_partition_count_is_read_again_as_librdkafka_refreshes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(collector_module, "monotonic", lambda: now[0])
    collector, producer = _collector({"out": 4})
    pk = next(
        k
        for k in (str(n) for n in range(100))
        if partition_for(k.encode(), 4) != partition_for(k.encode(), 8)
    )
    collector.send(OutgoingMessage("kafka", "out", key="a", value=b"1", partition_key=pk))
    producer.counts["out"] = 8  # partitions added to the topic
    now[0] += 299
    collector.send(OutgoingMessage("kafka", "out", key="b", value=b"2", partition_key=pk))
    now[0] += 2  # past librdkafka's default topic.metadata.refresh.interval.ms (300 s)
    collector.send(OutgoingMessage("kafka", "out", key="c", value=b"3", partition_key=pk))
    assert [sent[3] for sent in producer.sent] == [
        partition_for(pk.encode(), 4),
        partition_for(pk.encode(), 4),
        partition_for(pk.encode(), 8),
    ]
    assert producer.asked == ["out", "out"]


def test_the_count_is_read_again_at_the_producers_own_metadata_refresh_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(collector_module, "monotonic", lambda: now[0])
    collector, producer = _collector(
        {"out": 4}, **{"systems.kafka.producer.topic.metadata.refresh.interval.ms": "60000"}
    )
    collector.send(OutgoingMessage("kafka", "out", key="a", value=b"1", partition_key="1"))
    now[0] += 59
    collector.send(OutgoingMessage("kafka", "out", key="b", value=b"2", partition_key="1"))
    now[0] += 2
    collector.send(OutgoingMessage("kafka", "out", key="c", value=b"3", partition_key="1"))
    assert producer.asked == ["out", "out"]
