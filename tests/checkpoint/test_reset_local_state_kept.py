"""`samsa checkpoint reset` of a task without a checkpoint (its checkpoint topic lost) writes a V2 record
with no state markers that says the stores keep their local state (`localStateKept`): a blob-backed store
keeps its local dirs instead of starting empty as one new to a commit's checkpoint does."""

from __future__ import annotations

import json

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import Checkpoint, CheckpointV2, decode_v2, encode
from samsa.checkpoint.tool import reset
from samsa.streams import SystemStreamPartition

WORDS0 = SystemStreamPartition("kafka", "words", 0)


def test_the_flag_is_written_only_when_set_and_read_back() -> None:
    kept = CheckpointV2(CheckpointId.create(), {WORDS0: 3}, local_state_kept=True)
    assert json.loads(encode(kept))["localStateKept"] is True
    assert decode_v2(encode(kept), "t#0@1") == kept
    # A commit's checkpoint: no field, the record's bytes as before; an older record reads as unset.
    plain = CheckpointV2(CheckpointId.create(), {WORDS0: 3}, {"blobstore": {"counts": "index"}})
    assert "localStateKept" not in json.loads(encode(plain))
    assert decode_v2(encode(plain), "t#0@2").local_state_kept is False
    data = json.loads(encode(kept))
    data["localStateKept"] = "yes"  # only a JSON true sets it
    assert decode_v2(json.dumps(data).encode(), "t#0@3").local_state_kept is False


def test_a_reset_without_a_checkpoint_writes_fresh_records_keeping_the_local_state(
    manager: KafkaCheckpointManager,
) -> None:
    reset(manager, {"Partition 0": [WORDS0]}, "latest", lambda ssp, to: 5, (1, 2), (2, 1))
    v2 = manager.read_last((2,))["Partition 0"]
    assert isinstance(v2, CheckpointV2)
    assert (v2.offsets, v2.state_markers, v2.local_state_kept) == ({WORDS0: 5}, {}, True)
    assert manager.read_last((1,))["Partition 0"] == Checkpoint({WORDS0: 5})
    # Reset again before any start: the record is rewritten, still saying so.
    reset(manager, {"Partition 0": [WORDS0]}, "earliest", lambda ssp, to: 0, (1, 2), (2, 1))
    again = manager.read_last((2,))["Partition 0"]
    assert isinstance(again, CheckpointV2) and again.local_state_kept and again.offsets == {WORDS0: 0}


def test_a_reset_of_a_commits_checkpoint_keeps_its_markers_and_no_flag(
    manager: KafkaCheckpointManager,
) -> None:
    committed = CheckpointV2(CheckpointId.create(), {WORDS0: 9}, {"blobstore": {"counts": "index"}})
    manager.write_versions("Partition 0", (2,), Checkpoint({WORDS0: 9}), committed)
    manager.flush()
    reset(manager, {"Partition 0": [WORDS0]}, "earliest", lambda ssp, to: 0, (1, 2), (2, 1))
    v2 = manager.read_last((2,))["Partition 0"]
    assert isinstance(v2, CheckpointV2)
    assert (v2.checkpoint_id, v2.state_markers, v2.local_state_kept) == (
        committed.checkpoint_id,
        committed.state_markers,
        False,
    )
