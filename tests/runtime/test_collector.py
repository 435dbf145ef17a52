"""The collector: serdes of the target stream, and errors that name the stream."""

from __future__ import annotations

from typing import Any

import pytest

from samsa import OutgoingMessage
from samsa.runtime.collector import OutputCollector
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import TaskError
from samsa.serde.exceptions import SerializationError
from samsa.serde.registry import SerdeRegistry


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def send(self, *args: Any) -> None:
        self.sent.append(args)


def _collector() -> tuple[OutputCollector, Producer]:
    config = Config(
        {
            "job.name": "j",
            "task.class": "m:T",
            "task.inputs": "kafka.in",
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.bootstrap.servers": "localhost:9092",
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.streams.counts.samza.msg.serde": "long",
        }
    )
    producer = Producer()
    return OutputCollector(JobConfig(config), {"kafka": producer}, SerdeRegistry(config)), producer  # type: ignore[dict-item]


def test_messages_use_the_streams_serdes() -> None:
    collector, producer = _collector()
    collector.send(OutgoingMessage("kafka", "counts", key="w", value=3))
    collector.send(OutgoingMessage("kafka", "other", key="w", value=b"raw", partition=2))
    collector.send(OutgoingMessage("kafka", "counts", key="gone", value=None))
    assert producer.sent == [
        ("counts", (3).to_bytes(8, "big"), b"w", None, None, None),
        ("other", b"raw", b"w", 2, None, None),
        ("counts", None, b"gone", None, None, None),
    ]


def test_a_value_of_the_wrong_type_names_the_stream() -> None:
    collector, producer = _collector()
    with pytest.raises(SerializationError) as info:
        collector.send(OutgoingMessage("kafka", "counts", key="w", value="three"))
    assert "while sending the message to kafka.counts" in info.value.__notes__
    with pytest.raises(SerializationError, match="expected str") as info:
        collector.send(OutgoingMessage("kafka", "counts", key=5, value=1))
    assert "while sending the key to kafka.counts" in info.value.__notes__
    assert producer.sent == []


def test_an_undefined_system_is_named() -> None:
    collector, _ = _collector()
    with pytest.raises(TaskError, match=r"systems\.nope\.samza\.factory"):
        collector.send(OutgoingMessage("nope", "s", value=b"x"))
