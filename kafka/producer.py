"""Kafka producer (idempotent, optionally transactional) whose delivery failures fail the task."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from samsa.kafka.client_log import PUMP, ClientLog
from samsa.kafka.config import LIBRDKAFKA_LOG, PRODUCER_DEFAULTS, rejected_setting, with_defaults
from samsa.kafka.exceptions import (
    KafkaSystemError,
    MessageTooLargeError,
    ProducerDeliveryError,
    TransactionError,
)
from samsa.kafka.inmemory import InMemoryProducer, is_inmemory
from samsa.kafka.message import SendHeaders, header_pairs, record_size

# Serve delivery reports this often even if the caller never polls, so failures surface early.
_POLL_EVERY_SENDS = 1000
# How long to wait for room when librdkafka's local queue is full.
_QUEUE_FULL_POLL_S = 0.1
# How long partition_count waits for a topic's metadata (a topic just auto-created has none at first).
_METADATA_WAIT_S = 10.0
# librdkafka's default message.max.bytes: a record larger than it is refused before it is sent.
_DEFAULT_MESSAGE_MAX_BYTES = 1_000_000

DeliveryCallback = Callable[[KafkaError | None, Message], None]


def _as_list(headers: SendHeaders | None) -> list[Any] | dict[str, Any] | None:
    """Headers as confluent-kafka takes them: a list of (key, value) pairs or a dict, no other sequence."""
    if headers is None or type(headers) is list or type(headers) is dict:
        return headers
    return list(header_pairs(headers))


class KafkaProducer:
    """Sends bytes to Kafka; any failed delivery is raised at the next send/poll/flush and stays raised."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        conf = with_defaults(config, PRODUCER_DEFAULTS)
        if _idempotent(conf) and not conf.get("transactional.id"):
            # librdkafka asks for an idempotent producer's id once a broker it learned is connected, else
            # on a 500 ms timer; with sparse connections that broker connects only when a message needs
            # it, so the first messages waited 0.5-1 s (every short run's final flush, every tool's
            # close). Connected to all brokers at once it has the id within milliseconds.
            conf.setdefault("enable.sparse.connections", False)
        self._user_on_delivery: DeliveryCallback | None = conf.pop("on_delivery", None)
        conf["on_delivery"] = self._on_delivery
        self._bootstrap = str(conf.get("bootstrap.servers", "?"))
        self._log = ClientLog(f"Kafka producer ({self._bootstrap})")
        conf.setdefault("error_cb", self._on_client_error)
        conf.setdefault("logger", self._log)
        self._transactional = bool(conf.get("transactional.id"))
        self._failure: KafkaSystemError | None = None
        self._fatal = False  # the client hit a fatal error (e.g. fenced): only closing it is left
        self._failed_deliveries = 0
        self._sends = 0
        self._message_max_bytes = conf.get("message.max.bytes", _DEFAULT_MESSAGE_MAX_BYTES)
        self._settings_prefix: str | None = None
        self._topic_notes: dict[str, str] = {}
        try:
            if is_inmemory(conf.get("bootstrap.servers")):
                # The in-memory client implements the part of Producer's API called here.
                self._producer = cast(Producer, InMemoryProducer(conf))
            else:
                self._producer = Producer(conf)
                # Not polled by the pump (delivery callbacks stay on the caller's thread); its flushes and
                # sends serve the queue. The pump only reports repeats that are due.
                PUMP.add(self)
        except (KafkaException, ValueError, TypeError) as e:
            raise rejected_setting(e) from e
        self._produce = self._producer.produce
        self._closed = False

    # -- the per-message path -----------------------------------------------------------------------------
    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None:
        """Queue one message; partition None means by key (murmur2, as Java) or random for a null key."""
        if self._failure is not None:
            raise self._failure
        part = -1 if partition is None else partition
        try:
            if headers is None and timestamp is None:  # the common case, kept cheap
                self._produce(topic, value, key, part)
            else:
                self._produce(topic, value, key, part, timestamp=timestamp or 0, headers=_as_list(headers))
        except BufferError:
            self._send_when_room(topic, value, key, part, headers, timestamp)
        except KafkaException as e:
            raise self._rejected(topic, part, e, record_size(key, value, headers)) from e
        self._sends += 1
        if self._sends >= _POLL_EVERY_SENDS:
            self._sends = 0
            self._producer.poll(0)
            if self._failure is not None:
                raise self._failure

    def _send_when_room(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        part: int,
        headers: SendHeaders | None,
        timestamp: int | None,
    ) -> None:
        # The local queue is full: serve delivery reports until librdkafka accepts the message. This ends:
        # undeliverable messages fail after message.timeout.ms and then raise here.
        while True:
            self._producer.poll(_QUEUE_FULL_POLL_S)
            if self._failure is not None:
                raise self._failure
            try:
                self._produce(topic, value, key, part, timestamp=timestamp or 0, headers=_as_list(headers))
                return
            except BufferError:
                continue
            except KafkaException as e:
                raise self._rejected(topic, part, e, record_size(key, value, headers)) from e

    # -- what a too-large record's error says ---------------------------------------------------------------
    def name_settings(self, prefix: str) -> None:
        """The job-config prefix of this producer's settings (`systems.<sys>.producer.`): a record over its
        message.max.bytes is refused naming the key to raise."""
        self._settings_prefix = prefix

    def note_topic(self, topic: str, note: str) -> None:
        """A sentence added to the error of a record too large for `topic` (refused here or by the broker):
        what the topic is to the job and how to raise its limit (a store's changelog: its key)."""
        self._topic_notes[topic] = note

    def _rejected(self, topic: str, partition: int, e: KafkaException, size: int) -> ProducerDeliveryError:
        err = e.args[0]
        if not isinstance(err, KafkaError):
            return ProducerDeliveryError(topic, partition, type(e).__name__, str(e))
        if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            # librdkafka refused it before sending: its own limit, whatever the topic allows.
            key = f"{self._settings_prefix or 'systems.<sys>.producer.'}message.max.bytes"
            advice = (
                f"The record is {size} bytes (key, value and headers), over this producer's limit "
                f"message.max.bytes={self._message_max_bytes} ({key} in the job config): the client "
                f"refused it before sending. Raise {key} above the record's size (the topic's "
                f"max.message.bytes must allow it too), or send smaller records."
            )
            return MessageTooLargeError(
                topic, partition, err.name(), err.str(), advice=self._too_large(topic, advice)
            )
        return ProducerDeliveryError(topic, partition, err.name(), err.str())

    def _refused_by_broker(self, err: KafkaError, msg: Message) -> ProducerDeliveryError:
        topic, partition = msg.topic() or "?", msg.partition()
        if err.code() != KafkaError.MSG_SIZE_TOO_LARGE:
            return ProducerDeliveryError(topic, partition, err.name(), err.str())
        size = record_size(msg.key(), msg.value(), msg.headers())
        advice = (
            f"The broker refused the record ({size} bytes of key, value and headers) as larger than topic "
            f"{topic!r} allows: its max.message.bytes, which bounds each batch of records sent (the broker's "
            "message.max.bytes when the topic sets none). Raise it (kafka-configs --alter --entity-type "
            f"topics --entity-name {topic} --add-config max.message.bytes=<bytes>), or send smaller records."
        )
        return MessageTooLargeError(
            topic, partition, err.name(), err.str(), advice=self._too_large(topic, advice)
        )

    def _too_large(self, topic: str, advice: str) -> str:
        note = self._topic_notes.get(topic)
        return (
            f"{advice}{f' {note}' if note else ''} A restart would send the same record again (and the "
            "outputs before it), so the job stops."
        )

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        # Called only for failures (delivery.report.only.error) unless the user turned that off.
        if err is not None:
            self._failed_deliveries += 1
            first = self._failure if isinstance(self._failure, ProducerDeliveryError) else None
            if first is None:
                self._failure = self._refused_by_broker(err, msg)
            else:  # report the first failure, with the count of all
                self._failure = first.counted(self._failed_deliveries)
        if self._user_on_delivery is not None:
            self._user_on_delivery(err, msg)

    def _on_client_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = True
            self._failure = KafkaSystemError(
                f"Fatal Kafka producer error ({self._bootstrap}): {err.name()}: {err.str()}. "
                "Messages may be lost or duplicated past this point; restart the task from its checkpoint."
            )
        else:
            message = f"Kafka producer ({self._bootstrap}): {err.name()}: {err.str()}"
            self._log.record(LIBRDKAFKA_LOG, logging.WARNING, message, err.str())

    def serve_logs(self) -> None:
        """Report the repeated log lines that are due (the pump's call; it does not poll a producer)."""
        self._log.tick()

    def partition_count(self, topic: str, timeout: float = _METADATA_WAIT_S) -> int | None:
        """The topic's partition count in the cluster's metadata; None when the topic does not exist."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                meta = self._producer.list_topics(topic, timeout=max(deadline - time.monotonic(), 0.1))
            except KafkaException as e:
                raise KafkaSystemError(
                    f"Kafka producer ({self._bootstrap}) cannot read the metadata of topic {topic}: {e}. "
                    "Check that the broker is reachable."
                ) from e
            found = meta.topics.get(topic)
            if found is None:
                return None
            if found.error is None and found.partitions:
                return len(found.partitions)
            # Unknown to the broker, or just auto-created and without a leader yet: asked again until the
            # deadline.
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.1)

    # -- draining -------------------------------------------------------------------------------------------
    def poll(self, timeout: float = 0) -> int:
        """Serve delivery reports; raises a recorded delivery failure. Returns the number of events served."""
        served = self._producer.poll(timeout)
        self._log.served()
        if self._failure is not None:
            raise self._failure
        return served

    def flush(self, timeout: float = 60) -> None:
        """Wait until every queued message is delivered; raises on any failure or if some remain."""
        try:
            remaining = self._producer.flush(timeout)
            self._log.served()
        except KafkaException as e:  # a fatal error (e.g. fenced) is raised, not reported
            err = e.args[0]
            self._fatal = self._fatal or (isinstance(err, KafkaError) and err.fatal())
            raise KafkaSystemError(
                f"Kafka producer ({self._bootstrap}) cannot deliver: {e}. "
                "Restart the task from its checkpoint."
            ) from e
        if self._failure is not None:
            raise self._failure
        if remaining > 0:
            raise KafkaSystemError(
                f"{remaining} message(s) still undelivered after flushing {timeout}s ({self._bootstrap}). "
                "The broker is slow or unreachable; the task must not commit."
            )

    def pending(self) -> int:
        """Messages queued or in flight."""
        return len(self._producer)

    def close(self, timeout: float = 60) -> None:
        """Flush (raising like flush) and release the client; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        PUMP.remove(self)
        try:
            self.flush(timeout)
        finally:
            # What close delivers was queued since the flush: summed up in a line, not logged as new.
            self._log.closing()
            try:
                self._release()
            finally:
                self._log.closed()

    def _release(self) -> None:
        if not self._fatal:
            self._producer.close()
            return
        # A fenced or otherwise failed transactional producer cannot abort its transaction (the broker
        # already did): confluent-kafka's close still tries and warns; that warning tells nothing.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self._producer.close()
        for w in caught:
            LIBRDKAFKA_LOG.debug(
                "Kafka producer (%s) closed after a fatal error: %s", self._bootstrap, w.message
            )

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions (config has transactional.id) ---------------------------------------------------------
    def init_transactions(self, timeout: float = 30) -> None:
        """Register the transactional.id with the broker, fencing older producers that use it."""
        self._transaction_call("init_transactions", self._producer.init_transactions, timeout)

    def begin_transaction(self) -> None:
        """Start a transaction; every send until commit/abort belongs to it."""
        self._transaction_call("begin_transaction", self._producer.begin_transaction)

    def commit_transaction(self, timeout: float = 60) -> None:
        """Flush and commit; raises ProducerDeliveryError or TransactionError (then abort) on failure."""
        if self._failure is not None:
            raise self._failure
        self._transaction_call("commit_transaction", self._producer.commit_transaction, timeout)
        if self._failure is not None:
            raise self._failure

    def abort_transaction(self, timeout: float = 60) -> None:
        """Abort: the transaction's messages are never shown to read_committed consumers."""
        self._transaction_call("abort_transaction", self._producer.abort_transaction, timeout)
        # Failed deliveries belonged to the aborted transaction; the producer may go on.
        if isinstance(self._failure, ProducerDeliveryError):
            self._failure = None
            self._failed_deliveries = 0

    def _transaction_call(self, name: str, call: Callable[..., None], *args: float) -> None:
        if not self._transactional:
            raise KafkaSystemError(
                f"{name} needs a transactional producer: set transactional.id in its config"
            )
        try:
            call(*args)
        except KafkaException as e:
            err = e.args[0]
            if not isinstance(err, KafkaError):
                raise TransactionError(
                    name, str(e), requires_abort=False, retriable=False, fatal=False
                ) from e
            self._fatal = self._fatal or err.fatal()
            raise TransactionError(
                name,
                f"{err.name()}: {err.str()}",
                requires_abort=err.txn_requires_abort(),
                retriable=err.retriable(),
                fatal=err.fatal(),
            ) from e


def _idempotent(conf: Mapping[str, Any]) -> bool:
    return str(conf.get("enable.idempotence", False)).lower() in ("true", "1")
