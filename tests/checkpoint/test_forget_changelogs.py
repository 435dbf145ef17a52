"""`samsa checkpoint forget-changelog`'s rewrite: a store's changelog position leaves both versions of each
task's last checkpoint, everything else stays."""

from __future__ import annotations

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import Checkpoint, CheckpointV2
from samsa.checkpoint.tool import forget_changelogs
from samsa.streams import SystemStream, SystemStreamPartition

SSP = SystemStreamPartition("kafka", "words.in", 0)
COUNTS = SystemStreamPartition("kafka", "job-counts-changelog", 0)
OTHER = SystemStreamPartition("kafka", "job-other-changelog", 0)
TASK = "Partition 0"


def test_forgetting_drops_the_store_s_changelog_position_from_both_versions(
    manager: KafkaCheckpointManager,
) -> None:
    cp_id = CheckpointId.create()
    markers = {
        "changelog": {"counts": '{"offset":41}', "other": '{"offset":7}'},
        "blobstore": {"counts": "index-blob"},
    }
    v1 = Checkpoint({SSP: 50}, {COUNTS: (str(cp_id), 41), OTHER: (str(cp_id), 7)})
    manager.write_versions(TASK, (1, 2), v1, CheckpointV2(cp_id, {SSP: 50}, markers))
    manager.flush()

    dropped = forget_changelogs(manager, [TASK, "Partition 1"], {"counts": COUNTS.system_stream})

    assert dropped == {TASK: ["counts"]}
    v2 = manager.read_last((2,))[TASK]
    assert v2 == CheckpointV2(
        cp_id, {SSP: 50}, {"changelog": {"other": '{"offset":7}'}, "blobstore": {"counts": "index-blob"}}
    )
    assert manager.read_last((1,))[TASK] == Checkpoint({SSP: 50}, {OTHER: (str(cp_id), 7)})
    # Nothing left to drop: nothing written.
    assert forget_changelogs(manager, [TASK], {"counts": SystemStream("kafka", "job-counts-changelog")}) == {}
