"""Errors of the Kafka changelog state backend: bad markers, stalled or interrupted restores."""

from __future__ import annotations

from samsa.stores.exceptions import StoreError


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
            '{"version": 1, "changelog": {"system": ..., "stream": ..., "partition": ...}, '
            '"offset": int|null}. '
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
