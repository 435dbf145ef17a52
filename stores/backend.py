"""State backend interfaces: how a task's stores are backed up at commit and restored at start.

A backend (the Kafka changelog now, the blob store next) gives each task a backup manager and a restore
manager, and the job an admin. Checkpoint ids and state checkpoint markers cross this boundary as strings:
an id is `<epoch millis>-<nanos mod 10^6>`, a marker is whatever the backend needs to find the state of one
store at one commit (a changelog offset, a snapshot index id). The commit lifecycle (`samsa.checkpoint`)
stores the markers in Checkpoint V2, per backend and store.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

Markers = dict[str, str]
"""Store name -> state checkpoint marker, for the stores one backend manages."""


class TaskBackupManager(Protocol):
    """Backs a task's stores up: `snapshot` inside the blocking commit phase, `upload` and `cleanup` after."""

    def init(self, markers: Markers | None) -> None:
        """Called once at start with the markers of the last checkpoint (None without one)."""

    def snapshot(self, checkpoint_id: str) -> Markers:
        """Blocking phase, right after stores and producers are flushed: must be fast."""
        ...

    def upload(self, checkpoint_id: str, markers: Markers) -> Future[Markers]:
        """Overlaps processing: make the snapshot durable; the result goes into the checkpoint."""
        ...

    def cleanup(self, checkpoint_id: str, markers: Markers) -> Future[None]:
        """After the checkpoint record is durable: drop what older checkpoints needed. Idempotent.

        Only here may a backend treat this commit as the "previous" one it diffs the next snapshot against:
        an upload whose checkpoint record never became durable must not become the base of the next."""
        ...

    def close(self) -> None: ...


class TaskRestoreManager(Protocol):
    """Brings a task's stores back to the state its checkpoint names, before the task processes anything."""

    def init(self, markers: Markers | None, checkpoint_id: str | None = None) -> None:
        """Decides, per store, what to reuse, delete and replay (None: no checkpoint for this backend).

        `checkpoint_id` is the id of the checkpoint the markers come from (its age matters: the changelog
        backend does not undo writes once compaction may have run); None without a checkpoint.
        """

    def restore(self, stop: threading.Event) -> None:
        """Does the work; returns early (raising `RestoreInterrupted`) once `stop` is set."""

    def close(self) -> None: ...


class StateBackendAdmin(Protocol):
    """Job-level resources of a backend (changelog topics, buckets)."""

    def create_resources(self) -> None: ...

    def validate_resources(self) -> None: ...


@dataclass
class RestoreProgress:
    """What a restore has done so far for one store; read by the progress reporter from another thread."""

    task: str
    store: str
    records: int = 0
    bytes: int = 0
    total_records: int | None = None  # None while unknown
    done: bool = False
    #: Files downloaded by a bulk (blob-store) restore, and how many it downloads in all (None: unknown).
    files: int = 0
    total_files: int | None = None


@dataclass
class TaskStoresContext:
    """What a backend needs to know of one task's stores."""

    job_key: str
    task_name: str
    #: The task's changelog partition (GroupByPartition: the task's partition number).
    changelog_partition: int
    #: Store name -> directory of the live store.
    store_dirs: dict[str, Path]
    #: Store name -> its `stores.<s>.*` keys with the prefix removed.
    store_configs: dict[str, Mapping[str, str]]
    #: Store name -> progress of its restore, filled in by restore managers.
    progress: dict[str, RestoreProgress] = field(default_factory=dict)
    #: Opened engines, by store name, once the storage manager has opened them (backup managers need them).
    engines: dict[str, Any] = field(default_factory=dict)
    #: The markers of the checkpoint being restored, by backend then store (every backend's, so that a
    #: restore manager can record them all in the local checkpoint dir it leaves).
    checkpoint_markers: dict[str, Markers] = field(default_factory=dict)
    #: Stores whose changelog tail the changelog backend replays after another backend restored them: that
    #: backend leaves them as a local checkpoint dir, which the changelog restore takes over.
    tail_restored: frozenset[str] = frozenset()
    #: Store -> the blob-store snapshot (index blob id) its files came from at this start. Written by the
    #: restore, read by the backup: a store rebuilt some other way must not trust that snapshot's files.
    restored_from: dict[str, str] = field(default_factory=dict)
    #: Exactly-once: changelog writes are tagged (the headers of the version being checkpointed, set by the
    #: task at each checkpoint) and a restore reads them through `exactly_once.changelog.ChangelogReader`.
    exactly_once: bool = False
    changelog_headers: Sequence[tuple[str, bytes | None]] | None = None
    #: Store name -> the `SnapshotGate` above its engine (durable RocksDB stores the task writes): the
    #: commit holds their writes at its snapshot and checkpoints them off the loop thread.
    gates: dict[str, Any] = field(default_factory=dict)
    #: Stores another backend restored from a checkpoint without a changelog marker for them, whose
    #: changelog (newly added, or not written for a while) the changelog backend makes complete again: it
    #: takes the restored local checkpoint dir over, like a tail, and writes the whole store to the changelog.
    seeded: frozenset[str] = frozenset()
    #: `system.stream` -> partition count of each input grouped into the job's tasks, in the job model the
    #: container runs (a key's task follows from them): a backend that keeps state per task records them
    #: with it and refuses a restore under other counts. None: unknown (no job model), nothing checked.
    input_partitions: Mapping[str, int] | None = None
    #: The checkpoint being restored was written by `samsa checkpoint reset` for a task that had none (its
    #: checkpoint topic lost), keeping the state: a store it has no marker of keeps its local dirs, rather
    #: than starting empty as a store new to the checkpoint does.
    local_state_kept: bool = False


class StateBackendFactory(Protocol):
    """Builds a backend's managers; registered by name (`changelog`, `blobstore`)."""

    name: str

    def backup_manager(self, task: TaskStoresContext) -> TaskBackupManager: ...

    def restore_manager(self, task: TaskStoresContext) -> TaskRestoreManager: ...

    def admin(self, stores: Mapping[str, Mapping[str, str]], task_count: int) -> StateBackendAdmin: ...

    def close(self) -> None:
        """Releases what the factory shares between its managers (clients); after every manager closed."""
