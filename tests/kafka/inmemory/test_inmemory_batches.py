"""The in-memory system's fast paths: batch appends, raw record reads, messages like librdkafka's, and the
producer's placement of repeated keys."""

from __future__ import annotations

import gc
import uuid

import pytest
from confluent_kafka import KafkaException

from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin
from samsa.kafka.inmemory import broker, forget
from samsa.kafka.message import TIMESTAMP_CREATE_TIME
from samsa.kafka.partitioner import partition_for


def _read_all(clients, tp):
    """Every record of a partition without transactions (as many as its high watermark)."""
    consumer = clients("consumer")
    consumer.assign({tp: OFFSET_BEGINNING})
    _, high = consumer.watermarks(tp)
    got = []
    while len(got) < high and (batch := consumer.consume(1000, 5)):
        got += batch
    return got


def test_a_batch_is_appended_in_order_after_what_is_there_keeping_timestamps_and_headers(admin, clients, url):
    admin.create_topic("t", 2)
    producer = clients("producer")
    producer.send("t", b"first", key=b"k", partition=1, timestamp=1)
    producer.flush()
    log = broker(url)
    batch = [
        (b"k", b"v1", 5_000, [("h", b"x"), ("n", None)]),
        (None, None, 5_000, None),
        (b"k", b"v3", 7, None),
    ]
    assert log.append_batch("t", 1, batch) == 1
    assert log.append_batch("t", 1, []) == 4, "an empty batch stores nothing"
    assert log.watermarks("t", 1) == (0, 4, 4)
    got = _read_all(clients, ("t", 1))
    assert [(m.offset(), m.key(), m.value(), m.timestamp(), m.headers()) for m in got] == [
        (0, b"k", b"first", (TIMESTAMP_CREATE_TIME, 1), None),
        (1, b"k", b"v1", (TIMESTAMP_CREATE_TIME, 5_000), [("h", b"x"), ("n", None)]),
        (2, None, None, (TIMESTAMP_CREATE_TIME, 5_000), None),
        (3, b"k", b"v3", (TIMESTAMP_CREATE_TIME, 7), None),
    ]
    assert all((m.topic(), m.partition(), m.error()) == ("t", 1, None) for m in got)
    # records(): the same fields as read()'s messages, as the broker keeps them.
    records, after = log.records("t", 1, 1, 10, True)
    messages, _ = log.read("t", 1, 1, 10, True)
    assert after == 4
    assert [tuple(r) for r in records] == [tuple(m) for m in messages]
    assert records[0][2:6] == (1, b"k", b"v1", (TIMESTAMP_CREATE_TIME, 5_000))


def test_a_batch_with_a_record_too_large_for_the_topic_stores_none_of_it(admin, url):
    admin.create_topic("small", 1, {"max.message.bytes": "100"})
    log = broker(url)
    with pytest.raises(KafkaException, match=r"max\.message\.bytes=100"):
        log.append_batch("small", 0, [(None, b"ok", 1, None), (None, b"x" * 200, 1, None)])
    assert log.watermarks("small", 0) == (0, 0, 0)
    with pytest.raises(KafkaException, match="partition 3"):
        log.append_batch("small", 3, [(None, b"ok", 1, None)])


def test_records_stop_at_the_last_stable_offset_and_skip_aborted_records_and_markers(admin, clients, url):
    admin.create_topic("t", 1)
    txn = clients("producer", transactional_id="tx")
    txn.init_transactions()
    txn.begin_transaction()
    txn.send("t", b"aborted", partition=0)
    txn.abort_transaction()
    log = broker(url)
    log.append_batch("t", 0, [(None, b"plain", 1, None)])
    txn.begin_transaction()
    txn.send("t", b"open", partition=0)
    txn.flush()
    records, after = log.records("t", 0, 0, 100, True)
    assert ([r[4] for r in records], after) == ([b"plain"], 3), "up to the open transaction's first record"
    records, after = log.records("t", 0, 0, 100, False)
    assert ([r[4] for r in records], after) == ([b"aborted", b"plain", b"open"], 4)
    txn.commit_transaction()
    records, after = log.records("t", 0, 3, 100, True)
    assert ([r[4] for r in records], after) == ([b"open"], 5)


def test_messages_are_equal_only_to_themselves_and_their_headers_are_a_copy(admin, clients, url):
    admin.create_topic("t", 1)
    producer = clients("producer")
    for _ in range(2):
        producer.send("t", b"same", key=b"k", partition=0, headers=[("h", b"x")], timestamp=9)
    producer.flush()
    a, b = broker(url).read("t", 0, 0, 10, True)[0]
    assert a == a and a != b, "identity, as confluent_kafka.Message: not the fields"
    assert len({a, b}) == 2 and len(a) == len(b"same")
    got = a.headers()
    assert got == [("h", b"x")]
    got.append(("added", None))
    assert a.headers() == [("h", b"x")], "a caller's change to the list changes no record"
    assert "InMemoryMessage('t', 0, 0" in repr(a)


def test_the_records_of_a_batch_are_not_left_to_the_garbage_collector():
    # As a producer's records: plain tuples of bytes and ints, which the collector stops tracking.
    url = f"inmemory://batch-gc-{uuid.uuid4().hex}"
    try:
        with KafkaAdmin({"bootstrap.servers": url}) as admin:
            admin.create_topic("t", 1)
        log = broker(url)
        batch = [
            (b"k%d" % i, b"v%d" % i, 1_000 + i % 3, [("h", b"x")] if i % 2 else None) for i in range(20_000)
        ]
        gc.collect()
        before = len(gc.get_objects())
        log.append_batch("t", 0, batch)
        del batch
        gc.collect()
        assert len(gc.get_objects()) - before < 2_000
        records, _ = log.records("t", 0, 0, 20_000, True)
        assert len(records) == 20_000 and records[7][6] == (("h", b"x"),)
    finally:
        forget(url)


def test_a_repeated_key_goes_where_murmur2_puts_it_among_the_topics_partitions_of_the_moment(admin, clients):
    admin.create_topic("t", 4)
    producer = clients("producer")
    keys = [b"k%d" % (i % 7) for i in range(70)]
    for key in keys:
        producer.send("t", b"v", key=key)
    producer.flush()
    got = [m for p in range(4) for m in _read_all(clients, ("t", p))]
    assert sorted((m.key(), m.partition()) for m in got) == sorted((k, partition_for(k, 4)) for k in keys)
    # The topic made again with other partitions: the same producer places by the new count.
    admin.delete_topics(["t"])
    admin.create_topic("t", 3)
    for key in keys[:7]:
        producer.send("t", b"v", key=key)
    producer.flush()
    got = [m for p in range(3) for m in _read_all(clients, ("t", p))]
    assert sorted((m.key(), m.partition()) for m in got) == sorted((k, partition_for(k, 3)) for k in keys[:7])
