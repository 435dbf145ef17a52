"""Samza's task.transactional.state.retain.existing.state in the restore decision: a store without a
checkpointed changelog position keeps what its changelog holds (true, and unset), or starts empty with
all of it undone (false)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from samsa.stores.changelog.actions import LocalDir, RestoreInputs, store_actions
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "counts-changelog", 0)
OLD = LocalDir(Path("/state/job/Partition_0/counts-1-1"), ChangelogMarker(SSP, 5).encode(), 0.0, "1-1")


def _decide(retain: bool | None) -> RestoreInputs:
    extra = {} if retain is None else {"retain_existing_state": retain}
    return RestoreInputs(
        store="counts",
        changelog=SSP,
        persistent=True,
        checkpointed=None,
        checkpoint_ms=None,
        low=10,
        high=40,
        local_dirs=(OLD,),
        **extra,  # type: ignore[arg-type]
    )


def test_without_a_checkpoint_the_changelog_is_kept_by_default_and_with_true() -> None:
    for retain in (None, True):
        a = store_actions(_decide(retain))
        assert (a.start, a.restore_to, a.end) == (10, 39, 39) and not a.trims
        assert a.delete == (OLD.path,) and a.reuse is None


def test_without_a_checkpoint_false_starts_the_store_empty_undoing_the_whole_changelog() -> None:
    a = store_actions(_decide(False))
    # Every record is read and undone (a tombstone per key): the changelog then reads back empty.
    assert (a.start, a.restore_to, a.end) == (10, 9, 39) and a.trims
    assert a.delete == (OLD.path,) and a.reuse is None and not a.seed
    assert any("retain.existing.state=false" in note for note in a.notes), a.notes


def test_false_changes_nothing_when_the_checkpoint_has_a_position() -> None:
    a = store_actions(replace(_decide(False), checkpointed=ChangelogMarker(SSP, 30), local_dirs=()))
    assert (a.start, a.restore_to, a.end) == (10, 30, 39)
