"""Sends a task's outgoing messages through its system's producer with the stream's serdes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samsa.kafka import KafkaProducer
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import TaskError
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

    def _resolve(self, system: str, stream: str) -> _Target:
        producer = self._producers.get(system)
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

    def send(self, message: OutgoingMessage) -> None:
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
        send(message.stream, raw_value, raw_key, message.partition, message.headers, message.timestamp)


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
