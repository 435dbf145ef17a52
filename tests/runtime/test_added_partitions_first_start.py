"""On a job's first start with several containers, a late container's partitions start at
`samza.offset.default`, though a sibling already checkpointed the stream's other partitions: only a partition
numbered past the stream's partition count when the job first checkpointed it was added since (and starts
at its oldest offset)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from partition_test_tasks import StreamRecordTask
from topic_growth import grow, produce_new

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.model import AnyCheckpoint, Checkpoint, CheckpointV2, decode, decode_v2, encode
from samsa.kafka import KafkaConsumer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.runtime.offsets import added_since, known_partition_counts, recorded_partition_counts
from samsa.streams import SystemStream, SystemStreamPartition

A = SystemStream("kafka", "a")
B = SystemStream("kafka", "b")


def _p(stream: SystemStream, n: int) -> SystemStreamPartition:
    return SystemStreamPartition(*stream, n)


# -- the decision -------------------------------------------------------------------------------------
def test_a_partition_below_the_count_the_job_first_checkpointed_was_not_added() -> None:
    # Container 0 (task Partition 0) committed first on the job's first start, recording a's 2 partitions.
    sibling = CheckpointV2(CheckpointId.create(), {_p(A, 0): 5}, input_counts={A: 2})
    known = known_partition_counts([sibling])
    assert known == {A: 2}
    assert not added_since(_p(A, 1), known, {_p(A, 0)})  # container 1's: samza.offset.default applies
    assert added_since(_p(A, 2), known, {_p(A, 0)})  # grown since: read from its oldest offset
    # Grown since, but a task checkpointed it: a task it is given now (broadcast) starts at the default.
    assert not added_since(_p(A, 2), known, {_p(A, 0), _p(A, 2)})


def test_the_fewest_partitions_any_task_recorded_decide() -> None:
    checkpoints: list[AnyCheckpoint] = [
        Checkpoint({_p(A, 0): 1}, input_counts={A: 3}),
        CheckpointV2(CheckpointId.create(), {_p(A, 1): 1, _p(B, 1): 4}, input_counts={A: 2, B: 2}),
    ]
    assert known_partition_counts(checkpoints) == {A: 2, B: 2}


def test_checkpoints_of_an_older_samsa_count_up_to_the_lowest_partition_none_of_them_holds() -> None:
    # No recorded counts: every partition none of them holds was added since (an older Samsa's rule).
    legacy = [Checkpoint({_p(A, 0): 1, _p(B, 1): 1}), CheckpointV2(CheckpointId.create(), {_p(A, 1): 1})]
    known = known_partition_counts(legacy)
    checkpointed = {ssp for cp in legacy for ssp in cp.offsets}
    assert known == {A: 2, B: 0}
    assert not added_since(_p(A, 1), known, checkpointed) and added_since(_p(A, 2), known, checkpointed)
    # b#0 was left unread (an older Samsa's broadcast stream b#1): it was never read, so from its start.
    assert added_since(_p(B, 0), known, checkpointed)
    # Recorded, the count carries the judgement on to the containers that start later.
    assert recorded_partition_counts(known, {A: 3, B: 2}) == {A: 2, B: 0}


def test_a_stream_no_checkpoint_holds_is_new_to_the_job_and_its_partitions_were_not_added() -> None:
    known = known_partition_counts([Checkpoint({_p(A, 0): 1}, input_counts={A: 1})])
    assert not added_since(_p(B, 0), known, {_p(A, 0)}) and not added_since(_p(B, 3), known, {_p(A, 0)})


def test_a_run_records_the_count_it_knew_else_the_job_models() -> None:
    # a: first checkpointed at 2 partitions, 4 now; b: new to the job; c: recreated with fewer partitions.
    c = SystemStream("kafka", "c")
    recorded = recorded_partition_counts({A: 2, c: 6}, {A: 4, B: 3, c: 2})
    assert recorded == {A: 2, B: 3, c: 2}
    assert recorded_partition_counts({A: 2}, {}) == {A: 2}  # a container model without counts


def test_the_counts_are_read_back_and_a_record_without_them_still_reads() -> None:
    v1 = Checkpoint({_p(A, 0): 3}, input_counts={A: 2, B: 1})
    v2 = CheckpointV2(CheckpointId.create(), {_p(A, 0): 3}, input_counts={A: 2})
    assert decode(encode(v1), "t@0") == v1
    assert decode_v2(encode(v2), "t@0") == v2
    assert b"inputPartitionCounts" not in encode(Checkpoint({_p(A, 0): 3}))  # the bytes of old records
    assert decode(encode(Checkpoint({_p(A, 0): 3})), "t@0").input_counts == {}
    # An unreadable count is dropped (the partitions then count as an older Samsa's), not fatal.
    raw = (
        b'{"version":1,"offsets":[],"inputPartitionCounts":[{"system":"kafka","stream":"a","partitions":"x"},'
        b'{"system":"kafka","stream":"b","partitions":2}]}'
    )
    assert decode(raw, "t@0").input_counts == {B: 2}


# -- on the broker ------------------------------------------------------------------------------------
def _checkpoints(config: dict[str, str]) -> dict[str, AnyCheckpoint]:
    return checkpoint_manager(JobConfig(Config(config))).read_last()


def _high(bootstrap: str, topic: str, partition: int) -> int:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
    try:
        return consumer.watermarks((topic, partition))[1]
    finally:
        consumer.close()


def _upcoming_job(job_config: Callable[..., dict[str, str]], inputs: str, out: str) -> dict[str, str]:
    return job_config(
        inputs,
        out,
        task="partition_test_tasks:StreamRecordTask",
        **{"systems.kafka.samza.offset.default": "upcoming", "job.container.count": "2"},
    )


def test_a_late_container_on_the_first_start_starts_at_upcoming(
    broker_bootstrap: str, job_config: Any, topics: Any, produce: Any, run_job: Any
) -> None:
    inp, out = topics(2), topics(1)
    produce(inp, [("k", "old")], partition=0)
    produce(inp, [("k", "old"), ("k", "old")], partition=1)
    config = _upcoming_job(job_config, f"kafka.{inp}", out)
    StreamRecordTask.SEEN.clear()
    run_job(config, "0")  # container 0 starts first and checkpoints partition 0
    produce(inp, [("k", "before container 1")], partition=1)
    run_job(config, "1")
    assert StreamRecordTask.SEEN == [], "every partition starts at upcoming on the job's first start"
    offsets = {ssp.partition: o for cp in _checkpoints(config).values() for ssp, o in cp.offsets.items()}
    assert offsets == {0: 1, 1: _high(broker_bootstrap, inp, 1)} == {0: 1, 1: 3}


def test_a_stream_added_to_the_inputs_starts_at_upcoming_in_every_container(
    broker_bootstrap: str, job_config: Any, topics: Any, produce: Any, run_job: Any
) -> None:
    a, b, out = topics(2), topics(2), topics(1)
    config = _upcoming_job(job_config, f"kafka.{a}", out)
    run_job(config)  # the job ran before, on a alone
    produce(b, [("k", "old")], partition=0)
    produce(b, [("k", "old")], partition=1)
    config["task.inputs"] = f"kafka.{a},kafka.{b}"
    StreamRecordTask.SEEN.clear()
    run_job(config, "0")
    run_job(config, "1")
    assert StreamRecordTask.SEEN == []


def test_partitions_added_between_runs_start_at_their_oldest_whichever_container_starts_first(
    broker_bootstrap: str, job_config: Any, topics: Any, produce: Any, run_job: Any
) -> None:
    inp, out = topics(2), topics(1)
    config = _upcoming_job(job_config, f"kafka.{inp}", out)
    run_job(config, "1")  # the first start, container 1 first
    run_job(config, "0")
    grow(broker_bootstrap, inp, 4)
    produce_new(broker_bootstrap, inp, ["x"], partition=2)
    produce_new(broker_bootstrap, inp, ["y", "z"], partition=3)
    StreamRecordTask.SEEN.clear()
    run_job(config, "1")  # tasks Partition 1 and 3: container 0 checkpointed neither partition 2 nor 3 yet
    run_job(config, "0")
    assert sorted((t, p, o) for t, _, p, o in StreamRecordTask.SEEN) == [
        ("Partition 2", 2, 0),
        ("Partition 3", 3, 0),
        ("Partition 3", 3, 1),
    ]
    # The count the job knew when it first checkpointed the stream stays recorded.
    counts = {n for cp in _checkpoints(config).values() for n in cp.input_counts.values()}
    assert counts == {2}
