"""KafkaProducer against the real broker: Java-compatible keyed partitioning, failures, transactions."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable

import pytest

import samsa.kafka.producer as producer_module
from samsa.kafka import (
    KafkaConsumer,
    KafkaProducer,
    KafkaSystemError,
    ProducerDeliveryError,
    RawMessage,
    TransactionError,
)

TopicFactory = Callable[..., str]


def _java_partition(key: bytes, partitions: int) -> int:
    """org.apache.kafka.common.utils.Utils.murmur2 + toPositive, as the Java DefaultPartitioner does."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(key)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length % 4
    tail = length - rest
    if rest == 3:
        h ^= key[tail + 2] << 16
    if rest >= 2:
        h ^= key[tail + 1] << 8
    if rest >= 1:
        h ^= key[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def test_idempotent_producers_connect_to_every_broker_at_once_unless_the_config_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka gets an idempotent producer's id only from a connected broker it learned, else on a
    # 500 ms timer: sparse connections made a new producer's first messages wait (bench/producer_start.py).
    made: list[dict[str, object]] = []

    class Recording:
        def __init__(self, conf: dict[str, object]) -> None:
            made.append(conf)
            self.produce = None

    monkeypatch.setattr(producer_module, "Producer", Recording)
    for extra in (
        {},
        {"transactional.id": "t"},  # one per exactly-once task: they keep connecting only where needed
        {"enable.idempotence": False},
        {"enable.sparse.connections": True},
    ):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", **extra})
    assert [conf.get("enable.sparse.connections") for conf in made] == [False, None, None, True]


def _read_all(consumer: KafkaConsumer, n: int, timeout: float = 10) -> list[RawMessage]:
    got: list[RawMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got.extend(consumer.consume(500, 0.2))
    return got


def test_keyed_messages_land_where_the_java_client_puts_them(
    topics: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topics(6)
    keys = [b"user-%d" % i for i in range(40)] + [b"", b"a", b"ab", b"abc"]
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for key in keys:
            producer.send(topic, b"v", key=key)
    with KafkaConsumer({"bootstrap.servers": kafka_bootstrap}) as consumer:
        consumer.assign({(topic, p): 0 for p in range(6)})
        msgs = _read_all(consumer, len(keys))
    assert sorted((m.key() or b"", m.partition()) for m in msgs) == sorted(
        (k, _java_partition(k, 6)) for k in keys
    )


def test_full_local_queue_waits_instead_of_failing(topics: TopicFactory, kafka_bootstrap: str) -> None:
    topic = topics(1)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "queue.buffering.max.messages": 10})
    for i in range(500):
        producer.send(topic, b"%d" % i, partition=0)
    producer.close()
    with KafkaConsumer({"bootstrap.servers": kafka_bootstrap}) as consumer:
        assert consumer.watermarks((topic, 0)) == (0, 500)


def test_broker_rejection_fails_flush_and_every_later_send(
    topics: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topics(1, config={"max.message.bytes": "200"})
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    producer.send(topic, b"small", partition=0)
    producer.send(topic, b"x" * 1000, partition=0)
    with pytest.raises(ProducerDeliveryError) as err:
        producer.flush(10)
    assert err.value.topic == topic and err.value.partition == 0
    assert err.value.error_name == "MSG_SIZE_TOO_LARGE"
    assert topic in str(err.value)
    with pytest.raises(ProducerDeliveryError):  # sticky: the task must fail, not go on
        producer.send(topic, b"more", partition=0)
    with pytest.raises(ProducerDeliveryError):
        producer.poll()
    with pytest.raises(ProducerDeliveryError):
        producer.close(1)


def test_unknown_partition_fails_delivery(topics: TopicFactory, kafka_bootstrap: str) -> None:
    topic = topics(1)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    producer.send(topic, b"v", partition=5)
    with pytest.raises(ProducerDeliveryError, match=rf"'{topic}' partition 5"):
        producer.flush(10)


def test_transaction_commit_visible_abort_hidden_to_read_committed(
    topics: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topics(1)
    tx = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{topic}"})
    tx.init_transactions()
    tx.begin_transaction()
    tx.send(topic, b"aborted", partition=0)
    tx.abort_transaction()
    tx.begin_transaction()
    tx.send(topic, b"committed", partition=0)
    tx.commit_transaction()
    tx.begin_transaction()
    tx.send(topic, b"open", partition=0)
    tx.flush()

    conf = {"bootstrap.servers": kafka_bootstrap, "isolation.level": "read_committed"}
    with KafkaConsumer(conf) as consumer:
        consumer.assign({(topic, 0): 0})
        assert [m.value() for m in _read_all(consumer, 2, timeout=1.5)] == [b"committed"]
        tx.commit_transaction()
        assert [m.value() for m in _read_all(consumer, 1, timeout=5)] == [b"open"]
    tx.close()


def test_transaction_calls_need_a_transactional_id(kafka_bootstrap: str) -> None:
    with (
        KafkaProducer({"bootstrap.servers": kafka_bootstrap}) as producer,
        pytest.raises(KafkaSystemError, match=r"transactional\.id"),
    ):
        producer.begin_transaction()


def test_commit_without_begin_is_a_transaction_error(kafka_bootstrap: str) -> None:
    tx = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "transactional.id": "tx-no-begin"})
    tx.init_transactions()
    with pytest.raises(TransactionError, match="commit_transaction"):
        tx.commit_transaction()
    tx.close()


def test_a_fenced_producer_fails_fatally_and_closes_without_a_warning(
    topics: TopicFactory, kafka_bootstrap: str
) -> None:
    topic = topics(1)
    conf = {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-fenced-{topic}"}
    zombie = KafkaProducer(conf)
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send(topic, b"from the zombie", partition=0)
    newer = KafkaProducer(conf)
    newer.init_transactions()  # fences the zombie's epoch at the broker
    with pytest.raises((TransactionError, KafkaSystemError)) as raised:
        zombie.commit_transaction()
    if isinstance(raised.value, TransactionError):
        assert raised.value.fatal, raised.value
    # confluent-kafka's close tries to abort the fenced transaction and warns that it cannot.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(KafkaSystemError):  # the close's flush re-raises the fatal error
            zombie.close()
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
    newer.close()
