"""The in-memory producer: the part of confluent_kafka.Producer that samsa.kafka.KafkaProducer calls."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin._metadata import ClusterMetadata

from samsa.kafka.inmemory.admin import cluster_metadata
from samsa.kafka.inmemory.log import error, unknown_topic
from samsa.kafka.inmemory.message import InMemoryMessage, message, stored_headers
from samsa.kafka.inmemory.registry import auto_create_partitions, broker, clock_of
from samsa.kafka.partitioner import partition_for

Report = tuple[KafkaError | None, InMemoryMessage]
# Keys whose partition a producer remembers, per partition count: murmur2 in Python costs more than the
# rest of a send, and a test sends few distinct keys (a bound, so millions of distinct ones are not kept).
_PLACED_KEYS = 100_000


class InMemoryProducer:
    """Appends each message at once (so none is ever in flight); idempotent by construction.

    Delivery reports wait for poll()/flush() as librdkafka's do. With a transactional.id every message must
    belong to a transaction; init_transactions of a newer producer with the same id fences this one.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._url = str(config["bootstrap.servers"])
        self._log = broker(self._url)
        self._auto_create = auto_create_partitions(str(config["bootstrap.servers"]))
        self._seen: set[str] = set()  # topics known to exist (made if need be) when topics are auto-created
        self._on_delivery: Callable[[KafkaError | None, Any], None] | None = config.get("on_delivery")
        self._error_cb: Callable[[KafkaError], None] | None = config.get("error_cb")
        self._only_errors = str(config.get("delivery.report.only.error", False)).lower() in ("true", "1")
        self._transactional_id = str(config.get("transactional.id") or "") or None
        self._epoch: int | None = None
        self._in_transaction = False
        self._failed_in_transaction = False
        self._fatal: KafkaError | None = None
        self._reports: list[Report] = []
        self._reports_lock = threading.Lock()  # commit threads share a producer with the loop
        self._random = random.Random()
        self._clock = clock_of(self._url)  # records sent without a timestamp take its time
        self._placed: dict[int, dict[bytes, int]] = {}  # partition count -> key -> its partition

    # -- sending --------------------------------------------------------------------------------------------
    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: Callable[[KafkaError | None, Any], None] | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        if self._fatal is not None:
            raise KafkaException(self._fatal)
        owner = None
        if self._transactional_id is not None:
            if not self._in_transaction:
                raise error(KafkaError._STATE, "Operation not valid in state Ready: begin_transaction first")
            owner = (self._transactional_id, self._epoch or 0)
        ts = timestamp or int(self._clock()() * 1000)
        if headers is not None:  # refused here, before anything is stored, as confluent-kafka refuses
            headers = stored_headers(headers)
        self._auto_created(topic)
        if partition < 0:
            count = self._log.partitions(topic)
            if count is None:
                self._failed(topic, partition, key, value, unknown_topic(topic, self._log.url))
                return
            if count == 1:
                partition = 0
            elif key is None:
                partition = self._random.randrange(count)
            else:
                partition = self._partition_of(key, count)
        try:
            offset = self._log.append(topic, partition, key, value, ts, headers, owner)
        except KafkaException as e:
            self._failed(topic, partition, key, value, e)
            return
        if not self._only_errors and self._on_delivery is not None:
            with self._reports_lock:
                self._reports.append((None, message(topic, partition, offset, key, value, ts, headers)))

    def _auto_created(self, topic: str) -> None:
        """Create the topic if it is missing and topics are auto-created, as a broker does on first use."""
        if self._auto_create and topic not in self._seen:
            if self._log.partitions(topic) is None:
                self._log.create_topic(topic, self._auto_create, {})
            self._seen.add(topic)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        if topic is not None:
            self._auto_created(topic)
        return cluster_metadata(self._log, topic)

    def _partition_of(self, key: bytes, count: int) -> int:
        """The keyed record's partition among `count`, as the Java client's murmur2 puts it."""
        placed = self._placed.get(count)
        if placed is None:
            placed = self._placed[count] = {}
        partition = placed.get(key) if type(key) is bytes else None
        if partition is None:
            partition = partition_for(key, count)
            if type(key) is bytes and len(placed) < _PLACED_KEYS:
                placed[key] = partition
        return partition

    def _failed(
        self, topic: str, partition: int, key: bytes | None, value: bytes | None, e: KafkaException
    ) -> None:
        err: KafkaError = e.args[0]
        if err.fatal():
            self._fatal = err
            if self._error_cb is not None:
                self._error_cb(err)
            raise e
        if self._in_transaction:
            self._failed_in_transaction = True
        with self._reports_lock:
            self._reports.append((err, message(topic, partition, -1, key, value, 0)))

    def poll(self, timeout: float = 0) -> int:
        with self._reports_lock:
            reports, self._reports = self._reports, []
        if self._on_delivery is not None:
            for err, msg in reports:
                self._on_delivery(err, msg)
        return len(reports)

    def flush(self, timeout: float = -1) -> int:
        self.poll(0)
        return 0

    def __len__(self) -> int:
        return len(self._reports)

    def close(self, timeout: float = -1) -> None:
        self.poll(0)

    # -- transactions ---------------------------------------------------------------------------------------
    def init_transactions(self, timeout: float = -1) -> None:
        self._require_transactional("init_transactions")
        self._epoch = self._log.init_producer(self._transactional_id or "")
        self._in_transaction = False

    def begin_transaction(self) -> None:
        self._require_transactional("begin_transaction")
        if self._epoch is None or self._in_transaction:
            raise error(
                KafkaError._STATE, "begin_transaction needs init_transactions and no open transaction"
            )
        self._check(lambda: self._log.check_epoch(self._transactional_id or "", self._epoch or 0))
        self._in_transaction = True
        self._failed_in_transaction = False

    def commit_transaction(self, timeout: float = -1) -> None:
        self._end(commit=True)

    def abort_transaction(self, timeout: float = -1) -> None:
        self._end(commit=False)

    def _end(self, commit: bool) -> None:
        self._require_transactional("commit_transaction" if commit else "abort_transaction")
        if not self._in_transaction:
            raise error(KafkaError._STATE, "no transaction in progress")
        self.poll(0)
        if commit and self._failed_in_transaction:
            raise KafkaException(
                KafkaError(
                    KafkaError._INCONSISTENT,
                    "a message of the transaction failed to be delivered: abort it",
                    txn_requires_abort=True,
                )
            )
        self._check(lambda: self._log.end_transaction(self._transactional_id or "", self._epoch or 0, commit))
        self._in_transaction = False

    def _require_transactional(self, name: str) -> None:
        if self._fatal is not None:
            raise KafkaException(self._fatal)
        if self._transactional_id is None:
            raise error(
                KafkaError._NOT_CONFIGURED, f"{name}: the transactional producer needs transactional.id"
            )

    def _check(self, call: Callable[[], None]) -> None:
        try:
            call()
        except KafkaException as e:
            err: KafkaError = e.args[0]
            if err.fatal():
                self._fatal = err
                if self._error_cb is not None:
                    self._error_cb(err)
            raise
