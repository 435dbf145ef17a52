"""The in-memory system through samsa.kafka's wrappers: records, offsets, watermarks, assignment, admin."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
import uuid

import pytest

from samsa.kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    KafkaAdmin,
    KafkaConfigError,
    KafkaConsumer,
    KafkaProducer,
    KafkaSystemError,
    ProducerDeliveryError,
    TopicMismatchError,
    TopicNotFoundError,
)
from samsa.kafka.inmemory import auto_create_topics, forget
from samsa.kafka.message import TIMESTAMP_CREATE_TIME
from samsa.kafka.partitioner import partition_for


def _read_all(consumer, tps, count: int):
    consumer.assign({tp: OFFSET_BEGINNING for tp in tps})
    got, deadline = [], time.monotonic() + 10
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.consume(1000, 0.2)
    return got


def test_records_keep_key_value_headers_timestamp_and_get_offsets_from_zero(admin, clients):
    admin.create_topic("t", 1)
    producer = clients("producer")
    producer.send("t", b"v0", key=b"k0", partition=0, headers=[("h", b"x"), ("n", None)], timestamp=1234)
    producer.send("t", None, key=b"k1", partition=0)
    producer.flush()
    before = int(time.time() * 1000)
    a, b = _read_all(clients("consumer"), [("t", 0)], 2)
    assert (a.topic(), a.partition(), a.offset(), a.key(), a.value()) == ("t", 0, 0, b"k0", b"v0")
    assert list(a.headers()) == [("h", b"x"), ("n", None)]
    assert a.timestamp() == (TIMESTAMP_CREATE_TIME, 1234)
    assert (b.offset(), b.value(), b.headers()) == (1, None, None)
    assert b.timestamp()[1] >= before - 60_000, "no timestamp given: the time of sending"


def test_a_keyed_record_goes_where_the_java_client_puts_it_and_null_keys_spread(admin, clients):
    admin.create_topic("t", 4)
    producer = clients("producer")
    keys = [f"key-{i}".encode() for i in range(40)]
    for key in keys:
        producer.send("t", b"v", key=key)
    for _ in range(200):
        producer.send("t", b"v")
    producer.flush()
    got = _read_all(clients("consumer"), [("t", p) for p in range(4)], 240)
    assert {(m.key(), m.partition()) for m in got if m.key()} == {(k, partition_for(k, 4)) for k in keys}
    assert {m.partition() for m in got if m.key() is None} == {0, 1, 2, 3}


def test_watermarks_and_offsets_for_times(admin, clients):
    admin.create_topic("t", 2)
    producer = clients("producer")
    for i, ts in enumerate((100, 200, 300)):
        producer.send("t", str(i).encode(), partition=0, timestamp=ts)
    producer.flush()
    consumer = clients("consumer")
    assert consumer.watermarks(("t", 0)) == (0, 3)
    assert consumer.watermarks(("t", 1)) == (0, 0)
    assert consumer.offsets_for_times([("t", 0), ("t", 1)], 150) == {("t", 0): 1, ("t", 1): 0}
    assert consumer.offsets_for_times([("t", 0)], 300) == {("t", 0): 2}
    assert consumer.offsets_for_times([("t", 0)], 301) == {("t", 0): 3}, "none at or after: the end"
    with pytest.raises(KafkaSystemError, match="missing"):
        consumer.watermarks(("missing", 0))


def test_position_seek_pause_and_resume(admin, clients):
    admin.create_topic("t", 2)
    producer = clients("producer")
    for p in (0, 1):
        for i in range(5):
            producer.send("t", f"{p}:{i}".encode(), partition=p)
    producer.flush()
    consumer = clients("consumer")
    consumer.assign({("t", 0): 3, ("t", 1): OFFSET_END})
    assert consumer.position([("t", 0)]) == {("t", 0): OFFSET_INVALID}, "nothing read yet"
    assert [m.value() for m in consumer.consume(10, 1)] == [b"0:3", b"0:4"]
    assert consumer.position([("t", 0), ("t", 1)]) == {("t", 0): 5, ("t", 1): OFFSET_INVALID}
    consumer.seek(("t", 0), 1)
    consumer.pause([("t", 0)])
    producer.send("t", b"1:5", partition=1)
    producer.flush()
    assert [m.value() for m in consumer.consume(10, 1)] == [b"1:5"], "the paused partition gives nothing"
    consumer.resume([("t", 0)])
    assert [m.value() for m in consumer.consume(2, 1)] == [b"0:1", b"0:2"]
    with pytest.raises(KafkaSystemError, match="assigned"):
        consumer.seek(("other", 0), 0)
    assert sorted(consumer.assignment()) == [("t", 0), ("t", 1)]


def test_consume_waits_for_a_message_and_returns_empty_after_the_timeout(admin, clients):
    admin.create_topic("t", 1)
    consumer = clients("consumer")
    consumer.assign({("t", 0): OFFSET_BEGINNING})
    start = time.monotonic()
    assert consumer.consume(10, 0.2) == []
    assert time.monotonic() - start >= 0.15


def test_admin_creates_describes_validates_and_deletes_topics(admin, clients):
    assert admin.ensure_topic("c", 3, {"cleanup.policy": "compact", "min.compaction.lag.ms": "5000"}) is True
    assert admin.ensure_topic("c", 3, {"cleanup.policy": "compact"}) is False
    config = admin.topic_config("c")
    assert (config["cleanup.policy"], config["min.compaction.lag.ms"]) == ("compact", "5000")
    assert config["delete.retention.ms"] == "86400000", "broker defaults are part of the effective config"
    assert admin.require_topics(["c"]) == {"c": 3}
    with pytest.raises(TopicMismatchError, match="partitions"):
        admin.ensure_topic("c", 2)
    with pytest.raises(TopicMismatchError, match=r"cleanup\.policy"):
        admin.ensure_topic("c", 3, {"cleanup.policy": "delete"})
    with pytest.raises(KafkaSystemError, match="already exists"):
        admin.create_topic("c", 3)
    with pytest.raises(TopicNotFoundError, match="nope"):
        admin.topic_config("nope")
    admin.delete_topics(["c", "never-was"])
    assert admin.partition_counts(["c"]) == {"c": None}
    assert "c" not in admin.metadata().topics


def test_a_failed_delivery_is_raised_naming_the_topic(admin, clients):
    admin.create_topic("small", 1, {"max.message.bytes": "100"})
    producer = clients("producer")
    producer.send("missing", b"v")
    with pytest.raises(ProducerDeliveryError, match="missing"):
        producer.flush()
    producer = clients("producer")
    producer.send("small", b"x" * 200)
    with pytest.raises(ProducerDeliveryError, match="MSG_SIZE_TOO_LARGE"):
        producer.flush()
    producer = clients("producer")
    producer.send("small", b"x", partition=7)
    with pytest.raises(ProducerDeliveryError, match="partition"):
        producer.flush()


def test_a_broker_set_to_auto_create_topics_makes_a_topic_a_producer_sends_to_first():
    url = f"inmemory://auto-{uuid.uuid4().hex[:8]}"
    auto_create_topics(url, partitions=3)
    try:
        producer = KafkaProducer({"bootstrap.servers": url})
        producer.send("made-by-send", b"v", b"k")
        producer.send("made-too", b"v", partition=2)  # an explicit partition within the made count
        producer.flush()
        producer.close()
        admin = KafkaAdmin({"bootstrap.servers": url})
        try:
            assert admin.require_topics(["made-by-send", "made-too"]) == {"made-by-send": 3, "made-too": 3}
        finally:
            admin.close()
    finally:
        forget(url)
    # Forgotten with its broker: the default again, where a send to a missing topic fails.
    producer = KafkaProducer({"bootstrap.servers": url})
    producer.send("made-by-send", b"v")
    with pytest.raises(ProducerDeliveryError, match="made-by-send"):
        producer.flush()
    forget(url)


def test_the_records_an_in_process_broker_holds_are_not_left_to_the_garbage_collector():
    # A test's hundreds of thousands of records as tracked objects made every full collection walk them:
    # a quarter of a TestRunner's time. Stored as tuples of bytes and ints, the collector drops them.
    url = f"inmemory://gc-{uuid.uuid4().hex}"
    try:
        with KafkaAdmin({"bootstrap.servers": url}) as admin:
            admin.create_topic("t", 2)
        producer = KafkaProducer({"bootstrap.servers": url})
        gc.collect()
        before = len(gc.get_objects())
        for i in range(20_000):
            headers = [("h", b"x"), ("n", None)] if i % 2 else None
            producer.send("t", b"v%d" % i, key=b"k%d" % i, headers=headers, timestamp=1_000 + i)
        producer.close()
        gc.collect()
        assert len(gc.get_objects()) - before < 5_000  # as objects: 20,000 records and 10,000 header lists
        got = _read_all(KafkaConsumer({"bootstrap.servers": url}), [("t", 0), ("t", 1)], 20_000)
        assert len(got) == 20_000
        one = next(m for m in got if m.key() == b"k7")
        assert (one.value(), one.headers(), one.timestamp()) == (
            b"v7",
            [("h", b"x"), ("n", None)],
            (TIMESTAMP_CREATE_TIME, 1_007),
        )
    finally:
        forget(url)


def test_a_malformed_url_is_named():
    with pytest.raises(KafkaConfigError, match="inmemory://NAME"):
        KafkaAdmin({"bootstrap.servers": "inmemory:relative/dir"})


def test_processes_share_a_file_backed_broker(tmp_path):
    url = f"inmemory://{tmp_path / 'shared'}"
    admin = KafkaAdmin({"bootstrap.servers": url})
    admin.create_topic("t", 2)
    consumer = KafkaConsumer({"bootstrap.servers": url})
    consumer.assign({("t", 0): OFFSET_BEGINNING, ("t", 1): OFFSET_BEGINNING})
    script = (
        "import sys; from samsa.kafka import KafkaProducer\n"
        "p = KafkaProducer({'bootstrap.servers': sys.argv[1]})\n"
        "for i in range(50): p.send('t', str(i).encode(), key=str(i).encode())\n"
        "p.flush()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, url])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        got += consumer.consume(100, 0.5)  # waits for the other process's records
    assert proc.wait(30) == 0
    assert sorted(int(m.value()) for m in got) == list(range(50))
    assert sum(consumer.watermarks(("t", p))[1] for p in (0, 1)) == 50
    consumer.close()
