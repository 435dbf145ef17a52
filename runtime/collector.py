"""Sends a task's outgoing messages through its system's producer with the stream's serdes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from time import monotonic
from typing import Any

from samsa.exactly_once.task import EosTask
from samsa.kafka import KafkaProducer
from samsa.kafka.message import header_pairs
from samsa.kafka.partitioner import partition_for
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError, TaskError, UndeclaredOutputError
from samsa.runtime.task import OutgoingMessage
from samsa.serde.base import Serde, explain, fast_to_bytes
from samsa.serde.registry import SerdeRegistry
from samsa.streams import SystemStream

# librdkafka's partitioners that place a keyed record as partition_for does (murmur2 as the Java client;
# they differ only for a null key, which a partition key never is).
_MURMUR2 = ("murmur2", "murmur2_random")
# librdkafka's topic.metadata.refresh.interval.ms default: how often its producer re-reads a topic's
# partition count for keyed records, and so how long the count serves partition keys.
_REFRESH_MS = 300_000

_Target = tuple[Callable[..., None], Callable[[Any], bytes], Callable[[Any], bytes], Serde[Any], Serde[Any]]


class OutputCollector:
    """One per container; resolves each output stream's producer and serdes once, then sends directly."""

    def __init__(self, job: JobConfig, producers: Mapping[str, KafkaProducer], serdes: SerdeRegistry) -> None:
        self._job = job
        self._producers = producers
        self._serdes = serdes
        self._targets: dict[tuple[str, str], _Target] = {}
        # Of the streams sent to by partition key: (partition count, when to read it again).
        self._partition_counts: dict[tuple[str, str], tuple[int, float]] = {}

    def _producer_for(self, system: str, stream: str) -> KafkaProducer | None:
        return self._producers.get(system)

    def _resolve(self, system: str, stream: str) -> _Target:
        producer = self._producer_for(system, stream)
        if producer is None:
            raise TaskError(
                f"send to {system}.{stream}: system {system!r} is not defined; "
                f"set systems.{system}.samza.factory and bootstrap.servers"
            )
        settings = self._job.stream(SystemStream(system, stream))
        key_serde = self._serdes.get(settings.key_serde, stream, is_key=True)
        msg_serde = self._serdes.get(settings.msg_serde, stream, is_key=False)
        target = (producer.send, fast_to_bytes(key_serde), fast_to_bytes(msg_serde), key_serde, msg_serde)
        self._targets[(system, stream)] = target
        return target

    def _encoded(self, message: OutgoingMessage) -> tuple[Callable[..., None], bytes | None, bytes | None]:
        """The stream's send, and the message's key and value in bytes."""
        target = self._targets.get((message.system, message.stream))
        if target is None:
            target = self._resolve(message.system, message.stream)
        send, key_to_bytes, msg_to_bytes, key_serde, msg_serde = target
        key, value = message.key, message.value
        try:
            raw_key = None if key is None else key_to_bytes(key)
            raw_value = None if value is None else msg_to_bytes(value)
        except Exception as e:
            raise _described(message, key_serde, msg_serde, e) from e
        return send, raw_key, raw_value

    def _partition_key_bytes(self, message: OutgoingMessage) -> bytes:
        """The message's partition key in the bytes of the stream's key serde (its target is resolved)."""
        _, key_to_bytes, _, key_serde, _ = self._targets[(message.system, message.stream)]
        try:
            return key_to_bytes(message.partition_key)
        except Exception as e:
            described = explain(key_serde.to_bytes, message.partition_key, e)
            described.add_note(f"while sending the partition key to {message.system}.{message.stream}")
            raise described from e

    def _by_partition_key(self, message: OutgoingMessage) -> int:
        """The partition Kafka's default partitioner gives the message's partition key (in place of its key),
        among the stream's partitions."""
        raw = self._partition_key_bytes(message)
        target = (message.system, message.stream)
        known = self._partition_counts.get(target)
        now = monotonic()
        if known is None or now >= known[1]:
            # Re-read as often as the producer refreshes its metadata, so a grown topic's new partitions
            # take partition-key records about when they take keyed ones.
            count, refresh_s = self._partition_count(*target)
            known = self._partition_counts[target] = (count, now + refresh_s)
        return partition_for(raw, known[0])

    def _partition_count(self, system: str, stream: str) -> tuple[int, float]:
        """The stream's partition count, and for how many seconds it serves (the producer's metadata refresh
        interval); refuses a producer partitioner that places keys otherwise than a partition key."""
        settings = self._job.systems.get(system)
        producer_settings = settings.producer if settings else {}
        partitioner = producer_settings.get("partitioner", _MURMUR2[-1])
        if partitioner not in _MURMUR2:
            raise ConfigError(
                f"send to {system}.{stream} with partition_key: systems.{system}.producer.partitioner="
                f"{partitioner} places keyed records by another hash than the murmur2 a partition key is "
                f"placed by, so records sent with partition_key=pk and with key=pk would land on different "
                f"partitions; remove systems.{system}.producer.partitioner (the default is murmur2_random) "
                f"or set it to murmur2 or murmur2_random, or send with partition= of your own choosing"
            )
        producer = self._producer_for(system, stream)
        count = None if producer is None else producer.partition_count(stream)
        if count is None:
            raise TaskError(
                f"send to {system}.{stream} with partition_key: topic {stream!r} does not exist on system "
                f"{system!r}, so it has no partitions to place the record among; create it first"
            )
        refresh = str(producer_settings.get("topic.metadata.refresh.interval.ms", "")).strip()
        refresh_ms = int(refresh) if refresh.isdigit() and int(refresh) > 0 else _REFRESH_MS
        return count, refresh_ms / 1000

    def send(self, message: OutgoingMessage) -> None:
        send, raw_key, raw_value = self._encoded(message)
        partition = message.partition
        if message.partition_key is not None:
            partition = self._by_partition_key(message)
        send(message.stream, raw_value, raw_key, partition, message.headers, message.timestamp)


class ExactlyOnceCollector(OutputCollector):
    """One per exactly-once task: checks each send against task.outputs, tags records to intermediate
    streams (producer, generation, version, sequence per partition), and sends the others (sinks) on the
    task's transactional producer, so they are committed with the task's checkpoint."""

    def __init__(
        self,
        job: JobConfig,
        producers: Mapping[str, KafkaProducer],
        serdes: SerdeRegistry,
        eos: EosTask,
        sink: KafkaProducer,
        task_name: str,
    ) -> None:
        super().__init__(job, producers, serdes)
        self._eos = eos
        self._sink = sink
        self._task = task_name
        self._outputs = frozenset(job.outputs)

    def _producer_for(self, system: str, stream: str) -> KafkaProducer | None:
        ss = SystemStream(system, stream)
        if ss not in self._outputs:
            raise UndeclaredOutputError(
                f"task {self._task}: send to {ss}, which task.outputs does not list; under "
                "job.processing.guarantee=exactly_once every output stream must be listed there"
            )
        if ss in self._eos.outputs:
            return super()._producer_for(system, stream)
        if system not in self._producers:
            return None
        return self._sink

    def send(self, message: OutgoingMessage) -> None:
        # SystemStream is a NamedTuple: a plain tuple finds it, without building one per sink record.
        stream = (message.system, message.stream)
        if stream not in self._outputs or stream not in self._eos.outputs:
            # A sink, placed as at-least-once places it, on the task's transactional producer; or a stream
            # task.outputs does not list, which resolving it refuses (_producer_for).
            super().send(message)
            self._eos.sends += 1
            return
        send, raw_key, raw_value = self._encoded(message)
        self._eos.sends += 1
        ss = SystemStream(message.system, message.stream)
        # An intermediate stream's partition count is the one its exactly-once state was built for.
        placed_by = raw_key if message.partition_key is None else self._partition_key_bytes(message)
        partition = self._eos.partition_of(ss, placed_by, message.partition)
        given = () if message.headers is None else header_pairs(message.headers)
        headers = [*given, self._eos.tag(message.stream, partition)]
        send(message.stream, raw_value, raw_key, partition, headers, message.timestamp)


def _described(
    message: OutgoingMessage, key_serde: Serde[Any], msg_serde: Serde[Any], error: Exception
) -> Exception:
    """The serde's own error for whichever of key or value failed, noting the target stream."""
    part, described = "message", error
    if message.key is not None:
        described = explain(key_serde.to_bytes, message.key, error)
        part = "key" if described is not error else part
    if part == "message" and message.value is not None:
        described = explain(msg_serde.to_bytes, message.value, error)
    described.add_note(f"while sending the {part} to {message.system}.{message.stream}")
    return described
