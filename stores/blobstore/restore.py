"""Blob-store restore of a task's RocksDB stores: bring back the checkpointed snapshot, in bulk.

Per store: delete the live dir (it may hold writes newer than the checkpoint); reuse the local checkpoint
dir `<storeDir>-<checkpointId>` when its files match the snapshot index (marker files ignored), otherwise
delete every local checkpoint dir of the store and download the snapshot's files in parallel into a
staging dir, verified, then renamed to be the live dir. A reused dir gets a fresh marker file and the live
dir is rebuilt from it (hard links). When the store's changelog tail is replayed next, the snapshot is left
as a local checkpoint dir with a marker recording the checkpoint's markers instead: the changelog restore
takes it over as a local checkpoint matching its checkpoint. A snapshot taken under other partition counts
of the job's grouped inputs (its keys now belong to other tasks) is refused before the store is touched.
A store the task's checkpoint has no snapshot of (a store new to the job), or a task without a checkpoint,
starts empty: the local dirs are deleted, never taken for checkpointed state; unless that checkpoint was
written by `samsa checkpoint reset` for a task without one (its checkpoint topic lost), which keeps the
state: the local dirs are kept as they are.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from samsa.stores.backend import Markers, RestoreProgress, TaskStoresContext
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.diff import same_dir
from samsa.stores.blobstore.exceptions import (
    SNAPSHOT_UNUSABLE,
    BlobDeletedError,
    BlobStoreError,
    IndexFormatError,
    InputPartitionsChangedError,
    SnapshotIndexMissingError,
    SnapshotUnusableError,
)
from samsa.stores.blobstore.index import SnapshotIndex
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.changelog.exceptions import RestoreInterrupted
from samsa.stores.checkpoint_dirs import (
    checkpoint_dir,
    delete_checkpoint_dir,
    delete_checkpoint_dirs,
    fsync_dir,
    list_checkpoint_dirs,
    restore_store_dir,
    write_marker,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestoreStats:
    """What restoring one store took."""

    task: str
    store: str
    files_downloaded: int
    bytes_downloaded: int
    reused_local: bool
    seconds: float


class BlobStoreRestoreManager:
    """`TaskRestoreManager` of one task's blob-backed stores (Samza's BlobStoreRestoreManager).

    `on_index(blob id, index)` receives each snapshot index `init` read.
    """

    def __init__(
        self,
        context: TaskStoresContext,
        transfer: BlobTransfer,
        job_name: str,
        job_id: str,
        on_restore: Callable[[RestoreStats], None] | None = None,
        on_index: Callable[[str, SnapshotIndex], None] | None = None,
        location: str = "",
        s3: bool = False,
    ) -> None:
        """`location`: where the blob store looks (a dir, `s3://bucket/prefix`), `s3` whether it is S3: errors
        name them."""
        self.context = context
        self._location = location or "its configured location (blobstore.* keys)"
        self._s3 = s3
        self._transfer = transfer
        self._job = (job_name, job_id)
        self._on_restore = on_restore
        self._on_index = on_index
        #: Store -> (index blob id, index) of the checkpointed snapshot.
        self.snapshots: dict[str, tuple[str, SnapshotIndex]] = {}
        #: Store -> whether restore reused the local checkpoint dir (read by tests and logs).
        self.reused: dict[str, bool] = {}

    def _base(self, store: str) -> BlobMetadata:
        return BlobMetadata.of_store(*self._job, self.context.task_name, store)

    def init(self, markers: Markers | None, checkpoint_id: str | None = None) -> None:
        """Reads the snapshot index of every store the checkpoint has one for."""
        task = self.context.task_name
        for store in self.context.store_dirs:
            blob_id = (markers or {}).get(store)
            if blob_id is None:
                if store in self.context.tail_restored:
                    continue  # the changelog restore, next, takes the local dirs over
                if checkpoint_id is not None and self.context.local_state_kept:
                    # `samsa checkpoint reset` of a task without a checkpoint (its checkpoint topic lost):
                    # no snapshot is named, and the reset keeps the state: the local dirs are all there is.
                    _keep_local(self.context.store_dirs[store], task, store, checkpoint_id)
                elif checkpoint_id is not None:
                    # A store new to the checkpoint: what its local dirs hold is no checkpointed state (a
                    # run before the store was removed from the job, or renamed away), and another host
                    # would start it empty: so does this one.
                    _discard_local(self.context.store_dirs[store], task, store, checkpoint_id)
                elif _holds_files(self.context.store_dirs[store]):
                    # No checkpoint: no committed snapshot, and the inputs are read again from
                    # samza.offset.default; kept, this state would count them twice (a first start whose
                    # start-up commit failed, or a deleted checkpoint topic).
                    log.warning(
                        "task %s store %s: the task has no checkpoint, so no committed snapshot: its local "
                        "state %s is deleted, and the store starts empty (if the job's checkpoint topic was "
                        "deleted, restore it, or run `samsa checkpoint reset` to keep the state)",
                        task,
                        store,
                        self.context.store_dirs[store],
                    )
                    shutil.rmtree(self.context.store_dirs[store])
                continue
            try:
                index = self._transfer.get_index(blob_id, self._base(store))
            except BlobDeletedError as e:
                # A store whose changelog tail is replayed restores from the changelog instead (the
                # storage manager's fallback, `SNAPSHOT_UNUSABLE`); one whose changelog is to be seeded has
                # no fallback (its changelog holds only recent writes). Without one, every restart would
                # fail the same way until the blob store location is fixed or the state started over.
                if self._falls_back(store):
                    raise
                raise SnapshotIndexMissingError(
                    blob_id, store, task, checkpoint_id or "?", self._location, self._s3
                ) from e
            except SNAPSHOT_UNUSABLE as e:
                raise self._unusable(e, store, blob_id, checkpoint_id) from e
            try:
                _check_belongs(index, blob_id, task, store, checkpoint_id)
            except IndexFormatError as e:
                raise self._unusable(e, store, blob_id, checkpoint_id) from e
            # Here, before `restore` deletes or writes anything of the store.
            _check_input_partitions(index, self.context.input_partitions)
            self.snapshots[store] = (blob_id, index)
            if self._on_index is not None:
                self._on_index(blob_id, index)
            files, _ = index.dir_index.stats()
            progress = self.context.progress.setdefault(store, RestoreProgress(task, store))
            progress.total_files = files

    def restore(self, stop: threading.Event) -> None:
        for store, (_, index) in self.snapshots.items():
            if stop.is_set():
                raise RestoreInterrupted(self.context.task_name, store, None)
            self._restore_store(store, index, stop)

    def _restore_store(self, store: str, index: SnapshotIndex, stop: threading.Event) -> None:
        started = time.monotonic()
        task = self.context.task_name
        store_dir = self.context.store_dirs[store]
        checkpoint_id = index.metadata.checkpoint_id
        local = checkpoint_dir(store_dir, checkpoint_id)
        progress = self.context.progress[store]
        if store_dir.exists():
            shutil.rmtree(store_dir)  # never start from a live dir that may be ahead of the checkpoint
        reused = local.is_dir() and same_dir(local, index.dir_index)
        tail = store in self.context.tail_restored
        if reused:
            log.info("task %s store %s: reusing local checkpoint dir %s", task, store, local.name)
        else:
            # Old checkpoint dirs share SST files with nothing we download: drop them first, so the disk
            # never holds the store twice.
            for _, path in list_checkpoint_dirs(store_dir):
                delete_checkpoint_dir(path)
            # Downloaded straight into the live dir, unless the changelog restore takes the store over as
            # a local checkpoint dir (the commit right after the restore makes the next one anyway).
            try:
                self._download(store, index, local if tail else store_dir, progress, stop)
            except SNAPSHOT_UNUSABLE as e:
                raise self._unusable(e, store, self.snapshots[store][0], checkpoint_id) from e
        if reused or tail:
            markers = {
                backend: stores[store]
                for backend, stores in self.context.checkpoint_markers.items()
                if store in stores
            }
            write_marker(local, checkpoint_id, markers, store=store)
        if reused and not tail:
            restore_store_dir(local, store_dir)
        for other_id, path in list_checkpoint_dirs(store_dir):
            if other_id != checkpoint_id:
                delete_checkpoint_dir(path)
        progress.done = True
        self.reused[store] = reused
        self.context.restored_from[store] = self.snapshots[store][0]
        seconds = time.monotonic() - started
        log.info(
            "restored store %s of task %s from the blob store: %d file(s), %.1f MB%s in %.1f s",
            store,
            task,
            progress.files,
            progress.bytes / 1e6,
            " (local checkpoint dir reused)" if reused else "",
            seconds,
        )
        if self._on_restore is not None:
            self._on_restore(RestoreStats(task, store, progress.files, progress.bytes, reused, seconds))

    def _download(
        self, store: str, index: SnapshotIndex, target: Path, progress: RestoreProgress, stop: threading.Event
    ) -> None:
        """Downloads the snapshot into `target` (a store or checkpoint dir) through a staging dir."""
        staging = checkpoint_dir(self.context.store_dirs[store], index.metadata.checkpoint_id)
        # `<checkpoint dir>.tmp`: a crash's leftover is removed with the checkpoint dirs at the next commit.
        staging = staging.with_name(staging.name + ".tmp")
        if staging.exists():
            shutil.rmtree(staging)

        def advance(size: int, files: int) -> None:
            progress.bytes += size
            progress.files += files

        try:
            self._transfer.restore_dir(index.dir_index, staging, self._base(store), stop, advance)
            os.rename(staging, target)
            fsync_dir(target.parent)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _falls_back(self, store: str) -> bool:
        """Whether the changelog restores `store` when its snapshot is unusable (its tail is replayed; a
        changelog being seeded holds only recent writes, no fallback)."""
        return store in self.context.tail_restored and store not in self.context.seeded

    def _unusable(
        self, error: BlobStoreError, store: str, blob_id: str, checkpoint_id: str | None
    ) -> BlobStoreError:
        """`error` as is for a store with a fallback (the storage manager's, `SNAPSHOT_UNUSABLE`); without
        one, every restart meets the same snapshot: a `SnapshotUnusableError`, which none restarts."""
        if self._falls_back(store):
            return error
        task = self.context.task_name
        return SnapshotUnusableError(
            blob_id, store, task, checkpoint_id or "?", self._location, self._s3, error
        )

    def close(self) -> None:
        """The transfer's blob store belongs to the backend factory."""


_CHECKPOINT_ID = re.compile(r"\d+-\d+")


def _holds_files(path: Path) -> bool:
    """Whether a store's live directory exists and holds anything."""
    return path.is_dir() and any(path.iterdir())


def _keep_local(store_dir: Path, task: str, store: str, checkpoint_id: str) -> None:
    """Warns that a store's local state is kept as it is, the reset checkpoint naming no snapshot of it."""
    if _holds_files(store_dir):
        log.warning(
            "task %s store %s: checkpoint %s was written by `samsa checkpoint reset` (the task had no "
            "checkpoint) and has no blob-store snapshot of the store: its local state %s is kept as it is, "
            "and the next commit snapshots it",
            task,
            store,
            checkpoint_id,
            store_dir,
        )


def _discard_local(store_dir: Path, task: str, store: str, checkpoint_id: str) -> None:
    """Deletes a store's live dir and local checkpoint dirs, which its checkpoint has no snapshot of."""
    if _holds_files(store_dir) or list_checkpoint_dirs(store_dir):
        log.warning(
            "task %s store %s: checkpoint %s has no blob-store snapshot of it, so its local state %s is no "
            "checkpointed state (left by a run before the store was removed from the job, or renamed): "
            "deleted, the store starts empty",
            task,
            store,
            checkpoint_id,
            store_dir,
        )
    if store_dir.exists():
        shutil.rmtree(store_dir)
    delete_checkpoint_dirs(store_dir)


def _check_belongs(
    index: SnapshotIndex, blob_id: str, task: str, store: str, checkpoint_id: str | None
) -> None:
    """The index must be the snapshot of this task's store at this checkpoint; it names the local dir."""
    meta = index.metadata
    expected = (task, store, checkpoint_id or meta.checkpoint_id)
    if (meta.task_name, meta.store_name, meta.checkpoint_id) != expected or not _CHECKPOINT_ID.fullmatch(
        meta.checkpoint_id
    ):
        raise IndexFormatError(
            f"snapshot index {blob_id} is of task {meta.task_name!r} store {meta.store_name!r} checkpoint "
            f"{meta.checkpoint_id!r}, but the checkpoint of task {task!r} names it for store {store!r} "
            f"checkpoint {checkpoint_id!r}: the checkpoint or the blob store location is wrong"
        )


def _check_input_partitions(index: SnapshotIndex, now: Mapping[str, int] | None) -> None:
    """The snapshot's inputs must have the partition counts they have in the job model now: a key's task
    follows from them, and a snapshot holds the keys of its task only."""
    meta = index.metadata
    if meta.input_partitions is None or now is None:
        return  # an index written before the counts were recorded (or no model to compare): as before
    # A stream on one side only is left alone: an input added to the job or removed from it moves no key of
    # the others.
    changes = {
        stream: (was, now[stream])
        for stream, was in sorted(meta.input_partitions.items())
        if stream in now and now[stream] != was
    }
    if changes:
        raise InputPartitionsChangedError(meta.store_name, meta.task_name, meta.checkpoint_id, changes)
