"""A broadcast stream that task.inputs lists too is taken, with one WARNING at start: a redundant listing."""

from __future__ import annotations

import logging

import pytest

from samsa import IncomingMessageEnvelope, MessageCollector, StreamTask, TaskCoordinator
from samsa.testing import TestRunner

WARNING = "task.inputs listing is redundant"


class Collect(StreamTask):
    """Keeps what it is given."""

    seen: list[tuple[str, int, object]] = []

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        Collect.seen.append((envelope.stream, envelope.partition, envelope.message))


def _run(inputs: str) -> list[tuple[str, int, object]]:
    Collect.seen = []
    config = {"task.inputs": inputs, "task.broadcast.inputs": "kafka.ref#0"}
    with TestRunner.of(Collect).with_config(config) as runner:
        runner.add_input("orders", {0: ["o0"], 1: ["o1"]}, partitions=2)
        runner.add_input("ref", {0: ["r0"], 1: ["r1"]}, partitions=2).run()
    return sorted(Collect.seen, key=repr)


def test_a_broadcast_stream_listed_in_task_inputs_too_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="samsa"):
        unlisted = _run("kafka.orders")
        assert WARNING not in caplog.text
        listed = _run("kafka.orders,kafka.ref")
    assert listed == unlisted  # the listing changes nothing
    warnings = [r for r in caplog.records if WARNING in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    text = warnings[0].getMessage()
    assert "task.inputs lists kafka.ref" in text and "remove kafka.ref from task.inputs" in text
    assert "kafka.orders" not in text
