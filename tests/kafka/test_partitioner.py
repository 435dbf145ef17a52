"""The Java-compatible partitioner: Kafka's own murmur2 test vectors, and librdkafka's choices on a broker."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from samsa.kafka import KafkaConsumer, KafkaProducer, RawMessage
from samsa.kafka.partitioner import murmur2, partition_for, partitions_for

TopicFactory = Callable[..., str]

# org.apache.kafka.common.utils.UtilsTest#testMurmur2: the Java client's values.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key", list(JAVA_MURMUR2))
def test_murmur2_matches_the_java_client(key: bytes) -> None:
    assert murmur2(key) == JAVA_MURMUR2[key]


def test_partition_is_the_positive_hash_modulo_the_partition_count() -> None:
    for key, value in JAVA_MURMUR2.items():
        for n in (1, 2, 3, 7, 64):
            assert partition_for(key, n) == (value & 0x7FFFFFFF) % n


def test_every_tail_length_and_non_ascii_bytes_stay_in_range() -> None:
    rng = random.Random(5)
    for length in range(0, 70):
        key = bytes(rng.getrandbits(8) for _ in range(length))
        h = murmur2(key)
        assert -(2**31) <= h < 2**31
        assert 0 <= partition_for(key, 5) < 5
    assert murmur2(b"\xff" * 4) != murmur2(b"\xff" * 5)


def _read_all(consumer: KafkaConsumer, n: int, timeout: float = 15) -> list[RawMessage]:
    got: list[RawMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got.extend(consumer.consume(1000, 0.2))
    return got


def test_keys_land_where_librdkafka_puts_them(topics: TopicFactory, kafka_bootstrap: str) -> None:
    """Samsa's producer (librdkafka `murmur2_random`, partition left to it) and `partition_for` agree."""
    partitions = 7
    topic = topics(partitions)
    rng = random.Random(3)
    keys = [b"user-%d" % i for i in range(300)]
    keys += [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 33))) for _ in range(200)]
    keys += [f"wörd-{i}".encode() for i in range(50)]
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for key in keys:
            producer.send(topic, b"v", key=key, partition=None)
    with KafkaConsumer({"bootstrap.servers": kafka_bootstrap}) as consumer:
        consumer.assign({(topic, p): 0 for p in range(partitions)})
        msgs = _read_all(consumer, len(keys))
    landed = {m.key(): m.partition() for m in msgs}
    assert len(landed) == len(set(keys))
    wrong = {k: p for k, p in landed.items() if p != partition_for(k or b"", partitions)}
    assert not wrong, f"{len(wrong)} key(s) where librdkafka disagrees, e.g. {next(iter(wrong.items()))}"
    assert len(set(landed.values())) == partitions  # the keys spread: the check compared real choices


def test_partitions_for_a_batch_agree_with_partition_for_for_any_key_length():
    rng = random.Random(5)
    mixed = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(3000)]
    same = [f"key-{i:010d}".encode() for i in range(2000)]
    for keys in (mixed, same, [b""], []):
        for n in (1, 4, 7, 100):
            assert partitions_for(keys, n) == [partition_for(k, n) for k in keys]
