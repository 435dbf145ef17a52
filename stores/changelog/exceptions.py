"""Errors of the Kafka changelog state backend: bad markers, stalled or interrupted restores."""

from __future__ import annotations

from collections.abc import Sequence

from samsa.exceptions import InvalidConfigError
from samsa.stores.exceptions import StoreError
from samsa.streams import SystemStreamPartition


class ChangelogError(StoreError):
    """Base class of the changelog backend's errors."""


class ChangelogMarkerError(ChangelogError):
    """A changelog state checkpoint marker (from a checkpoint or a local marker file) cannot be read."""

    def __init__(self, marker: str, problem: str, store: str | None = None) -> None:
        self.marker = marker
        self.store = store
        of = f" of store {store!r}" if store else ""
        super().__init__(
            f"unreadable changelog checkpoint marker{of} {marker[:300]!r}: {problem}; expected "
            '{"version": 1 or 2, "changelog": {"system": ..., "stream": ..., "partition": ...}, '
            '"offset": int|null} (version 2 adds "rebuilding": {"host": ..., "localDir": ...} and/or '
            '"givenUp": true). '
            "The checkpoint was written by an incompatible writer: fix it with the checkpoint tool, or "
            "delete the task's checkpoint to restore the whole changelog"
        )


class ChangelogRestoreError(ChangelogError):
    """Replaying a changelog partition failed or stopped making progress."""


class RestoreInterrupted(ChangelogError):
    """A restore was stopped (container shutdown) before it finished; the store is incomplete."""

    def __init__(self, task: str, store: str, offset: int | None) -> None:
        self.task = task
        self.store = store
        self.offset = offset
        at = f" at changelog offset {offset}" if offset is not None else ""
        super().__init__(
            f"restore of store {store!r} of task {task!r} was interrupted{at}; "
            "it restarts from the checkpoint at the next start"
        )


class ChangelogMovedError(ChangelogError, InvalidConfigError):
    """`stores.<s>.changelog` names another topic than the one a task's last checkpoint has the store's
    state in, and that topic still holds records (or cannot be looked at): restoring from the new topic would
    start the store without its state. A restart meets it again: a config-like error, not restarted."""

    def __init__(self, moves: Sequence[tuple[str, str, str, Sequence[str], bool | None]]) -> None:
        """`moves`: (store, the checkpoint's changelog, the configured one, the tasks, whether the
        checkpoint's changelog holds records: None when its system is not defined in the config)."""
        self.moves = [(store, old, new, tuple(tasks), holds) for store, old, new, tasks, holds in moves]
        self.stores = sorted({m[0] for m in self.moves})
        parts = []
        for store, old, new, tasks, holds in self.moves:
            old_system, _, old_topic = old.partition(".")
            new_system, _, new_topic = new.partition(".")
            of = f"task(s) {', '.join(repr(t) for t in tasks)}"
            if holds is None:
                state = (
                    f"its system {old_system!r} is not defined in the config (systems.{old_system}.*), so "
                    "whether the topic still holds the state cannot be checked"
                )
            else:
                state = f"topic {old_topic} still holds records"
            other_cluster = f" (on the cluster of system {old_system!r})" if old_system != new_system else ""
            define = (
                f"; with systems.{old_system}.bootstrap.servers defined again, a start can check whether "
                f"{old} still holds records"
                if holds is None
                else ""
            )
            parts.append(
                f"store {store!r}: the last checkpoint of {of} has its state in changelog {old}, but "
                f"stores.{store}.changelog is now {new}, and {state}. Restoring from {new} would start the "
                f"store without that state, so the start is refused; nothing was restored, written or "
                f"deleted (the store's local directories included). To go on, either set "
                f"stores.{store}.changelog={old} back; or move the state: copy every record of topic "
                f"{old_topic}{other_cluster} into topic {new_topic} (on system {new_system!r}), partition "
                f"for partition and in order, keys, values and headers as they are (any Kafka tool: kcat, "
                f"MirrorMaker, a consumer-producer script), then delete topic {old_topic}{other_cluster}; or "
                f"start the store over (its state is lost): delete topic {old_topic}{other_cluster}{define}. "
                f"A start that finds {old} deleted or empty restores the store from {new}"
            )
        super().__init__(
            "; ".join(parts) + ". See docs/state.md (Changelogs: renaming or moving a changelog)"
        )


class ChangelogLostError(ChangelogError, InvalidConfigError):
    """A store's checkpointed changelog offset lies outside what its changelog holds (the topic was deleted
    and recreated, or records were deleted from it), and no local copy of the checkpointed state is here to
    rebuild it from: restoring what the changelog holds would silently start the store without its state. A
    restart meets it again: a config-like error, not restarted."""

    def __init__(
        self,
        store: str,
        task: str,
        changelog: SystemStreamPartition,
        offset: int,
        low: int,
        newest: int,
        why: str,
        other_backups: Sequence[str] = (),
    ) -> None:
        self._locate(store, task, changelog, offset, low, newest)
        system, topic, partition = changelog.system, changelog.stream, changelog.partition
        super().__init__(
            f"store {store!r} of task {task!r}: its checkpoint has the store's state up to offset {offset} "
            f"of changelog topic {topic} partition {partition} (system {system!r}), but that partition "
            f"holds offsets [{low}, {newest}] (the topic was deleted and recreated, or records were "
            f"deleted): the checkpointed state is gone from the changelog, and no local copy of it is here "
            f"to rebuild it from ({why}). Starting would silently restart the store from what the changelog "
            f"holds, so the start is refused; nothing of the store was restored, written or deleted. Ways "
            f"on: restore the topic's data (or start the job where the store's local checkpoint dir of that "
            f"checkpoint still is: the changelog is then rebuilt from it)"
            f"{_from_backup(store, other_backups)}; or, accepting the "
            f"loss of the state on purpose, stop the job and run `samsa checkpoint forget-changelog <job "
            f"config> --store {store}` (with --task {task!r} for this task alone): the next start restores "
            f"the store from what the changelog holds. See docs/state.md (Changelogs: a lost changelog)"
        )

    def _locate(
        self, store: str, task: str, changelog: SystemStreamPartition, offset: int, low: int, newest: int
    ) -> None:
        """The store, task, changelog partition, checkpointed offset and what the partition holds."""
        self.store = store
        self.task = task
        self.changelog = changelog
        self.offset = offset
        self.low = low
        self.newest = newest


class ChangelogRebuildCutShortError(ChangelogLostError):
    """A store whose lost changelog a start began rebuilding from the local copy on its host (recorded in the
    checkpoint), cut short before a commit sealed the rebuild, is started where that copy is not: what the
    changelog holds is part of the rebuild (its offsets may cover the checkpointed one), not the checkpointed
    state."""

    def __init__(
        self,
        store: str,
        task: str,
        changelog: SystemStreamPartition,
        offset: int,
        low: int,
        newest: int,
        host: str,
        local_dir: str,
        why: str,
        other_backups: Sequence[str] = (),
    ) -> None:
        self._locate(store, task, changelog, offset, low, newest)
        self.host = host
        self.local_dir = local_dir
        system, topic, partition = changelog.system, changelog.stream, changelog.partition
        ChangelogError.__init__(
            self,
            f"store {store!r} of task {task!r}: its changelog topic {topic} partition {partition} (system "
            f"{system!r}) lost the state its checkpoint has up to offset {offset}, and a start on host "
            f"{host!r} began rebuilding the changelog from the local copy of that state there "
            f"({local_dir}), but was cut short before a commit sealed the rebuild: the partition's offsets "
            f"[{low}, {newest}] hold part of the rebuild, not the checkpointed state, and no local copy of "
            f"it is here ({why}). Starting would silently restore part of the state, so the start is "
            f"refused; nothing of the store was restored, written or deleted. Ways on: start the job on "
            f"host {host!r}, where the local copy is (the rebuild is done again from it, and the first "
            f"commit seals it){_from_backup(store, other_backups)}; "
            f"or, accepting the loss of the state on purpose, stop the job and run "
            f"`samsa checkpoint forget-changelog <job config> --store {store}` (with --task {task!r} for "
            f"this task alone): the next start empties the store and undoes the partial rebuild in the "
            f"changelog. See docs/state.md (Changelogs: a lost changelog)",
        )


def _from_backup(store: str, other_backups: Sequence[str]) -> str:
    """The way on of restoring the store from another backend's backup, when the checkpoint has one."""
    if not other_backups:
        return ""
    backup = other_backups[0]
    return (
        f"; or restore it from its {backup} backup: set stores.{store}.restore.factories={backup},changelog "
        "(the changelog is then rebuilt from what that restores)"
    )
