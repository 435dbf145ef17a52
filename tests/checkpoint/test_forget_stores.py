"""`samsa checkpoint forget-store`'s rewrite: every marker of a store (changelog position, blob-store
snapshot) leaves both versions of each task's last checkpoint, the store defined by the job or not;
everything else stays."""

from __future__ import annotations

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import Checkpoint, CheckpointV2
from samsa.checkpoint.tool import forget_stores
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "words.in", 0)
COUNTS = SystemStreamPartition("kafka", "job-counts-changelog", 0)
OTHER = SystemStreamPartition("kafka", "job-other-changelog", 0)
TASK = "Partition 0"


def _write(manager: KafkaCheckpointManager) -> CheckpointId:
    cp_id = CheckpointId.create()
    markers = {
        "changelog": {"counts": '{"offset":41}', "other": '{"offset":7}'},
        "blobstore": {"counts": "counts-index", "gone": "gone-index", "other": "other-index"},
    }
    v1 = Checkpoint({SSP: 50}, {COUNTS: (str(cp_id), 41), OTHER: (str(cp_id), 7)})
    manager.write_versions(TASK, (1, 2), v1, CheckpointV2(cp_id, {SSP: 50}, markers))
    manager.flush()
    return cp_id


def test_forgetting_a_store_drops_every_marker_of_it_from_both_versions(
    manager: KafkaCheckpointManager,
) -> None:
    cp_id = _write(manager)

    # `counts` is the job's (its changelog known), `gone` no longer is (no changelog to tell in V1).
    dropped = forget_stores(manager, [TASK, "Partition 1"], {"counts": COUNTS.system_stream, "gone": None})

    assert dropped == {TASK: ["counts", "gone"]}
    assert manager.read_last((2,))[TASK] == CheckpointV2(
        cp_id,
        {SSP: 50},
        {"changelog": {"other": '{"offset":7}'}, "blobstore": {"other": "other-index"}},
    )
    assert manager.read_last((1,))[TASK] == Checkpoint({SSP: 50}, {OTHER: (str(cp_id), 7)})
    # Nothing left to drop: nothing written.
    assert forget_stores(manager, [TASK], {"counts": COUNTS.system_stream, "gone": None}) == {}


def test_forgetting_one_backend_keeps_the_others_markers(manager: KafkaCheckpointManager) -> None:
    cp_id = _write(manager)

    assert forget_stores(manager, [TASK], {"gone": None}, ("changelog",)) == {}
    assert forget_stores(manager, [TASK], {"gone": None}, ("blobstore",)) == {TASK: ["gone"]}

    v2 = manager.read_last((2,))[TASK]
    assert isinstance(v2, CheckpointV2) and v2.checkpoint_id == cp_id
    assert v2.state_markers["blobstore"] == {"counts": "counts-index", "other": "other-index"}
    assert v2.state_markers["changelog"] == {"counts": '{"offset":41}', "other": '{"offset":7}'}
    assert manager.read_last((1,))[TASK] == Checkpoint(
        {SSP: 50}, {COUNTS: (str(cp_id), 41), OTHER: (str(cp_id), 7)}
    )
