"""The transactional restore decision table (pure: no Kafka, no disk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.stores.changelog.actions import LocalDir, RestoreInputs, StoreActions, seed_actions, store_actions
from samsa.stores.changelog.exceptions import ChangelogLostError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "counts-changelog", 2)
NOW_MS = 1_700_000_000_000
CHECKPOINT_MS = NOW_MS - 60_000  # a minute ago
RETENTION_MS = 86_400_000
LAG_MS = 14_400_000
STORE_DIR = Path("/state/job/Partition_2/counts")


def local(
    checkpoint: str, offset: int | None, age_ms: int = 60_000, ssp: SystemStreamPartition = SSP
) -> LocalDir:
    return LocalDir(
        STORE_DIR.with_name(f"counts-{checkpoint}"),
        ChangelogMarker(ssp, offset).encode(),
        NOW_MS - age_ms,
        checkpoint,
    )


def decide(
    checkpointed: int | str | None = 100,
    low: int = 0,
    high: int = 151,  # newest = 150: 50 records after the checkpoint
    dirs: tuple[LocalDir, ...] = (),
    checkpoint_ms: int | None = CHECKPOINT_MS,
    persistent: bool = True,
    checkpoint_id: str | None = None,
) -> StoreActions:
    """`checkpointed`: an offset, None (empty changelog at the commit) or "none" (no checkpoint)."""
    marker = None if isinstance(checkpointed, str) else ChangelogMarker(SSP, checkpointed)
    return store_actions(
        RestoreInputs(
            store="counts",
            changelog=SSP,
            persistent=persistent,
            checkpointed=marker,
            checkpoint_ms=checkpoint_ms,
            low=low,
            high=high,
            local_dirs=dirs,
            now_ms=NOW_MS,
            delete_retention_ms=RETENTION_MS,
            min_compaction_lag_ms=LAG_MS,
            checkpoint_id=checkpoint_id,
            task="Partition 2",
        )
    )


def test_no_local_dir_full_replay_to_checkpoint_then_trim() -> None:
    a = decide()
    assert (a.reuse, a.delete, a.start, a.restore_to, a.end) == (None, (), 0, 100, 150)
    assert a.trims and not a.degraded
    assert a.records_to_read == 151


def test_local_dir_matching_checkpoint_is_reused_and_nothing_replayed() -> None:
    d = local("1-1", 100)
    a = decide(dirs=(d,))
    assert a.reuse == d.path and a.delete == ()
    assert (a.start, a.restore_to, a.end) == (101, 100, 150)  # only the undo range is read


def test_local_dir_behind_checkpoint_replays_the_delta() -> None:
    older, newer = local("1-1", 40), local("2-1", 70)
    a = decide(dirs=(older, newer))
    assert a.reuse == newer.path and a.delete == (older.path,)
    assert (a.start, a.restore_to) == (71, 100)


def test_local_dir_ahead_of_checkpoint_is_deleted() -> None:
    ahead, ok = local("3-1", 120), local("1-1", 90)
    a = decide(dirs=(ok, ahead))
    assert a.reuse == ok.path and a.delete == (ahead.path,)
    assert any("ahead of the checkpoint" in n for n in a.notes)
    alone = decide(dirs=(ahead,))
    assert alone.reuse is None and alone.delete == (ahead.path,) and alone.start == 0


def test_stale_local_dir_with_a_tail_to_replay_is_deleted() -> None:
    stale = local("1-1", 70, age_ms=RETENTION_MS)
    a = decide(dirs=(stale,))
    assert a.reuse is None and a.delete == (stale.path,) and a.start == 0
    assert any("delete.retention.ms" in n for n in a.notes)


def test_an_old_local_dir_at_the_checkpoint_is_reused() -> None:
    # Nothing to replay, so no tombstone can be missing: an idle task, whose timer commits are left out,
    # keeps a local dir as old as its last commit, which a restart must not throw away.
    old = local("1-1", 100, age_ms=3 * RETENTION_MS)
    a = decide(dirs=(old,))
    assert a.reuse == old.path and a.delete == ()
    assert (a.start, a.restore_to) == (101, 100)


def test_dir_without_readable_marker_or_for_another_changelog_is_deleted() -> None:
    no_marker = LocalDir(STORE_DIR.with_name("counts-1-1"))
    garbage = LocalDir(STORE_DIR.with_name("counts-2-1"), "{oops", NOW_MS)
    other = local("3-1", 100, ssp=SystemStreamPartition("kafka", "counts-changelog", 3))
    # Of unknown age with a tail to replay (at the checkpoint itself, its age would not matter).
    unknown_age = LocalDir(STORE_DIR.with_name("counts-4-1"), ChangelogMarker(SSP, 90).encode(), None)
    a = decide(dirs=(no_marker, garbage, other, unknown_age))
    assert a.reuse is None and set(a.delete) == {d.path for d in (no_marker, garbage, other, unknown_age)}


def test_local_dir_before_the_oldest_offset_is_deleted() -> None:
    gap, edge = local("1-1", 8), local("2-1", 9)  # records [10, ...] remain: 9 is contiguous, 8 is not
    assert decide(low=10, dirs=(gap,)).reuse is None
    a = decide(low=10, dirs=(gap, edge))
    assert a.reuse == edge.path and a.start == 10 and a.delete == (gap.path,)


def test_equal_offsets_keep_the_newest_dir() -> None:
    first, second = local("1-1", 100), local("2-1", 100)
    a = decide(dirs=(first, second))
    assert a.reuse == second.path and a.delete == (first.path,)


def test_no_checkpoint_replays_everything_keeps_it_and_deletes_dirs() -> None:
    d = local("1-1", 100)
    a = decide(checkpointed="none", dirs=(d,))
    assert (a.reuse, a.delete, a.start, a.restore_to, a.end) == (None, (d.path,), 0, 150, 150)
    assert not a.trims


def test_checkpoint_with_empty_changelog_undoes_everything_written_since() -> None:
    a = decide(checkpointed=None, dirs=(local("1-1", None),))
    assert a.reuse is None and (a.start, a.restore_to, a.end) == (0, -1, 150)
    assert a.records_to_read == 151 and a.trims


def test_everything_empty_reads_nothing() -> None:
    a = decide(checkpointed=None, low=0, high=0)
    assert a.records_to_read == 0 and not a.trims
    b = decide(checkpointed="none", low=0, high=0)
    assert b.records_to_read == 0


def test_checkpoint_equal_to_newest_restores_without_trim() -> None:
    a = decide(checkpointed=150, dirs=(local("1-1", 150),))
    assert a.reuse is not None and a.records_to_read == 0 and not a.trims


def test_checkpoint_past_the_changelog_end_rebuilds_it_from_the_exact_local_dir() -> None:
    # The topic was deleted and recreated: it holds 151 records, the checkpoint was at offset 500.
    exact, older = local("9-1", 500), local("8-1", 400)
    a = decide(checkpointed=500, dirs=(older, exact), checkpoint_id="9-1")
    # The local copy is the state; every record the changelog holds is undone, then every other key written.
    assert (a.reuse, a.delete, a.start, a.restore_to, a.end) == (exact.path, (older.path,), 0, -1, 150)
    assert a.seed and a.trims and a.degraded
    assert "outside" in a.notes[0] and "rebuilding the changelog" in a.notes[0] and "counts-9-1" in a.notes[0]
    empty = decide(checkpointed=0, low=0, high=0, dirs=(local("9-1", 0),), checkpoint_id="9-1")
    assert empty.seed and empty.records_to_read == 0 and empty.reuse is not None


def test_checkpoint_before_the_changelog_start_rebuilds_it_from_the_exact_local_dir() -> None:
    # Records deleted from the front: [20, 150] remain, all written after the checkpoint at 5.
    a = decide(checkpointed=5, low=20, dirs=(local("9-1", 5),), checkpoint_id="9-1")
    assert a.seed and (a.start, a.restore_to, a.end) == (20, 19, 150)
    assert not decide(checkpointed=19, low=20).degraded  # oldest - 1 is still in range


def test_lost_changelog_without_the_exact_local_dir_refuses_the_start() -> None:
    with pytest.raises(ChangelogLostError) as refused:
        decide(checkpointed=500, checkpoint_id="9-1")  # another host: no local dir
    e = refused.value
    assert (e.store, e.task, e.changelog, e.offset, e.low, e.newest) == (
        "counts",
        "Partition 2",
        SSP,
        500,
        0,
        150,
    )
    message = str(e)
    for named in ("'counts'", "'Partition 2'", "counts-changelog partition 2", "offset 500", "[0, 150]"):
        assert named in message, message
    assert "samsa checkpoint forget-changelog" in message and "--store counts" in message
    with pytest.raises(ChangelogLostError) as before:
        decide(checkpointed=5, low=20, checkpoint_id="9-1")
    assert "[20, 150]" in str(before.value)


def test_lost_changelog_refuses_unless_a_dir_holds_exactly_the_checkpointed_state() -> None:
    not_exact = (
        local("8-1", 500),  # the same offset, but another checkpoint's dir
        local("9-1", 499),  # the checkpoint's dir at another offset
        local("9-1", 500, ssp=SystemStreamPartition("kafka", "counts-changelog", 3)),
        LocalDir(STORE_DIR.with_name("counts-9-1"), ChangelogMarker(SSP, 500).encode(), NOW_MS),  # id unsure
        LocalDir(STORE_DIR.with_name("counts-9-1"), "{oops", NOW_MS, "9-1"),
    )
    for d in not_exact:
        with pytest.raises(ChangelogLostError):
            decide(checkpointed=500, dirs=(d,), checkpoint_id="9-1")
    with pytest.raises(ChangelogLostError, match="is not the dir of checkpoint"):
        decide(checkpointed=500, dirs=(local("9-1", 500),), checkpoint_id=None)
    with pytest.raises(ChangelogLostError, match="not persistent"):
        decide(checkpointed=500, dirs=(local("9-1", 500),), checkpoint_id="9-1", persistent=False)


def test_checkpoint_of_another_changelog_counts_as_none() -> None:
    marker = ChangelogMarker(SystemStreamPartition("kafka", "old-changelog", 2), 100)
    a = store_actions(
        RestoreInputs("counts", SSP, True, marker, CHECKPOINT_MS, 0, 151, (local("1-1", 100),), NOW_MS)
    )
    assert a.degraded and a.reuse is None and (a.start, a.restore_to, a.end) == (0, 150, 150)


def test_old_checkpoint_beyond_compaction_lag_undoes_only_what_the_replay_proves() -> None:
    # Compaction may have removed checkpointed values of keys written after the checkpoint: the restore
    # still undoes, but only when the replay of [81, 100] proves that nothing was removed.
    d = local("1-1", 80)
    old = decide(dirs=(d,), checkpoint_ms=NOW_MS - int(0.9 * LAG_MS) - 1)
    assert old.reuse == d.path and (old.start, old.restore_to, old.end) == (81, 100, 150)
    assert old.trims and old.undo_proven_only and not old.degraded
    assert any("min.compaction.lag.ms" in n and "without a gap" in n for n in old.notes)
    recent = decide(dirs=(d,), checkpoint_ms=NOW_MS - int(0.9 * LAG_MS))
    assert recent.restore_to == 100 and recent.trims and not recent.undo_proven_only
    other_host = decide(checkpoint_ms=NOW_MS - 2 * LAG_MS)
    assert (other_host.start, other_host.restore_to, other_host.end) == (0, 100, 150)
    assert other_host.undo_proven_only and not other_host.degraded


def test_old_checkpoint_with_the_exact_local_dir_undoes_everything() -> None:
    # The local dir holds exactly the checkpointed state: undoing takes each key's value from it and
    # nothing from the changelog up to the checkpoint, so compaction cannot make it inexact.
    exact = local("9-1", 100, age_ms=2 * LAG_MS)
    a = decide(dirs=(exact,), checkpoint_ms=NOW_MS - 2 * LAG_MS, checkpoint_id="9-1")
    assert (a.reuse, a.start, a.restore_to, a.end) == (exact.path, 101, 100, 150)
    assert a.trims and not a.undo_proven_only and not a.degraded and not a.seed
    # Another checkpoint's dir at the checkpointed offset holds the same state.
    same = decide(dirs=(local("8-1", 100),), checkpoint_ms=NOW_MS - 2 * LAG_MS, checkpoint_id="9-1")
    assert same.trims and same.restore_to == 100 and not same.undo_proven_only


def test_checkpoint_of_an_empty_changelog_undoes_everything_however_old() -> None:
    # The checkpointed state is empty: a tombstone for every key undoes it exactly, whatever was compacted.
    a = decide(checkpointed=None, checkpoint_ms=NOW_MS - 3 * RETENTION_MS)
    assert (a.start, a.restore_to, a.end) == (0, -1, 150)
    assert a.trims and not a.undo_proven_only and not a.degraded and not a.seed


def test_checkpoint_older_than_delete_retention_reseeds_only_if_the_tail_shows_a_gap() -> None:
    # A delete after the checkpoint may be gone with the value it replaced; only a gap after the checkpoint
    # can show it, which the replay looks for: the plan undoes as usual, and rewrites the store's other keys
    # only then (`reseed_on_gap`), instead of rebuilding the whole changelog whenever the checkpoint is old.
    exact, older = local("9-1", 100, age_ms=RETENTION_MS), local("8-1", 60, age_ms=RETENTION_MS + 1)
    a = decide(dirs=(older, exact), checkpoint_ms=NOW_MS - RETENTION_MS, checkpoint_id="9-1")
    assert (a.reuse, a.delete, a.start, a.restore_to, a.end) == (exact.path, (older.path,), 101, 100, 150)
    assert a.reseed_on_gap and a.trims and not a.seed and not a.degraded
    assert any("delete.retention.ms" in n and "show a gap" in n for n in a.notes)
    # Another checkpoint's dir at the checkpointed offset holds the same state: the same plan.
    other = decide(dirs=(local("8-1", 100),), checkpoint_ms=NOW_MS - RETENTION_MS, checkpoint_id="9-1")
    assert other.reseed_on_gap and other.trims and not other.seed and not other.degraded
    # Younger than 0.9 x delete.retention.ms: no tombstone after the checkpoint can be gone.
    young = decide(dirs=(exact,), checkpoint_ms=NOW_MS - int(0.9 * RETENTION_MS), checkpoint_id="9-1")
    assert not young.reseed_on_gap and not young.seed
    # Without a local dir: undone where proven, and the lost deletes said.
    far = decide(checkpoint_ms=NOW_MS - RETENTION_MS, checkpoint_id="9-1")
    assert far.undo_proven_only and far.degraded and not far.reseed_on_gap
    assert any("value is lost" in n for n in far.notes)


def test_an_exactly_once_clean_stop_restarted_a_day_later_does_not_rebuild_the_changelog() -> None:
    # The checkpoint at 100, the commit record of its version at 101, nothing else; 22 h later, the same
    # host. It rewrote the whole changelog (the size of the store) at every such restart.
    age = 22 * 3600 * 1000
    exact = local("9-1", 100, age_ms=age)
    a = decide(checkpointed=100, high=102, dirs=(exact,), checkpoint_ms=NOW_MS - age, checkpoint_id="9-1")
    assert not a.seed and (a.reuse, a.start, a.restore_to, a.end) == (exact.path, 101, 100, 101)
    assert a.reseed_on_gap  # and the replay of offset 101 finds no gap: `test_restore_loop`


def test_unknown_checkpoint_age_still_trims() -> None:
    assert decide(checkpoint_ms=None).restore_to == 100


def test_v1_only_checkpoint_marker_behaves_like_v2() -> None:
    # A V1 checkpoint's changelog entry (checkpoint id, offset) becomes the same marker: same plan.
    v1 = ChangelogMarker(SSP, 100)
    d = local("1-1", 100)
    a = store_actions(RestoreInputs("counts", SSP, True, v1, CHECKPOINT_MS, 0, 151, (d,), NOW_MS))
    assert a == decide(dirs=(d,))


def test_in_memory_store_ignores_local_dirs() -> None:
    a = decide(persistent=False)
    assert (a.reuse, a.delete, a.start, a.restore_to, a.end) == (None, (), 0, 100, 150)


def test_seeding_reuses_the_restored_dir_and_undoes_every_record_of_the_changelog() -> None:
    restored = STORE_DIR.with_name("counts-123-4")
    stale = local("100-1", 50)
    inputs = RestoreInputs(
        store="counts",
        changelog=SSP,
        persistent=True,
        checkpointed=None,  # the checkpoint has no changelog marker (only the blob store's)
        checkpoint_ms=CHECKPOINT_MS,
        low=20,
        high=151,
        local_dirs=(LocalDir(restored), stale),
        now_ms=NOW_MS,
    )
    a = seed_actions(inputs, restored)
    # Nothing of the changelog is kept: each key in it gets the restored value or a tombstone.
    assert (a.reuse, a.delete, a.start, a.restore_to, a.end) == (restored, (stale.path,), 20, 19, 150)
    assert a.trims and not a.degraded
    assert "seeding" in a.notes[0]
    empty = seed_actions(RestoreInputs("counts", SSP, True, None, None, low=7, high=7), restored)
    assert empty.records_to_read == 0 and empty.reuse == restored
