"""Assign-only Kafka consumer: explicit offsets, batched fetch, no consumer group."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as _CTopicPartition

from samsa.kafka.client_log import PUMP, ClientLog
from samsa.kafka.config import CONSUMER_DEFAULTS, rejected_setting, with_defaults
from samsa.kafka.exceptions import KafkaSystemError
from samsa.kafka.inmemory import InMemoryConsumer, is_inmemory
from samsa.kafka.message import OFFSET_END, RawMessage, TopicPartition

log = logging.getLogger(__name__)

_PARTITION_EOF = KafkaError._PARTITION_EOF
# Bound on the metadata request `assign` makes before a first logical offset of a topic; past it, the
# assignment goes ahead without it (and librdkafka's own retry applies).
_METADATA_TIMEOUT_S = 2.0


def _ctps(tps: Iterable[TopicPartition]) -> list[_CTopicPartition]:
    return [_CTopicPartition(topic, partition) for topic, partition in tps]


class KafkaConsumer:
    """A librdkafka consumer that is only ever assign()ed partitions at explicit offsets."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        conf = with_defaults(config, CONSUMER_DEFAULTS)
        self._bootstrap = str(conf.get("bootstrap.servers", "?"))
        self._log = ClientLog(f"Kafka consumer ({self._bootstrap})")
        conf.setdefault("error_cb", self._on_client_error)
        conf.setdefault("logger", self._log)
        self._fatal: KafkaSystemError | None = None
        # Held by the pump while it polls the unassigned client and by whatever (un)assigns or closes it.
        self._serving = threading.Lock()
        self._assigned = False
        # The owner polled since the pump's last round (or just made it): the pump leaves it alone.
        self._polled = True
        self._stash: list[Message] = []  # what a pump's poll returned (nothing, while unassigned)
        try:
            if is_inmemory(conf.get("bootstrap.servers")):
                # The in-memory client implements the part of Consumer's API called here.
                self._consumer = cast(Consumer, InMemoryConsumer(conf))
                self._known_topics: set[str] | None = None  # it knows every topic
            else:
                self._consumer = Consumer(conf)
                self._known_topics = set()
        except (KafkaException, ValueError, TypeError) as e:
            raise rejected_setting(e) from e
        self._closed = False
        if self._known_topics is not None:
            # Watermark-only consumers are never polled: without the pump, librdkafka would keep their log
            # lines and errors (a broker outage: thousands) until close, and deliver them all then.
            PUMP.add(self)

    # -- assignment -------------------------------------------------------------------------------------
    def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        """Replace the assignment: read each partition from its offset (or OFFSET_BEGINNING / OFFSET_END)."""
        self._learn_leaders({t for (t, _), offset in positions.items() if offset < 0})
        with self._serving:
            self._assigned = bool(positions)
            self._consumer.assign([_CTopicPartition(t, p, offset) for (t, p), offset in positions.items()])

    def _learn_leaders(self, topics: set[str]) -> None:
        # librdkafka resolves a logical offset (beginning, end) by asking the partition's leader; assigned
        # before the client's first metadata answer names that leader, it waits for a 500 ms retry timer
        # instead. One metadata request first makes a new consumer read at once (500 ms -> 2 ms here).
        if self._known_topics is None:
            return
        for topic in topics - self._known_topics:
            try:
                self._consumer.list_topics(topic, timeout=_METADATA_TIMEOUT_S)
            except KafkaException as e:
                log.debug("metadata of %s before assigning it: %s", topic, e)
                continue
            self._reached()
            self._known_topics.add(topic)

    def unassign(self) -> None:
        """Stop reading every partition."""
        self._consumer.unassign()
        self._assigned = False

    def assignment(self) -> list[TopicPartition]:
        """The partitions currently assigned."""
        return [(tp.topic, tp.partition) for tp in self._consumer.assignment()]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Continue reading `tp` at `offset`; messages already prefetched for it are dropped."""
        try:
            self._consumer.seek(_CTopicPartition(tp[0], tp[1], offset))
        except KafkaException as e:
            raise KafkaSystemError(
                f"Cannot seek topic {tp[0]!r} partition {tp[1]} to offset {offset}: {e.args[0]}. "
                "Only assigned partitions can be seeked."
            ) from e

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (they stay assigned; the position is kept)."""
        self._consumer.pause(_ctps(tps))

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        """Fetch paused partitions again."""
        self._consumer.resume(_ctps(tps))

    # -- reading ----------------------------------------------------------------------------------------
    def consume(self, max_messages: int, timeout: float) -> list[RawMessage]:
        """Up to `max_messages` messages, returned as soon as at least one is there; [] after `timeout` s.

        Partition EOF events are dropped. A fatal or partition error raises KafkaSystemError naming the
        topic and partition; transient client errors (broker down, retrying) are only logged.
        """
        if self._fatal is not None:
            raise self._fatal
        if self._stash:
            return self._unstashed()
        consumer = self._consumer
        self._polled = True
        # consume(n, t) would wait for all n or the full timeout; take what is queued without waiting.
        msgs = consumer.consume(max_messages, 0)
        if not msgs:
            if timeout <= 0:
                return self._checked([])
            first = consumer.poll(timeout)  # returns as soon as one message (or event) arrives
            if first is None:
                return self._checked([])
            msgs = [first]
            if max_messages > 1:
                msgs.extend(consumer.consume(max_messages - 1, 0))
        for m in msgs:
            if m.error() is not None:
                return self._checked(self._without_errors(msgs))
        self._log.reachable()
        return cast("list[RawMessage]", msgs)

    def _unstashed(self) -> list[RawMessage]:
        msgs, self._stash = self._stash, []
        return self._checked(self._without_errors(msgs))

    def _checked(self, msgs: list[RawMessage]) -> list[RawMessage]:
        if self._fatal is not None:
            raise self._fatal
        return msgs

    def _without_errors(self, msgs: list[Message]) -> list[RawMessage]:
        kept: list[RawMessage] = []
        for m in msgs:
            err = m.error()
            if err is None:
                kept.append(cast(RawMessage, m))
            elif err.code() == _PARTITION_EOF:
                continue
            elif err.fatal() or (m.topic() is not None and not err.retriable()):
                where = f"topic {m.topic()!r} partition {m.partition()}" if m.topic() else "the consumer"
                raise KafkaSystemError(
                    f"Kafka consumer error on {where} ({self._bootstrap}): {err.name()}: {err.str()}. "
                    "Check that the topic exists, the offset is valid and the client may read it."
                )
            else:
                self._log.record(
                    log,
                    logging.WARNING,
                    f"Kafka consumer ({self._bootstrap}): transient error {err.name()}: {err.str()}",
                    err.str(),
                )
        return kept

    def _on_client_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = KafkaSystemError(
                f"Fatal Kafka consumer error ({self._bootstrap}): {err.name()}: {err.str()}. "
                "Recreate the consumer."
            )
        else:
            message = f"Kafka consumer ({self._bootstrap}): {err.name()}: {err.str()}"
            self._log.record(log, logging.WARNING, message, err.str())

    def serve_logs(self) -> None:
        """Deliver the log lines and errors librdkafka queued while the owner neither polls nor assigns."""
        if self._polled:
            self._polled = False
            self._log.served()
        else:
            self._serve_unassigned()
        self._log.tick()

    def _serve_unassigned(self) -> None:
        # Not acquired: being assigned or closed right now; the pump's next round serves it.
        if self._assigned or not self._serving.acquire(blocking=False):
            return
        try:
            if not self._closed and not self._assigned:
                msg = self._consumer.poll(0)
                self._log.served()
                if msg is not None:  # an unassigned consumer has no messages; consume() gets it
                    self._stash.append(msg)
        finally:
            self._serving.release()

    def _reached(self) -> None:
        if self._log.in_outage:
            # What librdkafka queued before this call succeeded belongs to the outage it ends.
            self._serve_unassigned()
            self._log.reachable()

    # -- offsets ----------------------------------------------------------------------------------------
    def position(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Next offset to be read per partition; OFFSET_INVALID until a message was read since assign/seek."""
        return {(tp.topic, tp.partition): tp.offset for tp in self._consumer.position(_ctps(tps))}

    def watermarks(self, tp: TopicPartition, cached: bool = False, timeout: float = 10) -> tuple[int, int]:
        """(low, high) watermark of `tp`; high is the offset after the last message.

        cached=True asks no broker: it returns librdkafka's high watermark from the latest fetch (for lag
        metrics); values are OFFSET_INVALID until the partition was fetched (low stays so unless
        statistics.interval.ms is set).
        """
        try:
            result = self._consumer.get_watermark_offsets(
                _CTopicPartition(*tp), timeout=timeout, cached=cached
            )
        except KafkaException as e:
            raise KafkaSystemError(
                f"Cannot read watermarks of topic {tp[0]!r} partition {tp[1]} "
                f"({self._bootstrap}): {e.args[0]}"
            ) from e
        if result is None:  # librdkafka timed out
            raise KafkaSystemError(
                f"Timed out after {timeout}s reading watermarks of topic {tp[0]!r} partition {tp[1]} "
                f"({self._bootstrap}); is the broker reachable?"
            )
        if not cached:
            self._reached()
        return result[0], result[1]

    def offsets_for_times(
        self, tps: Iterable[TopicPartition], timestamp_ms: int, timeout: float = 10
    ) -> dict[TopicPartition, int]:
        """Per partition, the first offset with a timestamp >= `timestamp_ms`; the high watermark if none."""
        query = [_CTopicPartition(t, p, timestamp_ms) for t, p in dict.fromkeys(tps)]
        try:
            found = self._consumer.offsets_for_times(query, timeout=timeout)
        except KafkaException as e:
            raise KafkaSystemError(
                f"Cannot look up offsets for timestamp {timestamp_ms} ({self._bootstrap}): {e.args[0]}"
            ) from e
        self._reached()
        result: dict[TopicPartition, int] = {}
        for ctp in found:
            tp = (ctp.topic, ctp.partition)
            if ctp.error is not None:
                raise KafkaSystemError(
                    f"Cannot look up the offset for timestamp {timestamp_ms} in topic {tp[0]!r} "
                    f"partition {tp[1]}: {ctp.error}"
                )
            # The broker answers -1 (== OFFSET_END) when no message is at or after the timestamp.
            result[tp] = self.watermarks(tp, timeout=timeout)[1] if ctp.offset == OFFSET_END else ctp.offset
        return result

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Leave and release the client; safe to call twice."""
        if not self._closed:
            with self._serving:
                self._closed = True
            PUMP.remove(self)
            if self._polled:
                self._log.served()
            # What close delivers was queued while no one polled: summed up in a line, not logged as new.
            self._log.closing()
            try:
                self._consumer.close()
            finally:
                self._log.closed()

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
