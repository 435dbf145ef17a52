"""The in-process broker: per-partition lists of records, one lock, reads as list slices."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from samsa.kafka.inmemory.log import (
    TOPIC_DEFAULTS,
    check_size,
    fenced,
    size_limit,
    unknown_partition,
    unknown_topic,
)
from samsa.kafka.inmemory.message import (
    ABORT_MARKER,
    COMMIT_MARKER,
    DATA,
    InMemoryMessage,
    Record,
    StoredHeaders,
    Transaction,
    as_message,
    record,
    stored_headers,
)
from samsa.kafka.message import TIMESTAMP_CREATE_TIME, SendHeaders

# A record is kept as a plain tuple (message.Record; its offset is its index), which the garbage collector
# stops tracking after its first pass: as objects, a test's hundreds of thousands of records made the
# collector's full passes a quarter of a TestRunner's run. Reads copy them into messages.


@dataclass
class _Partition:
    log: list[Record] = field(default_factory=list)
    #: First offset of each open transaction here: the last stable offset is the least of them.
    open: dict[Transaction, int] = field(default_factory=dict)
    #: Whether any transactional record or marker is here; a partition without is read by plain slicing.
    transactional: bool = False

    def stable(self) -> int:
        return min(self.open.values()) if self.open else len(self.log)


@dataclass
class _Topic:
    partitions: list[_Partition]
    config: dict[str, str]
    max_bytes: int | None = None


@dataclass
class _Producer:
    epoch: int = 0
    txn: Transaction | None = None
    touched: set[tuple[str, int]] = field(default_factory=set)


class MemoryLog:
    """The broker of one `inmemory://NAME` in this process."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._topics: dict[str, _Topic] = {}
        self._producers: dict[str, _Producer] = {}
        self._lock = threading.Lock()
        self._appended = threading.Condition(self._lock)
        self._waiting = 0  # consumers blocked in wait(): an append wakes them only when there are some
        self._stamp = (TIMESTAMP_CREATE_TIME, 0)  # the last appended record's timestamp

    # -- topics ---------------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, config: Mapping[str, str]) -> bool:
        with self._lock:
            if name in self._topics:
                return False
            parts = [_Partition() for _ in range(partitions)]
            self._topics[name] = _Topic(parts, dict(config), size_limit(config))
            return True

    def delete_topic(self, name: str) -> bool:
        with self._lock:
            return self._topics.pop(name, None) is not None

    def partition_counts(self) -> dict[str, int]:
        return {name: len(t.partitions) for name, t in list(self._topics.items())}

    def partitions(self, topic: str) -> int | None:
        t = self._topics.get(topic)
        return None if t is None else len(t.partitions)

    def topic_config(self, name: str) -> dict[str, str] | None:
        t = self._topics.get(name)
        return None if t is None else {**TOPIC_DEFAULTS, **t.config}

    def _partition(self, topic: str, partition: int) -> _Partition:
        return self._topic_partition(topic, partition)[1]

    def _topic_partition(self, topic: str, partition: int) -> tuple[_Topic, _Partition]:
        t = self._topics.get(topic)
        if t is None:
            raise unknown_topic(topic, self.url)
        if not 0 <= partition < len(t.partitions):
            raise unknown_partition(topic, partition, len(t.partitions))
        return t, t.partitions[partition]

    # -- records --------------------------------------------------------------------------------------------
    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: StoredHeaders | None,
        producer: tuple[str, int] | None,
    ) -> int:
        with self._lock:
            # _topic_partition inlined: this is every produced record's path.
            t = self._topics.get(topic)
            if t is None:
                raise unknown_topic(topic, self.url)
            parts = t.partitions
            if not 0 <= partition < len(parts):
                raise unknown_partition(topic, partition, len(parts))
            p = parts[partition]
            if t.max_bytes is not None:
                check_size(topic, t.max_bytes, key, value, headers)
            log = p.log
            offset = len(log)
            txn = None
            if producer is not None:
                txn = self._transaction_of(*producer)
                self._producers[producer[0]].touched.add((topic, partition))
                p.open.setdefault(txn, offset)
                p.transactional = True
            stamp = self._stamp
            if stamp[1] != timestamp_ms:  # records sent in one tick share their timestamp pair
                stamp = self._stamp = (TIMESTAMP_CREATE_TIME, timestamp_ms)
            log.append((topic, partition, offset, key, value, stamp, headers, DATA, txn))
            if self._waiting:
                self._appended.notify_all()
            return offset

    def append_batch(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None, int, SendHeaders | None]],
    ) -> int:
        # Headers normalized once per record, outside the lock.
        stored = [None if r[3] is None else stored_headers(r[3]) for r in records]
        with self._lock:
            t, p = self._topic_partition(topic, partition)
            if t.max_bytes is not None:
                for (key, value, _, _), kept in zip(records, stored, strict=True):  # all or none, as a batch
                    check_size(topic, t.max_bytes, key, value, kept)
            first = len(p.log)
            # A batch's records share a timestamp, or a few: one pair for each.
            stamps = {ts: (TIMESTAMP_CREATE_TIME, ts) for ts in {r[2] for r in records}}
            p.log.extend(
                [
                    (
                        topic,
                        partition,
                        offset,
                        key,
                        value,
                        stamps[ts],
                        kept,
                        DATA,
                        None,
                    )
                    for offset, (key, value, ts, _), kept in zip(
                        range(first, first + len(records)), records, stored, strict=True
                    )
                ]
            )
            if self._waiting:
                self._appended.notify_all()
            return first

    def _transaction_of(self, transactional_id: str, epoch: int) -> Transaction:
        state = self._producers.get(transactional_id)
        if state is None or state.epoch != epoch:
            raise fenced(transactional_id, epoch)
        if state.txn is None:
            state.txn = Transaction()
        return state.txn

    def read(
        self, topic: str, partition: int, offset: int, max_messages: int, committed: bool
    ) -> tuple[list[InMemoryMessage], int]:
        records, stop = self.records(topic, partition, offset, max_messages, committed)
        return list(map(as_message, records)), stop

    def records(
        self, topic: str, partition: int, offset: int, max_messages: int, committed: bool
    ) -> tuple[Sequence[Record], int]:
        p = self._partition(topic, partition)
        log = p.log
        # The length before the flag: an append sets the flag before it appends, so a flag still clear
        # means every record below `end` is outside any transaction (the common case: no lock).
        end = len(log)
        if p.transactional:
            with self._lock:
                end = p.stable() if committed else len(log)
        stop = min(end, offset + max_messages)
        if stop <= offset:
            return [], offset
        records = log[offset:stop]
        if p.transactional:
            # Below the last stable offset every transaction has ended, so its state is final without the
            # lock. (Without transactions here, every record below `end` is data of none.)
            records = [
                r
                for r in records
                if r[7] == DATA and (not committed or r[8] is None or r[8].state == Transaction.COMMITTED)
            ]
        return records, stop

    def watermarks(self, topic: str, partition: int) -> tuple[int, int, int]:
        with self._lock:
            p = self._partition(topic, partition)
            return 0, len(p.log), p.stable()

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        with self._lock:
            log = list(self._partition(topic, partition).log)
        return next((r[2] for r in log if r[7] == DATA and r[5][1] >= timestamp_ms), -1)

    def wait(self, timeout: float) -> None:
        with self._lock:
            self._waiting += 1
            try:
                self._appended.wait(timeout)
            finally:
                self._waiting -= 1

    # -- transactions ---------------------------------------------------------------------------------------
    def init_producer(self, transactional_id: str) -> int:
        with self._lock:
            state = self._producers.setdefault(transactional_id, _Producer())
            self._finish(state, commit=False)
            state.epoch += 1
            return state.epoch

    def check_epoch(self, transactional_id: str, epoch: int) -> None:
        with self._lock:
            state = self._producers.get(transactional_id)
            if state is None or state.epoch != epoch:
                raise fenced(transactional_id, epoch)

    def end_transaction(self, transactional_id: str, epoch: int, commit: bool) -> None:
        with self._lock:
            state = self._producers.get(transactional_id)
            if state is None or state.epoch != epoch:
                raise fenced(transactional_id, epoch)
            self._finish(state, commit)

    def _finish(self, state: _Producer, commit: bool) -> None:
        txn = state.txn
        if txn is None:
            return
        txn.state = Transaction.COMMITTED if commit else Transaction.ABORTED
        kind = COMMIT_MARKER if commit else ABORT_MARKER
        for topic, partition in sorted(state.touched):
            t = self._topics.get(topic)
            if t is None or partition >= len(t.partitions):
                continue  # deleted meanwhile
            p = t.partitions[partition]
            p.open.pop(txn, None)
            p.log.append(record(topic, partition, len(p.log), None, None, 0, None, kind, txn))
        state.txn = None
        state.touched = set()
        self._appended.notify_all()
