"""Exactly-once runtime pieces: config checks, checkpoint state, the collector's output rule, overlays."""

import pytest

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.model import CheckpointV2, decode_v2, encode
from samsa.exactly_once.exceptions import ExactlyOnceError
from samsa.exactly_once.task import EosState
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError

BASE = {
    "job.name": "j",
    "task.class": "x:Y",
    "task.inputs": "kafka.in",
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "localhost:9092",
    "job.processing.guarantee": "exactly_once",
}


def job(**extra: str) -> JobConfig:
    return JobConfig(Config({**BASE, **extra}))


def test_exactly_once_needs_task_outputs() -> None:
    with pytest.raises(ConfigError, match=r"needs task\.outputs"):
        job()
    assert job(**{"task.outputs": "kafka.out"}).exactly_once


def test_exactly_once_refuses_streams_broadcast_to_process() -> None:
    with pytest.raises(ConfigError, match=r"task.broadcast.inputs: kafka.rules .*adjunct store"):
        job(**{"task.outputs": "kafka.out", "task.broadcast.inputs": "kafka.rules#0"})


@pytest.mark.parametrize("commit_ms", ["-1"])  # 0 and below -1 are refused for every job
def test_exactly_once_refuses_a_commit_interval_that_is_off(commit_ms: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"task\.commit\.ms={commit_ms}: .*set task\.commit\.ms to a positive"
    ):
        job(**{"task.outputs": "kafka.out", "task.commit.ms": commit_ms})
    assert job(**{"task.outputs": "kafka.out", "task.commit.ms": "1"}).commit_ms == 1


def test_intermediate_is_read_per_stream() -> None:
    j = job(**{"task.outputs": "kafka.out", "systems.kafka.streams.out.samza.intermediate": "true"})
    assert j.intermediate(j.outputs[0]) and not j.intermediate(j.inputs[0])
    assert j.eos_buffer_max_bytes == 1073741824 and j.eos_barrier_timeout_ms == 60000


def test_checkpoint_v2_carries_the_exactly_once_state() -> None:
    state = EosState(3, 7, {("mid", 1): 42}, {"format": 1, "current_version": 8})
    cp = CheckpointV2(CheckpointId.create(), {}, {}, state.to_dict())
    back = decode_v2(encode(cp), "test")
    assert EosState.from_dict(back.exactly_once or {}, "t") == state
    plain = CheckpointV2(CheckpointId.create())
    assert b"exactlyOnce" not in encode(plain) and decode_v2(encode(plain), "t").exactly_once is None


def test_state_of_an_unknown_format_is_refused_naming_the_task() -> None:
    with pytest.raises(ExactlyOnceError, match=r"task Partition 3: .*format 9"):
        EosState.from_dict({"format": 9}, "Partition 3")
