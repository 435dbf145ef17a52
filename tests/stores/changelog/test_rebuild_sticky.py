"""A changelog rebuild decided once holds until a commit seals it: a start cut short in the rebuild (its
records moved the recreated changelog's end onto the checkpointed offset), or an exactly-once start's abort
record between the start's check and its restore, must not turn it into a plain restore of a partly
rebuilt changelog (second read: both did)."""

from __future__ import annotations

from pathlib import Path

from samsa.stores.changelog.actions import LocalDir, RestoreInputs
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.changelog.restore import ChangelogRestoreManager
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "counts-changelog", 0)
CID = "1795542452386-214973"


def _plan(store_dir: Path, offset: int, high: int, checkpoint_id: str = CID) -> tuple[bool, str]:
    exact = LocalDir(store_dir.with_name(f"counts-{CID}"), ChangelogMarker(SSP, offset).encode(), 1e15, CID)
    inputs = RestoreInputs(
        "counts",
        SSP,
        True,
        ChangelogMarker(SSP, offset),
        None,
        0,
        high,
        (exact,),
        now_ms=1e15,
        checkpoint_id=checkpoint_id,
        task="Partition 0",
    )
    actions = ChangelogRestoreManager._planned(store_dir, SSP, checkpoint_id, inputs)
    return actions.seed, actions.notes[-1]


def test_a_rebuild_cut_short_is_rebuilt_again_at_the_next_start(tmp_path: Path) -> None:
    store_dir = tmp_path / "counts"
    assert _plan(store_dir, 999, 300)[0]  # recreated: 300 records, the checkpoint at 999
    assert (tmp_path / "counts.rebuilding").exists()
    # The rebuild's undo and seed records moved the end past 999, then the container died before a commit.
    seed, note = _plan(store_dir, 999, 1000)
    assert seed, note


def test_an_abort_record_between_check_and_restore_keeps_the_rebuild(tmp_path: Path) -> None:
    store_dir = tmp_path / "counts"
    assert _plan(store_dir, 0, 0)[0]  # the check, before the exactly-once abort records: empty topic
    assert _plan(store_dir, 0, 1)[0]  # the restore, after one abort record at offset 0


def test_a_commit_since_the_rebuild_ends_it(tmp_path: Path) -> None:
    store_dir = tmp_path / "counts"
    assert _plan(store_dir, 999, 300)[0]
    seed, _ = _plan(store_dir, 999, 1000, checkpoint_id="1795542452999-1")  # the checkpoint moved on
    assert not seed and not (tmp_path / "counts.rebuilding").exists()
