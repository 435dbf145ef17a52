"""What a transactional restore does for one store, decided from the checkpoint, the changelog and the disk.

A pure function of its inputs (no Kafka, no disk), so every row of the decision table is a unit test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from samsa.stores.changelog.exceptions import (
    ChangelogLostError,
    ChangelogMarkerError,
    ChangelogRebuildCutShortError,
)
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStreamPartition

# Samza's margin: trimming is skipped once the checkpoint is this close to the changelog's compaction lag.
COMPACTION_LAG_MARGIN = 0.9


@dataclass(frozen=True, slots=True)
class LocalDir:
    """A local checkpoint dir of the store (`<store dir>-<checkpoint id>`) and what its marker file says."""

    path: Path
    #: This backend's marker for the store in the dir's marker file; None when the file is missing,
    #: unreadable or has no changelog marker.
    marker: str | None = None
    #: When the marker file was written (epoch ms); None when unknown.
    written_at_ms: float | None = None
    #: The checkpoint id its name and marker file agree on; None when they do not, or it has no marker file.
    checkpoint_id: str | None = None


@dataclass(frozen=True, slots=True)
class RestoreInputs:
    """Everything the decision needs for one store, read once at init."""

    store: str
    changelog: SystemStreamPartition
    #: On disk (RocksDB): has a live dir and may have local checkpoint dirs. In-memory stores have neither.
    persistent: bool
    #: The checkpoint's marker for the store; None when there is no checkpoint (or no marker for it).
    checkpointed: ChangelogMarker | None
    #: Epoch ms of the checkpoint (from its id); None when unknown.
    checkpoint_ms: int | None
    #: The changelog partition's watermarks at init: records are at [low, high - 1].
    low: int
    high: int
    local_dirs: Sequence[LocalDir] = ()
    now_ms: float = 0
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 14_400_000
    #: The id of the checkpoint being restored, and the task (named by the refusal of a lost changelog).
    checkpoint_id: str | None = None
    task: str = ""
    #: The other backends whose marker for the store the checkpoint has (a blob-store snapshot).
    other_backups: tuple[str, ...] = ()
    #: Samza's task.transactional.state.retain.existing.state: without a checkpointed position, False
    #: starts the store empty, undoing what the changelog holds.
    retain_existing_state: bool = True


@dataclass(frozen=True, slots=True)
class StoreActions:
    """The plan: delete the live dir and `delete`, copy `reuse` into the live dir, then read the changelog
    from `start` to `end` (inclusive; `end` is the newest offset at init), putting records up to `restore_to`
    into the store and undoing (trimming) those after it. Nothing is read when `end < start`.
    """

    delete: tuple[Path, ...]
    reuse: Path | None
    start: int
    restore_to: int
    end: int
    #: Why, for the log; one line per decision taken.
    notes: tuple[str, ...] = ()
    #: True when the store cannot be brought back exactly to the checkpoint (logged as a warning).
    degraded: bool = False
    #: True when the changelog is rebuilt from the reused dir: every record read is undone, then every other
    #: key of the store is written to it (`ChangelogRestoreManager` does that part).
    seed: bool = False
    #: True when the checkpoint is old enough for compaction to have removed records that undoing needs: the
    #: records after `restore_to` are undone only when the replay proves that nothing up to it was removed
    #: (consecutive offsets: `restore._Consecutive`); else they are kept, with a warning.
    undo_proven_only: bool = False
    #: True when the store starts as exactly the checkpointed state (nothing to replay) and the checkpoint is
    #: older than 0.9 x delete.retention.ms: a delete written after it may be gone from the changelog with
    #: the checkpointed value it replaced. Only a gap in the offsets read after `restore_to` (every record
    #: counted) can show that; then, after undoing, every other key of the store is written to the
    #: changelog (`ChangelogRestoreManager` does that), so that it holds the whole checkpointed state again.
    reseed_on_gap: bool = False

    @property
    def records_to_read(self) -> int:
        """Offsets in the read range (an upper bound: compaction leaves gaps)."""
        return max(0, self.end - self.start + 1)

    @property
    def trims(self) -> bool:
        return self.end > self.restore_to and self.end >= self.start


def store_actions(i: RestoreInputs) -> StoreActions:
    """Samza's transactional restore decisions (§2.6 of the notes), for one store."""
    newest = i.high - 1  # below `low` when the partition is empty
    dirs = tuple(d.path for d in i.local_dirs)
    full = f"changelog {i.changelog} offsets [{i.low}, {newest}]"
    checkpointed = i.checkpointed
    if checkpointed is not None and checkpointed.changelog != i.changelog:
        return StoreActions(
            dirs,
            None,
            i.low,
            newest,
            newest,
            (
                # The start checked that the checkpoint's changelog is deleted or empty (it refuses while
                # that one still holds the state: `moved.check_changelog_moves`).
                f"the checkpoint's changelog is {checkpointed.changelog}, not {i.changelog} (stores."
                f"{i.store}.changelog was changed; the old topic is deleted or empty): its local "
                f"checkpoint dirs are dropped, restoring all of {full}, nothing undone",
            ),
            degraded=True,
        )
    if checkpointed is None:
        # Samza's retain.existing.state: a first start, or a store new to the checkpoint, keeps what the
        # changelog holds instead of trimming it all away, unless told not to.
        if not i.retain_existing_state:
            note = f"no checkpoint, retain.existing.state=false: starting empty, undoing all of {full}"
            return StoreActions(dirs, None, i.low, i.low - 1, newest, (note,))
        return StoreActions(dirs, None, i.low, newest, newest, (f"no checkpoint: restoring all of {full}",))
    c = checkpointed.offset
    if c is not None and not i.low - 1 <= c <= newest:
        return _lost_changelog_actions(i, c, full)
    notes: list[str] = []
    target = i.low - 1 if c is None else c  # c None: the changelog was empty at the commit
    reuse, reuse_offset = _best_local_dir(i, c, notes) if i.persistent else (None, None)
    start = i.low if reuse_offset is None else reuse_offset + 1
    delete = tuple(p for p in dirs if p != reuse)
    if reuse is not None:
        notes.append(f"reusing {reuse.name} (changelog offset {reuse_offset})")
    age_ms = None if i.checkpoint_ms is None else i.now_ms - i.checkpoint_ms
    degraded = proven_only = reseed = False
    if age_ms is not None and target < newest:
        age = f"checkpoint is {age_ms / 1000:.0f} s old"
        if start > target:
            # Nothing to replay: the store starts as exactly the checkpointed state (a local dir at the
            # checkpointed offset, or empty), and undoing takes each key's value from it, never from the
            # changelog's records up to the checkpoint, so compaction of those cannot matter, however old
            # the checkpoint. The keys to undo are those of the records after it: compaction removes a
            # record only when a later record of its key exists, so every key written there keeps a record
            # there, except a tombstone, which Kafka keeps for delete.retention.ms after it is written
            # (longer, as it is kept that long after the cleaner first passes it). Once the checkpoint is
            # older than that (with Samza's margin), a delete after it may be gone with the checkpointed
            # value it replaced; it leaves a gap in the offsets after the checkpoint, which the replay
            # looks for (a tail without one, as an exactly-once commit record after a clean stop, is whole).
            if age_ms > COMPACTION_LAG_MARGIN * i.delete_retention_ms:
                notes.append(
                    f"{age}, beyond {COMPACTION_LAG_MARGIN} x delete.retention.ms ({i.delete_retention_ms} "
                    f"ms): if offsets ({target}, {newest}] show a gap (a delete after the checkpoint may be "
                    f"gone from changelog {i.changelog}), every key of the store not undone is written to "
                    "it again, so that it holds the whole checkpointed state"
                )
                reseed = True
            elif age_ms > COMPACTION_LAG_MARGIN * i.min_compaction_lag_ms:
                notes.append(f"{age}, but nothing to replay: undoing from the checkpointed state itself")
        elif age_ms > COMPACTION_LAG_MARGIN * i.min_compaction_lag_ms:
            notes.append(
                f"{age}, beyond {COMPACTION_LAG_MARGIN} x min.compaction.lag.ms ({i.min_compaction_lag_ms} "
                f"ms): compaction may have removed checkpointed values of keys written after offset "
                f"{target}, so they are undone only if offsets [{start}, {target}] replay without a gap "
                "(nothing removed); else kept (logged)"
            )
            proven_only = True
            if age_ms > COMPACTION_LAG_MARGIN * i.delete_retention_ms:
                notes.append(_deletes_gone(i, age, target))
                degraded = True
    undo = f", undoing ({target}, {newest}]" if newest > target else ""
    notes.append(f"replaying offsets [{start}, {target}]{undo}")
    return StoreActions(
        delete,
        reuse,
        start,
        target,
        newest,
        tuple(notes),
        degraded,
        undo_proven_only=proven_only,
        reseed_on_gap=reseed,
    )


def seed_actions(i: RestoreInputs, restored: Path) -> StoreActions:
    """The plan of a store another backend restored (into the local checkpoint dir `restored`) from a
    checkpoint without a changelog marker for it: the changelog is incomplete (added since, or not written
    for a while), so every record in it is undone, each key getting the restored value or a tombstone, and
    then the rest of the store is written to it (`ChangelogRestoreManager` does that part)."""
    newest = i.high - 1
    dirs = tuple(d.path for d in i.local_dirs if d.path != restored)
    note = (
        f"the checkpoint has no changelog marker: seeding changelog {i.changelog} with the restored store "
        f"(reusing {restored.name}; undoing offsets [{i.low}, {newest}], then writing every other key)"
    )
    return StoreActions(dirs, restored, i.low, i.low - 1, newest, (note,), seed=True)


def rebuild_actions(i: RestoreInputs) -> StoreActions:
    """The plan of a changelog rebuild an earlier start of the same checkpoint decided (its checkpoint's
    marker says `rebuilding`, and on its host `<store dir>.rebuilding`): rebuilt again from the exact local
    dir, whatever the changelog's offsets say now. The rebuild's own records (cut short before the next
    commit), or an exactly-once start's abort records, may have moved a recreated changelog's end onto or
    past the checkpointed offset, where `store_actions` would take the partly rebuilt changelog for the
    checkpointed state. Without the exact dir (another host) the start is refused, naming the host that
    holds it (`ChangelogRebuildCutShortError`)."""
    if i.checkpointed is None or i.checkpointed.offset is None:
        return store_actions(i)
    full = f"changelog {i.changelog} offsets [{i.low}, {i.high - 1}]"
    return _lost_changelog_actions(i, i.checkpointed.offset, full)


def given_up_actions(i: RestoreInputs) -> StoreActions:
    """The plan of a store whose state was given up (`samsa checkpoint forget-changelog` or `forget-store`)
    while a rebuild of its changelog was unsealed: the changelog holds part of the old state, part of the
    rebuild, so the store starts empty and every record the changelog holds is undone (a tombstone per key),
    so that it reads back empty too. Compaction cannot make that inexact: each key's last record stays."""
    newest = i.high - 1
    dirs = tuple(d.path for d in i.local_dirs)
    note = (
        f"the store's state was given up (samsa checkpoint forget-changelog / forget-store) while a rebuild "
        f"of changelog {i.changelog} was unsealed: the store starts empty, undoing all of offsets "
        f"[{i.low}, {newest}] (the partial rebuild), local checkpoint dirs dropped"
    )
    return StoreActions(dirs, None, i.low, i.low - 1, newest, (note,), degraded=True)


def _lost_changelog_actions(i: RestoreInputs, checkpointed: int, full: str) -> StoreActions:
    """The plan when the checkpointed offset lies outside the changelog (deleted and recreated, truncated,
    or records deleted from its front), or a rebuild of it is unsealed: what it holds is not the checkpointed
    state, and replaying it would silently start the store over. Only a local dir holding exactly the
    checkpointed state can bring the store back, and the changelog is rebuilt from it; without one, the
    start is refused."""
    newest = i.high - 1
    why: list[str] = []
    exact = _exact_local_dir(i, checkpointed, why) if i.persistent else None
    if exact is None:
        if not i.persistent:
            why.append("the store is not persistent: it keeps no local copy")
        elif not why:
            why.append("the store has no local checkpoint dir here")
        mark = i.checkpointed.rebuilding if i.checkpointed is not None else None
        if mark is not None:
            raise ChangelogRebuildCutShortError(
                i.store,
                i.task,
                i.changelog,
                checkpointed,
                i.low,
                newest,
                mark.host,
                mark.local_dir,
                "; ".join(why),
                i.other_backups,
            )
        raise ChangelogLostError(
            i.store, i.task, i.changelog, checkpointed, i.low, newest, "; ".join(why), i.other_backups
        )
    if i.low - 1 <= checkpointed <= newest:
        # Only a rebuild decided for this checkpoint gets here with the offset inside the changelog (its own
        # records, or an exactly-once start's abort records, moved the end past it): said by the checkpoint's
        # marker, the `.rebuilding` file, or this start's `check`, whose mark `init` does not see.
        cause = (
            f"a rebuild of the changelog from the local copy, decided for this checkpoint (by this start or "
            f"an earlier one), is unsealed (no commit yet): {full} hold part of it, not the checkpointed "
            "state"
        )
    else:
        cause = (
            f"checkpointed offset {checkpointed} is outside {full} (the topic was deleted and recreated, or "
            f"records were deleted): the changelog lost the checkpointed state"
        )
    note = (
        f"{cause}. Restoring the store from its "
        f"local copy {exact.name}, which holds exactly that state, and rebuilding the changelog from it "
        f"(undoing offsets [{i.low}, {newest}], then writing every other key)"
    )
    dirs = tuple(d.path for d in i.local_dirs if d.path != exact)
    return StoreActions(dirs, exact, i.low, i.low - 1, newest, (note,), degraded=True, seed=True)


def _deletes_gone(i: RestoreInputs, age: str, checkpointed: int) -> str:
    return (
        f"{age}, beyond {COMPACTION_LAG_MARGIN} x delete.retention.ms ({i.delete_retention_ms} ms): a "
        f"delete after offset {checkpointed} may be gone from changelog {i.changelog} with the checkpointed "
        "value it replaced; such a key cannot be seen, and its checkpointed value is lost (commit more "
        "often than delete.retention.ms)"
    )


def _exact_local_dir(i: RestoreInputs, checkpointed: int, why: list[str]) -> Path | None:
    """The local dir of the checkpoint being restored whose marker is at `checkpointed` of this changelog;
    `why` gets the reason each other dir does not qualify."""
    found = None
    for d in i.local_dirs:
        name = d.path.name
        if i.checkpoint_id is None or d.checkpoint_id != i.checkpoint_id:
            why.append(f"{name} is not the dir of checkpoint {i.checkpoint_id} (or has no readable marker)")
            continue
        try:
            local = None if d.marker is None else ChangelogMarker.decode(d.marker, i.store)
        except ChangelogMarkerError as e:
            why.append(f"{name}: {e}")
            continue
        if local is None or local.changelog != i.changelog or local.offset != checkpointed:
            at = "no changelog marker" if local is None else f"offset {local.offset} of {local.changelog}"
            why.append(f"{name} is at {at}, not at the checkpointed offset")
            continue
        found = d.path
    return found


def _best_local_dir(
    i: RestoreInputs, checkpointed: int | None, notes: list[str]
) -> tuple[Path | None, int | None]:
    """The usable dir with the highest changelog offset in [low - 1, checkpointed]; ties: the newest dir."""
    best: tuple[Path, int] | None = None
    for d in i.local_dirs:
        offset = _usable_offset(i, d, checkpointed, notes)
        if offset is not None and (best is None or offset >= best[1]):
            best = (d.path, offset)
    return (best[0], best[1]) if best else (None, None)


def _usable_offset(i: RestoreInputs, d: LocalDir, checkpointed: int | None, notes: list[str]) -> int | None:
    name = d.path.name
    if d.marker is None:
        notes.append(f"deleting {name}: no readable marker file")
        return None
    try:
        local = ChangelogMarker.decode(d.marker, i.store)
    except ChangelogMarkerError as e:
        notes.append(f"deleting {name}: {e}")
        return None
    if local.changelog != i.changelog:
        notes.append(f"deleting {name}: it belongs to changelog {local.changelog}, not {i.changelog}")
        return None
    if local.offset is None or checkpointed is None:
        notes.append(
            f"deleting {name}: nothing to reuse (empty changelog at its commit or at the checkpoint)"
        )
        return None
    if local.offset > checkpointed:
        notes.append(
            f"deleting {name}: at offset {local.offset}, ahead of the checkpoint ({checkpointed}): "
            "it holds uncommitted writes"
        )
        return None
    if local.offset < i.low - 1:
        notes.append(f"deleting {name}: at offset {local.offset}, before the changelog's oldest ({i.low})")
        return None
    if local.offset < checkpointed and (
        d.written_at_ms is None or i.now_ms - d.written_at_ms >= i.delete_retention_ms
    ):
        # A tail to replay, older than the tombstone retention: deletes in it may no longer be in the
        # changelog. A dir at the checkpoint itself replays nothing, however old: an idle task (whose timer
        # commits are left out) keeps its local state reusable.
        notes.append(
            f"deleting {name}: older than delete.retention.ms={i.delete_retention_ms}, with changelog "
            f"offsets {local.offset + 1} to {checkpointed} to replay"
        )
        return None
    return local.offset
