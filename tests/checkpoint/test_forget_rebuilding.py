"""`samsa checkpoint forget-changelog` / `forget-store` of a store whose changelog rebuild was cut short (its
marker says `rebuilding`): the marker becomes one saying the state was given up, so the next start empties
the store instead of restoring the partial rebuild (R1 M2: old counts and new ones mixed); the start's
record of a rebuild (`with_changelog_markers`) and V1's place for it."""

from __future__ import annotations

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import Checkpoint, CheckpointV2, decode, encode
from samsa.checkpoint.tool import forget_changelogs, forget_stores, with_changelog_markers
from samsa.stores.changelog.marker import ChangelogMarker, RebuildMark
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "words.in", 0)
COUNTS = SystemStreamPartition("kafka", "job-counts-changelog", 0)
TASK = "Partition 0"
MARK = RebuildMark("host-a", "/state/counts-1-1")


def test_the_start_records_a_rebuild_in_either_version_keeping_everything_else() -> None:
    cp_id = CheckpointId.create()
    marked = ChangelogMarker(COUNTS, 41, MARK).encode()
    v2 = CheckpointV2(cp_id, {SSP: 50}, {"changelog": {"counts": ChangelogMarker(COUNTS, 41).encode()}})
    assert with_changelog_markers(v2, {"counts": marked}) == CheckpointV2(
        cp_id, {SSP: 50}, {"changelog": {"counts": marked}}
    )
    v1 = Checkpoint({SSP: 50}, {COUNTS: (str(cp_id), 41)})
    recorded = with_changelog_markers(v1, {"counts": marked})
    assert recorded == Checkpoint({SSP: 50}, {COUNTS: (str(cp_id), 41)}, changelog_marks={COUNTS: marked})
    assert decode(encode(recorded), "here") == recorded
    assert b"marker" not in encode(v1)  # a commit's V1 record: the bytes as before


def test_forgetting_a_store_whose_rebuild_is_unsealed_gives_its_state_up_in_both_versions(
    manager: KafkaCheckpointManager,
) -> None:
    cp_id = CheckpointId.create()
    marked = ChangelogMarker(COUNTS, 41, MARK).encode()
    given_up = ChangelogMarker(COUNTS, 41, given_up=True).encode()
    v1 = Checkpoint({SSP: 50}, {COUNTS: (str(cp_id), 41)}, changelog_marks={COUNTS: marked})
    v2 = CheckpointV2(cp_id, {SSP: 50}, {"changelog": {"counts": marked}, "blobstore": {"counts": "index"}})
    manager.write_versions(TASK, (1, 2), v1, v2)
    manager.flush()

    emptied: dict[str, list[str]] = {}
    dropped = forget_stores(manager, [TASK], {"counts": COUNTS.system_stream}, None, None, emptied)

    assert dropped == {TASK: ["counts"]} and emptied == {TASK: ["counts"]}
    assert manager.read_last((2,))[TASK] == CheckpointV2(
        cp_id, {SSP: 50}, {"changelog": {"counts": given_up}, "blobstore": {}}
    )
    assert manager.read_last((1,))[TASK] == Checkpoint(
        {SSP: 50}, {COUNTS: (str(cp_id), 41)}, changelog_marks={COUNTS: given_up}
    )
    # Forgetting again keeps it given up (the start that empties the store may be cut short too).
    assert forget_changelogs(manager, [TASK], {"counts": COUNTS.system_stream}) == {TASK: ["counts"]}
    assert manager.read_last((2,))[TASK].state_markers["changelog"] == {"counts": given_up}  # type: ignore[union-attr]


def test_a_store_without_its_changelog_now_drops_the_rebuild_marker(manager: KafkaCheckpointManager) -> None:
    cp_id = CheckpointId.create()
    marked = ChangelogMarker(COUNTS, 41, MARK).encode()
    manager.write_versions(
        TASK, (2,), None, CheckpointV2(cp_id, {SSP: 50}, {"changelog": {"counts": marked}})
    )
    manager.flush()
    emptied: dict[str, list[str]] = {}
    assert forget_stores(manager, [TASK], {"counts": None}, None, None, emptied) == {TASK: ["counts"]}
    assert emptied == {}
    assert manager.read_last((2,))[TASK] == CheckpointV2(cp_id, {SSP: 50}, {"changelog": {}})
