"""Blob-store backup of a task's RocksDB stores: each commit's checkpoint dir as an incremental snapshot.

At each commit the blocking phase has already written `<storeDir>-<checkpointId>` (hard links). `upload`
diffs it against the last *committed* snapshot index, uploads the added files and then a new index, whose
blob id is the store's marker. `cleanup` runs once the checkpoint record naming those markers is durable:
it makes every blob of the new snapshot permanent (index last) while deleting the blobs the snapshot
dropped and the previous index, and only then takes the new snapshot as the base of the next diff. Blobs
of a commit whose checkpoint never became durable keep their TTL and expire. `init` re-runs the cleanup of
the checkpointed snapshots, and waits for it: a crash between checkpoint and cleanup would otherwise
leave retained blobs expiring under a live snapshot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from samsa.stores.backend import Markers, TaskStoresContext
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.diff import DiffStats, dir_diff
from samsa.stores.blobstore.exceptions import SNAPSHOT_UNUSABLE, BlobDeletedError
from samsa.stores.blobstore.index import ROOT_DIR_NAME, DirIndex, SnapshotIndex, SnapshotMetadata
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import checkpoint_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadStats:
    """What one commit uploaded for one store."""

    task: str
    store: str
    files_uploaded: int
    bytes_uploaded: int
    files_retained: int
    bytes_retained: int
    seconds: float


@dataclass(frozen=True)
class _Snapshot:
    blob_id: str
    index: SnapshotIndex


class BlobStoreBackupManager:
    """`TaskBackupManager` of one task's blob-backed stores (Samza's BlobStoreBackupManager, minus its bugs).

    `executor` runs the uploads and cleanups (they wait on the blob store's own I/O pool, so it must not
    be that pool). `on_upload` receives each store's upload figures, for metrics. `read_index(blob id)`
    gives an index the task's restore already read (None: not read), so `init` does not read it again.
    """

    def __init__(
        self,
        context: TaskStoresContext,
        stores: Sequence[str],
        transfer: BlobTransfer,
        executor: Executor,
        job_name: str,
        job_id: str,
        on_upload: Callable[[UploadStats], None] | None = None,
        clock: Callable[[], float] = time.time,
        read_index: Callable[[str], SnapshotIndex | None] | None = None,
    ) -> None:
        self.context = context
        self.stores = list(stores)
        self._transfer = transfer
        self._executor = executor
        self._job = (job_name, job_id)
        self._on_upload = on_upload
        self._clock = clock
        self._read_index = read_index
        self._lock = threading.Lock()
        #: Store -> the last snapshot whose checkpoint is durable: the base of the next diff.
        self._committed: dict[str, _Snapshot] = {}
        #: Checkpoint id -> store -> snapshot uploaded for it, awaiting its checkpoint and cleanup.
        self._pending: dict[str, dict[str, _Snapshot]] = {}
        #: (store, index blob id) of snapshots to delete after the next durable checkpoint: those of stores
        #: no longer backed up to the blob store, and broken ones.
        self._orphans: list[tuple[str, str]] = []
        #: Stores whose next diff checks the contents of large files too, not just names and sizes.
        self._verify: set[str] = set()

    def base(self, store: str) -> BlobMetadata:
        return BlobMetadata.of_store(*self._job, self.context.task_name, store)

    # -- start ---------------------------------------------------------------------------------------
    def init(self, markers: Markers | None) -> None:
        """Reads the checkpointed snapshot indexes and finishes their cleanup (waiting for it)."""
        for store, blob_id in (markers or {}).items():
            if store not in self.context.store_dirs:
                # A store the job no longer defines (the start warned, `renamed.check_store_renames`): its
                # last snapshot is kept, for `samsa blobstore gc` to delete, not given up by a deploy; made
                # permanent still, as a crash before its commit's cleanup left it, or its blobs would expire.
                self._keep_removed(store, blob_id)
                continue
            if store not in self.stores:
                # Deleted only once a checkpoint without it is durable: until then a restart may need it.
                self._orphans.append((store, blob_id))
                continue
            try:
                # An index blob never changes: the one the restore read moments ago is this one.
                index = self._read_index(blob_id) if self._read_index is not None else None
                if index is None:
                    index = self._transfer.get_index(blob_id, self.base(store))
                snapshot = _Snapshot(blob_id, index)
                self._make_permanent(store, snapshot)
            except SNAPSHOT_UNUSABLE as e:
                # The restore fell back to the changelog: the next commit uploads the whole store, and
                # what is left of this snapshot goes once that commit is durable.
                log.warning(
                    "task %s store %s: the checkpoint's blob-store snapshot %s is incomplete (%s); the next "
                    "commit uploads the whole store",
                    self.context.task_name,
                    store,
                    blob_id,
                    e,
                )
                self._orphans.append((store, blob_id))
                continue
            self._committed[store] = snapshot
            if self.context.restored_from.get(store) != blob_id:
                # The store was rebuilt another way (changelog, fallback): its new files may reuse the
                # names and sizes of the snapshot's, so the first diff compares large files' checksums too.
                self._verify.add(store)
        if self._orphans:
            log.info(
                "task %s: blob-store snapshot(s) of store(s) %s are no longer used (the store is no longer "
                "backed up to the blob store, or the snapshot is broken); deleted after the next commit",
                self.context.task_name,
                ", ".join(sorted(store for store, _ in self._orphans)),
            )

    def _keep_removed(self, store: str, blob_id: str) -> None:
        """Makes the last snapshot of a store the job no longer defines permanent; never its diff base."""
        try:
            index = self._transfer.get_index(blob_id, self.base(store))
            self._make_permanent(store, _Snapshot(blob_id, index))
        except SNAPSHOT_UNUSABLE as e:
            # Nothing restores it (the store is gone): a start does not fail over it.
            log.warning(
                "task %s: the blob-store snapshot %s of store %s, which the job no longer defines, is "
                "incomplete (%s); left as it is, for `samsa blobstore gc`",
                self.context.task_name,
                blob_id,
                store,
                e,
            )

    # -- commit --------------------------------------------------------------------------------------
    def snapshot(self, checkpoint_id: str) -> Markers:
        """Nothing beyond the RocksDB checkpoint the commit already took."""
        return {}

    def upload(self, checkpoint_id: str, markers: Markers) -> Future[Markers]:
        return self._executor.submit(self._upload, checkpoint_id)

    def _upload(self, checkpoint_id: str) -> Markers:
        out: Markers = {}
        uploaded: dict[str, _Snapshot] = {}
        for store in self.stores:
            started = time.monotonic()
            local = checkpoint_dir(self.context.store_dirs[store], checkpoint_id)
            with self._lock:
                previous = self._committed.get(store)
            diff = dir_diff(
                local,
                previous.index.dir_index if previous else DirIndex(ROOT_DIR_NAME),
                verify_large=store in self._verify,
            )
            base = self.base(store)
            dir_index = self._transfer.put_dir(diff, local, base)
            counts = self.context.input_partitions
            meta = SnapshotMetadata(
                checkpoint_id,
                *self._job,
                self.context.task_name,
                store,
                dict(counts) if counts is not None else None,
            )
            index = SnapshotIndex(
                int(self._clock() * 1000), meta, dir_index, previous.blob_id if previous else None
            )
            blob_id = self._transfer.put_index(index)
            uploaded[store] = _Snapshot(blob_id, index)
            out[store] = blob_id
            self._report(store, diff.stats(), time.monotonic() - started)
        with self._lock:
            self._pending[checkpoint_id] = uploaded
        return out

    def _report(self, store: str, stats: DiffStats, seconds: float) -> None:
        files_up, bytes_up = stats.files_to_upload, stats.bytes_to_upload
        files_kept, bytes_kept = stats.files_retained, stats.bytes_retained
        log.debug(
            "task %s store %s: uploaded %d file(s), %d bytes; %d file(s), %d bytes retained (%.2f s)",
            self.context.task_name,
            store,
            files_up,
            bytes_up,
            files_kept,
            bytes_kept,
            seconds,
        )
        if self._on_upload is not None:
            task = self.context.task_name
            self._on_upload(UploadStats(task, store, files_up, bytes_up, files_kept, bytes_kept, seconds))

    def cleanup(self, checkpoint_id: str, markers: Markers) -> Future[None]:
        return self._executor.submit(self._cleanup, checkpoint_id, dict(markers))

    def _cleanup(self, checkpoint_id: str, markers: Markers) -> None:
        with self._lock:
            uploaded = self._pending.pop(checkpoint_id, {})
            # Uploads of older commits never reached their checkpoint: their blobs expire.
            for older in [c for c in self._pending if _id_key(c) < _id_key(checkpoint_id)]:
                del self._pending[older]
        for store, blob_id in markers.items():
            known = uploaded.get(store)
            if known is None or known.blob_id != blob_id:
                known = _Snapshot(blob_id, self._transfer.get_index(blob_id, self.base(store)))
            with self._lock:
                committed = self._committed.get(store)
            # A committed snapshot's blobs were all made permanent before it became the base: a commit
            # asks only about the blobs it added, not about every file of the store again.
            permanent = set(committed.index.dir_index.present_blobs()) if committed else set()
            self._make_permanent(store, known, permanent)
            with self._lock:
                self._committed[store] = known
                self._verify.discard(store)
        self._delete_orphans()

    def _make_permanent(self, store: str, snapshot: _Snapshot, permanent: Collection[str] = ()) -> None:
        self._transfer.make_permanent(snapshot.index, snapshot.blob_id, self.base(store), permanent)

    def _delete_orphans(self) -> None:
        with self._lock:
            orphans, self._orphans = self._orphans, []
        for store, blob_id in orphans:
            base = self.base(store)
            try:
                index = self._transfer.get_index(blob_id, base)
            except BlobDeletedError:
                continue  # deleted by an earlier run
            except SNAPSHOT_UNUSABLE as e:
                log.warning(
                    "task %s: cannot delete snapshot %s of store %s: %s",
                    self.context.task_name,
                    blob_id,
                    store,
                    e,
                )
                continue
            log.info(
                "task %s: deleting blob-store snapshot %s of store %s", self.context.task_name, blob_id, store
            )
            self._transfer.delete_snapshot(index, blob_id, base)

    def close(self) -> None:
        """The transfer's blob store and the executor belong to the backend factory."""


def _id_key(checkpoint_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in checkpoint_id.split("-"))
