"""The entries a checkpoint keeps of input partitions its task does not read now (a stream removed from
task.inputs): carried unchanged from the start checkpoint, flagged in both record versions, read by older
readers as plain offsets, and dropped by `samsa checkpoint reset`."""

from __future__ import annotations

import json

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import Checkpoint, CheckpointV2, decode, decode_v2, encode
from samsa.checkpoint.tool import reset
from samsa.kafka.record_marks import RecordMark
from samsa.runtime.offsets import known_partition_counts
from samsa.runtime.state import checkpoint_inputs
from samsa.streams import SystemStream, SystemStreamPartition

WORDS0 = SystemStreamPartition("kafka", "words", 0)
OTHER0 = SystemStreamPartition("kafka", "words2", 0)
WORDS, OTHER = WORDS0.system_stream, OTHER0.system_stream
MARK = RecordMark(0, 1_700_000_000_000, "ab")
NEW_MARK = RecordMark(3, 1_800_000_000_000, "cd")


def test_a_partition_not_read_now_keeps_its_offset_mark_and_count() -> None:
    start = CheckpointV2(
        CheckpointId.create(),
        {WORDS0: 10, OTHER0: 7},
        input_marks={WORDS0: MARK, OTHER0: MARK},
        input_counts={WORDS: 2, OTHER: 4},
    )
    # words2 left task.inputs: the task reads words only.
    inputs = checkpoint_inputs(start, {WORDS0: 25}, {WORDS0: NEW_MARK}, {WORDS: 2})
    assert inputs.offsets == {WORDS0: 25, OTHER0: 7}
    assert inputs.marks == {WORDS0: NEW_MARK, OTHER0: MARK}
    assert inputs.counts == {WORDS: 2, OTHER: 4}
    assert inputs.kept == {OTHER0}


def test_a_partition_read_again_is_no_longer_kept() -> None:
    start = CheckpointV2(CheckpointId.create(), {WORDS0: 10, OTHER0: 7}, kept_inputs=frozenset({OTHER0}))
    # This run's marks and counts are of the container's partitions: a task records only its own.
    marks = {WORDS0: NEW_MARK, OTHER0: NEW_MARK, SystemStreamPartition("kafka", "words", 1): MARK}
    inputs = checkpoint_inputs(start, {WORDS0: 12, OTHER0: 9}, marks, {WORDS: 2, OTHER: 4})
    assert inputs.offsets == {WORDS0: 12, OTHER0: 9}
    assert inputs.marks == {WORDS0: NEW_MARK, OTHER0: NEW_MARK}
    assert inputs.kept == frozenset()


def test_a_v1_start_and_no_start() -> None:
    start = Checkpoint({WORDS0: 10, OTHER0: 7}, input_counts={OTHER: 4})
    inputs = checkpoint_inputs(start, {WORDS0: 11}, {}, {WORDS: 2})
    assert (inputs.offsets, inputs.marks, inputs.counts) == (
        {WORDS0: 11, OTHER0: 7},
        {},
        {WORDS: 2, OTHER: 4},
    )
    assert inputs.kept == {OTHER0}
    fresh = checkpoint_inputs(None, {WORDS0: 1}, {WORDS0: MARK, OTHER0: MARK}, {WORDS: 2, OTHER: 4})
    assert (fresh.offsets, fresh.marks, fresh.counts, fresh.kept) == (
        {WORDS0: 1},
        {WORDS0: MARK},
        {WORDS: 2},
        frozenset(),
    )


def test_both_versions_flag_the_kept_partitions_and_keep_them_among_the_offsets() -> None:
    kept = frozenset({OTHER0})
    v1 = Checkpoint({WORDS0: 3, OTHER0: 7}, input_counts={OTHER: 4}, kept_inputs=kept)
    v2 = CheckpointV2(
        CheckpointId.create(), {WORDS0: 3, OTHER0: 7}, input_marks={OTHER0: MARK}, kept_inputs=kept
    )
    assert decode(encode(v1), "t#0@1") == v1
    assert decode_v2(encode(v2), "t#0@2") == v2
    for data in (json.loads(encode(v1)), json.loads(encode(v2))):
        # An older reader knows "offsets" only: it resumes a stream added back at its kept offset too.
        assert {"system": "kafka", "stream": "words2", "partition": 0, "offset": "7"} in data["offsets"]
        assert data["keptInputs"] == [{"system": "kafka", "stream": "words2", "partition": 0}]
    # Nothing kept: no field, the record's bytes as before.
    assert "keptInputs" not in json.loads(encode(Checkpoint({WORDS0: 3})))


def test_unreadable_kept_entries_are_dropped() -> None:
    data = json.loads(encode(Checkpoint({WORDS0: 3})))
    data["keptInputs"] = [
        {"system": "kafka", "stream": "words", "partition": 0},
        {"system": "kafka", "stream": "gone", "partition": 0},  # no offset: nothing to keep
        {"stream": "words"},
        "junk",
    ]
    assert decode(json.dumps(data).encode(), "t#0@1").kept_inputs == {WORDS0}
    data["keptInputs"] = "junk"
    assert decode(json.dumps(data).encode(), "t#0@1").kept_inputs == frozenset()


def test_a_kept_count_still_tells_partitions_added_while_not_an_input() -> None:
    # words2 had 4 partitions when first checkpointed; kept, its count still says so at the re-add.
    kept = Checkpoint(
        {WORDS0: 3, OTHER0: 7}, input_counts={WORDS: 1, OTHER: 4}, kept_inputs=frozenset({OTHER0})
    )
    assert known_partition_counts([kept])[OTHER] == 4


def test_a_reset_drops_the_kept_entries_of_both_versions(manager: KafkaCheckpointManager) -> None:
    cp_id = CheckpointId.create()
    offsets = {WORDS0: 3, OTHER0: 7}
    kept = frozenset({OTHER0})
    counts: dict[SystemStream, int] = {WORDS: 1, OTHER: 1}
    v1 = Checkpoint(offsets, input_counts=counts, kept_inputs=kept)
    v2 = CheckpointV2(
        cp_id, offsets, {"changelog": {"counts": "m"}}, None, {WORDS0: MARK, OTHER0: MARK}, counts, kept
    )
    manager.write_versions("Partition 0", (1, 2), v1, v2)
    manager.flush()

    reset(manager, {"Partition 0": [WORDS0]}, "earliest", lambda ssp, to: 0, (1, 2), (2, 1))

    assert manager.read_last((2,))["Partition 0"] == CheckpointV2(
        cp_id, {WORDS0: 0}, {"changelog": {"counts": "m"}}, None, {WORDS0: MARK}, {WORDS: 1}
    )
    assert manager.read_last((1,))["Partition 0"] == Checkpoint({WORDS0: 0}, input_counts={WORDS: 1})
