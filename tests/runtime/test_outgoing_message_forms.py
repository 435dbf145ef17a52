"""OutgoingMessage takes Samza's OutgoingMessageEnvelope forms (a SystemStream first), refuses what is no
stream or no partition with a message saying what to pass, and StreamTask.close says when it runs."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import outgoing_test_tasks
import pytest

from samsa import OutgoingMessage, StreamTask, SystemStream, SystemStreamPartition
from samsa.streams import SystemStream as StreamsSystemStream
from samsa.testing import TestRunner

OUT = SystemStream("kafka", "out")


def _fields(message: OutgoingMessage) -> tuple[Any, ...]:
    return (message.system, message.stream, message.key, message.value, message.partition_key)


def test_the_stream_names_are_exported_from_samsa() -> None:
    assert SystemStream is StreamsSystemStream
    assert SystemStreamPartition("kafka", "out", 1).system_stream == OUT


@pytest.mark.parametrize(
    ("args", "kwargs", "fields"),
    [
        ((OUT, "v"), {}, ("kafka", "out", None, "v", None)),  # (stream, message)
        ((OUT, "k", "v"), {}, ("kafka", "out", "k", "v", None)),  # (stream, key, message)
        ((OUT, "k", None), {}, ("kafka", "out", "k", None, None)),  # a tombstone
        ((OUT, "p", "k", "v"), {}, ("kafka", "out", "k", "v", "p")),  # (stream, partition key, key, message)
        ((OUT,), {"key": "k", "value": "v"}, ("kafka", "out", "k", "v", None)),
        ((OUT, "k", "v"), {"partition_key": "p"}, ("kafka", "out", "k", "v", "p")),
        (("kafka", "out"), {"key": "k", "value": "v"}, ("kafka", "out", "k", "v", None)),
        (("kafka", "out", "k", "v"), {}, ("kafka", "out", "k", "v", None)),
        (("kafka", "out", "k"), {"value": "v"}, ("kafka", "out", "k", "v", None)),
        ((), {"system": "kafka", "stream": "out", "key": "k"}, ("kafka", "out", "k", None, None)),
    ],
)
def test_samzas_forms_and_samsas_give_the_same_message(
    args: tuple[Any, ...], kwargs: dict[str, Any], fields: tuple[Any, ...]
) -> None:
    assert _fields(OutgoingMessage(*args, **kwargs)) == fields


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        (
            (("kafka", "out"), "k", "v"),
            {},
            r"the system must be a str \(its name\) or a SystemStream, not tuple",
        ),
        ((None, "out"), {}, r"the system must be a str .* not NoneType"),
        (("kafka", OUT), {}, r"the stream must be a str, not SystemStream"),
        (("kafka", 3), {}, r"the stream must be a str, not int"),
        (("kafka",), {}, r"OutgoingMessage\('kafka'\) names no stream"),
        (
            (OUT, "v"),
            {"key": "k"},
            r"either positionally, as Samza's OutgoingMessageEnvelope.*or as key=/value=",
        ),
        ((OUT, "p", "k", "v", "extra"), {}, r"takes at most 3 more positional arguments"),
        ((OUT, "p", "k", "v"), {"partition_key": "q"}, r"the partition key is given twice"),
        (("kafka", "out", "k"), {"key": "k2"}, r"the key or value is given twice"),
    ],
)
def test_what_is_no_stream_is_refused_saying_what_to_pass(
    args: tuple[Any, ...], kwargs: dict[str, Any], says: str
) -> None:
    with pytest.raises(TypeError, match=says):
        OutgoingMessage(*args, **kwargs)


def test_a_negative_partition_is_refused_naming_the_stream() -> None:
    with pytest.raises(ValueError, match=r"send to kafka\.out: partition -1 is negative"):
        OutgoingMessage("kafka", "out", key="k", value="v", partition=-1)
    with pytest.raises(ValueError, match=r"send to kafka\.out: partition -2 is negative"):
        OutgoingMessage(OUT, "k", "v", partition=-2)
    assert OutgoingMessage("kafka", "out", value="v", partition=0).partition == 0


def test_a_partition_that_is_no_int_is_refused() -> None:
    with pytest.raises(TypeError, match=r"send to kafka\.out: partition must be an int .*not str"):
        OutgoingMessage("kafka", "out", value="v", partition="1")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"not bool"):
        OutgoingMessage("kafka", "out", value="v", partition=True)
    with pytest.raises(TypeError, match=r"not float"):
        OutgoingMessage("kafka", "out", value="v", partition=1.0)  # type: ignore[call-overload]


def test_a_partition_of_an_int_subclass_is_taken_as_before() -> None:
    # The constructor's quick test takes plain ints; an int subclass (an IntEnum) goes the long way.
    class Shard(IntEnum):
        EU = 2

    assert OutgoingMessage("kafka", "out", value="v", partition=Shard.EU).partition == 2
    with pytest.raises(ValueError, match="not both"):
        OutgoingMessage("kafka", "out", value="v", partition=Shard.EU, partition_key="p")


def test_a_partition_and_a_partition_key_together_are_refused() -> None:
    with pytest.raises(ValueError, match=r"send to kafka\.out: give partition= or partition_key=, not both"):
        OutgoingMessage("kafka", "out", key="k", value="v", partition=1, partition_key="p")


def test_a_samza_style_task_runs_on_the_test_runner() -> None:
    with TestRunner.of(outgoing_test_tasks.SamzaStyle) as runner:
        result = runner.add_input("in", [("k", "v"), ("j", "w")]).add_output("out").run(timeout=10)
        assert [(m.key, m.value) for m in result.messages("out")] == [("k", "v"), ("j", "w")]


def test_close_is_documented_to_run_before_the_final_commit() -> None:
    doc = StreamTask.close.__doc__ or ""
    assert "before the final commit" in doc
    assert "after the final commit" not in doc
