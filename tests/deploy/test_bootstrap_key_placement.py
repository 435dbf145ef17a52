"""State bootstrap's key placement on a real broker: librdkafka's CRC32 placement as its producer places keys,
and which hash the inputs' records show (murmur2, consistent, mixed or neither: refused)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from count_job import count_job

from samsa.deploy.bootstrap import key_partitioner
from samsa.deploy.exceptions import BootstrapError
from samsa.deploy.key_placement import CONSISTENT, MURMUR2, batch_placer, detect_partitioner
from samsa.kafka import KafkaProducer
from samsa.kafka.partitioner import consistent_partition_for, consistent_partitions_for, partition_for
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig

PARTITIONS = 4


def _send(bootstrap: str, topic: str, keys: list[bytes], partitioner: str | None) -> None:
    """Keyed records through Samsa's producer, with librdkafka's `partitioner` (None: Samsa's default)."""
    config: dict[str, str] = {"bootstrap.servers": bootstrap}
    if partitioner is not None:
        config["partitioner"] = partitioner
    producer = KafkaProducer(config)
    try:
        for key in keys:
            producer.send(topic, b"v", key=key)
        producer.flush()
    finally:
        producer.close()


def _job(job_config: Callable[..., dict[str, str]], topics: Callable[..., str], words: str) -> JobConfig:
    return JobConfig(Config(count_job(job_config, words, topics(PARTITIONS))))


@pytest.mark.parametrize("partitioner", ["consistent_random", "consistent"])
def test_crc32_placement_is_where_librdkafka_puts_each_key(kafka_bootstrap, topics, read_topic, partitioner):
    # 7 partitions: about half the keys have a CRC32 with the high bit set, where a sign mask would differ.
    topic = topics(7)
    keys = [f"key-{i}".encode() for i in range(300)] + [bytes([i, 255 - i]) for i in range(50)]
    _send(kafka_bootstrap, topic, keys, partitioner)
    rows = read_topic(topic)
    assert len(rows) == len(keys)
    placed = {key: partition for partition, _, key, _ in rows}
    assert placed == {key: consistent_partition_for(key, 7) for key in keys}
    assert consistent_partitions_for(keys, 7) == [placed[key] for key in keys]
    assert sum(placed[k] != partition_for(k, 7) for k in keys) > len(keys) // 2  # the hashes do differ


def test_placement_follows_the_hash_the_inputs_show(job_config, topics, kafka_bootstrap, produce):
    keys = [f"w{i}".encode() for i in range(40)]
    murmur2, crc32, mixed, odd = (topics(PARTITIONS) for _ in range(4))
    _send(kafka_bootstrap, murmur2, keys, None)  # Samsa's producer: murmur2_random
    _send(kafka_bootstrap, crc32, keys, "consistent_random")  # confluent-kafka's default
    _send(kafka_bootstrap, mixed, keys[:20], None)
    _send(kafka_bootstrap, mixed, keys[20:], "consistent_random")

    choice = detect_partitioner(_job(job_config, topics, murmur2), PARTITIONS)
    assert choice.partitioner == MURMUR2, choice
    assert "40 keyed record(s) sampled" in choice.line()
    choice = detect_partitioner(_job(job_config, topics, crc32), PARTITIONS)
    assert choice.partitioner == CONSISTENT, choice
    assert "CRC32" in choice.line()

    with pytest.raises(BootstrapError, match="place keys by two hashes") as refused:
        detect_partitioner(_job(job_config, topics, mixed), PARTITIONS)
    assert f"kafka.{mixed} partition " in str(refused.value)
    assert "--partitioner murmur2|consistent" in str(refused.value)
    forced = detect_partitioner(_job(job_config, topics, mixed), PARTITIONS, "consistent")
    assert forced.partitioner == CONSISTENT and "--partitioner" in forced.line()

    # A key in a partition neither hash gives it (an explicit partition): named with its offset.
    key = keys[0]
    wrong = min({0, 1, 2, 3} - {partition_for(key, PARTITIONS), consistent_partition_for(key, PARTITIONS)})
    produce(odd, [(b"", "empty keys are skipped"), (None, "so are null keys")], partition=wrong)
    produce(odd, [(key, "x")], partition=wrong)
    with pytest.raises(BootstrapError) as refused:
        detect_partitioner(_job(job_config, topics, odd), PARTITIONS)
    assert f"kafka.{odd} partition {wrong} offset 2 holds key {key!r}, which neither murmur2" in str(
        refused.value
    )


def test_inputs_without_keyed_records_assume_murmur2_and_say_so(job_config, topics, caplog):
    words = topics(PARTITIONS)
    with caplog.at_level(logging.WARNING):
        choice = detect_partitioner(_job(job_config, topics, words), PARTITIONS)
    assert choice.partitioner == MURMUR2
    assert "assumed" in choice.line()
    assert f"kafka.{words}" in caplog.text and "--partitioner consistent" in caplog.text


def test_both_spark_paths_place_by_the_plans_hash():
    keys = [f"k{i}".encode() for i in range(100)]
    for partitioner, one in ((MURMUR2, partition_for), (CONSISTENT, consistent_partition_for)):
        rdd_place = key_partitioner(7, partitioner)  # the RDD job's
        assert [rdd_place(k) for k in keys] == [one(k, 7) for k in keys]
        assert batch_placer(partitioner)(keys, 7) == [one(k, 7) for k in keys]  # the Arrow job's
