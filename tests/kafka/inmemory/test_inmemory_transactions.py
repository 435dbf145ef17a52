"""Transactions on the in-memory system: commit/abort markers, read_committed vs read_uncommitted, fencing."""

from __future__ import annotations

import threading

import pytest

from samsa.kafka import OFFSET_BEGINNING, KafkaSystemError, TransactionError
from samsa.kafka.inmemory.memory import MemoryLog, _Partition


def _values(consumer, tp=("t", 0), timeout: float = 0.2) -> list[bytes]:
    out: list[bytes] = []
    while batch := consumer.consume(100, timeout):
        out += [m.value() for m in batch]
    return out


@pytest.fixture
def txn(admin, clients):
    admin.create_topic("t", 1)
    producer = clients("producer", transactional_id="tx-1")
    producer.init_transactions()
    return producer


def _reader(clients, isolation: str = "read_committed"):
    consumer = clients("consumer", isolation_level=isolation)
    consumer.assign({("t", 0): OFFSET_BEGINNING})
    return consumer


def test_a_committed_transaction_is_read_and_its_marker_takes_an_offset(txn, clients):
    txn.begin_transaction()
    txn.send("t", b"a", partition=0)
    txn.send("t", b"b", partition=0)
    txn.commit_transaction()
    reader = _reader(clients)
    assert _values(reader) == [b"a", b"b"]
    assert reader.watermarks(("t", 0)) == (0, 3), "two records and the commit marker"
    assert reader.position([("t", 0)]) == {("t", 0): 3}, "the reader moves past the marker"


def test_an_aborted_transaction_is_hidden_from_read_committed_only(txn, clients):
    txn.begin_transaction()
    txn.send("t", b"lost", partition=0)
    txn.abort_transaction()
    txn.begin_transaction()
    txn.send("t", b"kept", partition=0)
    txn.commit_transaction()
    assert _values(_reader(clients)) == [b"kept"]
    assert _values(_reader(clients, "read_uncommitted")) == [b"lost", b"kept"]
    assert _reader(clients).watermarks(("t", 0)) == (0, 4)


def test_read_committed_stops_at_the_last_stable_offset_of_an_open_transaction(txn, clients):
    plain = clients("producer")
    plain.send("t", b"before", partition=0)
    plain.flush()
    txn.begin_transaction()
    txn.send("t", b"open", partition=0)
    plain.send("t", b"after", partition=0)
    plain.flush()
    committed, uncommitted = _reader(clients), _reader(clients, "read_uncommitted")
    assert _values(committed) == [b"before"], "nothing past the open transaction's first record"
    assert committed.position([("t", 0)]) == {("t", 0): 1}
    assert committed.watermarks(("t", 0)) == (0, 3), "the high watermark counts the open records"
    assert _values(uncommitted) == [b"before", b"open", b"after"]
    txn.commit_transaction()
    assert _values(committed) == [b"open", b"after"]


def test_a_newer_producer_of_the_id_fences_the_older_and_aborts_its_open_transaction(txn, clients):
    txn.begin_transaction()
    txn.send("t", b"zombie", partition=0)
    newer = clients("producer", transactional_id="tx-1")
    newer.init_transactions()
    with pytest.raises(KafkaSystemError, match="_FENCED"):
        txn.send("t", b"more", partition=0)
    with pytest.raises(KafkaSystemError, match="_FENCED"):
        txn.commit_transaction()
    newer.begin_transaction()
    newer.send("t", b"fresh", partition=0)
    newer.commit_transaction()
    assert _values(_reader(clients)) == [b"fresh"], "the fenced producer's open transaction was aborted"


def test_a_fenced_producer_fails_its_next_transaction_call_fatally(txn, clients):
    clients("producer", transactional_id="tx-1").init_transactions()
    with pytest.raises(TransactionError, match="_FENCED") as info:
        txn.begin_transaction()
    assert info.value.fatal


def test_a_transactional_producer_sends_only_inside_a_transaction(txn):
    with pytest.raises(KafkaSystemError, match="_STATE"):
        txn.send("t", b"x", partition=0)
    txn.begin_transaction()
    with pytest.raises(TransactionError, match="_STATE"):
        txn.begin_transaction()


def test_a_failed_delivery_in_a_transaction_makes_commit_fail_until_aborted(txn, clients):
    txn.begin_transaction()
    txn.send("t", b"ok", partition=0)
    txn.send("missing", b"lost")
    with pytest.raises(KafkaSystemError):
        txn.commit_transaction()
    txn.abort_transaction()
    txn.begin_transaction()
    txn.send("t", b"retry", partition=0)
    txn.commit_transaction()
    assert _values(_reader(clients)) == [b"retry"]


def test_a_lock_free_read_racing_a_partitions_first_transactional_record_never_returns_it():
    # The reader is switched out right after it finds the partition free of transactions (as the GIL may
    # do at any bytecode) while a producer appends its transaction's first record there; that record must
    # not come back as plain data, since the transaction is then aborted.
    class SwitchAfterTheFlag(_Partition):
        @property
        def transactional(self) -> bool:
            flag = bool(self.__dict__.get("_flag", False))
            if threading.current_thread().name == "reader":
                appended.wait(5)
            return flag

        @transactional.setter
        def transactional(self, value: bool) -> None:
            self.__dict__["_flag"] = value

    appended = threading.Event()
    log = MemoryLog("inmemory://race-test")
    log.create_topic("t", 1, {})
    log._topics["t"].partitions[0] = SwitchAfterTheFlag()
    epoch = log.init_producer("tx")
    got: list[tuple[list[bytes | None], int]] = []

    def read() -> None:
        messages, after = log.read("t", 0, 0, 100, True)
        got.append(([m.value() for m in messages], after))

    reader = threading.Thread(target=read, name="reader")
    reader.start()
    log.append("t", 0, b"k", b"uncommitted", 1, None, ("tx", epoch))
    appended.set()
    reader.join(10)
    log.end_transaction("tx", epoch, commit=False)
    assert got == [([], 0)]
