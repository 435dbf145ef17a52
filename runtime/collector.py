"""Sends a task's outgoing messages through its system's producer with the stream's serdes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samsa.exactly_once.task import EosTask
from samsa.kafka import KafkaProducer
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import TaskError, UndeclaredOutputError
from samsa.runtime.task import OutgoingMessage
from samsa.serde.base import Serde, explain, fast_to_bytes
from samsa.serde.registry import SerdeRegistry
from samsa.streams import SystemStream

_Target = tuple[Callable[..., None], Callable[[Any], bytes], Callable[[Any], bytes], Serde[Any], Serde[Any]]


class OutputCollector:
    """One per container; resolves each output stream's producer and serdes once, then sends directly."""

    def __init__(self, job: JobConfig, producers: Mapping[str, KafkaProducer], serdes: SerdeRegistry) -> None:
        self._job = job
        self._producers = producers
        self._serdes = serdes
        self._targets: dict[tuple[str, str], _Target] = {}

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

    def send(self, message: OutgoingMessage) -> None:
        send, raw_key, raw_value = self._encoded(message)
        send(message.stream, raw_value, raw_key, message.partition, message.headers, message.timestamp)


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
        send, raw_key, raw_value = self._encoded(message)
        self._eos.sends += 1
        # SystemStream is a NamedTuple: a plain tuple finds it, without building one per sink record.
        if (message.system, message.stream) not in self._eos.outputs:
            send(message.stream, raw_value, raw_key, message.partition, message.headers, message.timestamp)
            return
        ss = SystemStream(message.system, message.stream)
        partition = self._eos.partition_of(ss, raw_key, message.partition)
        headers = [*(message.headers or ()), self._eos.tag(message.stream, partition)]
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
