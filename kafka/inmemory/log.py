"""What the in-memory clients need of a broker (`Log`), the topic defaults and the errors it answers with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException

from samsa.kafka.inmemory.message import InMemoryMessage, Record, StoredHeaders
from samsa.kafka.message import Headers, SendHeaders, record_size

#: The effective config of a topic that sets nothing: the broker defaults Samsa's checks read.
TOPIC_DEFAULTS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
    "retention.ms": "604800000",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
}


def error(code: int, reason: str, *, fatal: bool = False, retriable: bool = False) -> KafkaException:
    """A KafkaException as librdkafka raises it, so the wrappers' error handling works unchanged."""
    return KafkaException(KafkaError(code, reason, fatal=fatal, retriable=retriable))


def unknown_topic(topic: str, url: str) -> KafkaException:
    return error(KafkaError.UNKNOWN_TOPIC_OR_PART, f"topic {topic!r} does not exist on {url}")


def unknown_partition(topic: str, partition: int, partitions: int) -> KafkaException:
    return error(
        KafkaError._UNKNOWN_PARTITION,
        f"topic {topic!r} has {partitions} partition(s); partition {partition} does not exist",
    )


def size_limit(config: Mapping[str, str]) -> int | None:
    """The topic's max.message.bytes when it sets one (the broker default is not enforced)."""
    raw = config.get("max.message.bytes")
    return None if raw is None else int(raw)


def check_size(
    topic: str, limit: int | None, key: bytes | None, value: bytes | None, headers: Headers | None
) -> None:
    """Rejects a record larger than the topic's limit, as the broker does (MSG_SIZE_TOO_LARGE)."""
    if limit is None:
        return
    size = record_size(key, value, headers)
    if size > limit:
        raise error(
            KafkaError.MSG_SIZE_TOO_LARGE,
            f"a {size}-byte record exceeds topic {topic!r}'s max.message.bytes={limit}",
        )


def fenced(transactional_id: str, epoch: int) -> KafkaException:
    return error(
        KafkaError._FENCED,
        f"producer fenced: transactional.id {transactional_id!r} epoch {epoch} was replaced by a newer "
        "init_transactions",
        fatal=True,
    )


class Log(Protocol):
    """A broker's topics and transactions; thread-safe. Offsets count from 0 per partition."""

    url: str

    def create_topic(self, name: str, partitions: int, config: Mapping[str, str]) -> bool:
        """False if the topic exists."""
        ...

    def delete_topic(self, name: str) -> bool:
        """False if the topic does not exist."""
        ...

    def partition_counts(self) -> dict[str, int]: ...

    def partitions(self, topic: str) -> int | None: ...

    def topic_config(self, name: str) -> dict[str, str] | None:
        """The effective config (defaults included); None if the topic does not exist."""
        ...

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
        """Store one record and return its offset (its headers as the producer normalized them once:
        message.stored_headers, as a consumer reads them back); `producer` (transactional.id, epoch) puts
        it in that producer's transaction (opened on its first record). Raises the KafkaException
        librdkafka would."""
        ...

    def append_batch(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None, int, SendHeaders | None]],
    ) -> int:
        """Store (key, value, timestamp ms, headers) records outside any transaction, in order, as one
        produce request's batch, and return the first one's offset; one too large stores none."""
        ...

    def read(
        self, topic: str, partition: int, offset: int, max_messages: int, committed: bool
    ) -> tuple[list[InMemoryMessage], int]:
        """Records from `offset` (data only; read_committed: only committed or non-transactional ones, up
        to the last stable offset) and the position after them (past skipped markers and aborted records)."""
        ...

    def records(
        self, topic: str, partition: int, offset: int, max_messages: int, committed: bool
    ) -> tuple[Sequence[Record], int]:
        """As `read`, the records as the broker keeps them (`Record`: a message's fields, no message made);
        the caller must not change the sequence."""
        ...

    def watermarks(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(low, high watermark, last stable offset)."""
        ...

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """First data offset with a timestamp >= `timestamp_ms`, or -1."""
        ...

    def init_producer(self, transactional_id: str) -> int:
        """A new epoch for the id: aborts its open transaction and fences every older producer of it."""
        ...

    def check_epoch(self, transactional_id: str, epoch: int) -> None:
        """Raises the fatal _FENCED error if a newer producer of the id registered."""
        ...

    def end_transaction(self, transactional_id: str, epoch: int, commit: bool) -> None:
        """Commit or abort the producer's open transaction: a marker goes to each partition it wrote."""
        ...

    def wait(self, timeout: float) -> None:
        """Block until something may have been appended, or `timeout` seconds."""
        ...
