"""The blob-store state backend: its factory, the blob store it talks to, and its admin."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from samsa.stores.backend import (
    StateBackendAdmin,
    StateBackendFactory,
    TaskBackupManager,
    TaskRestoreManager,
    TaskStoresContext,
)
from samsa.stores.blobstore.api import BlobStoreManager
from samsa.stores.blobstore.backup import BlobStoreBackupManager, UploadStats
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.index import SnapshotIndex
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.requests import ABANDON_WAIT_S, job_segment, join_pools
from samsa.stores.blobstore.restore import BlobStoreRestoreManager, RestoreStats
from samsa.stores.blobstore.settings import BlobStoreSettings
from samsa.stores.blobstore.transfer import BlobTransfer

log = logging.getLogger(__name__)

# Uploads and cleanups of a container's tasks, at least this many at once; they wait on the blob store's
# I/O pools (which bound the requests in flight), never run I/O, so a thread per task costs little.
_COMMIT_THREADS = 4
_MAX_COMMIT_THREADS = 64


class PendingS3Client:
    """An S3 client being made on a thread of its own, from the start of a container: importing boto3 and
    parsing botocore's models takes 100-250 ms of CPU, which would otherwise lie on the restore's path; the
    container reads its checkpoints meanwhile (network waits, the GIL free)."""

    def __init__(self, settings: BlobStoreSettings) -> None:
        self._made: Future[Any] = Future()
        self._lock = threading.Lock()
        self._taken = False
        self._discarded = False
        self._closed = False
        self._made.add_done_callback(self._close_unwanted)
        threading.Thread(target=self._make, args=(settings,), name="s3-client", daemon=True).start()

    def _make(self, settings: BlobStoreSettings) -> None:
        try:
            from samsa.stores.blobstore.s3 import make_client  # boto3 loads only for S3 jobs

            client = make_client(settings.s3_endpoint_url, settings.s3_region)
        except BaseException as exc:  # told to whoever takes it, where a client made in place would fail
            self._made.set_exception(exc)
        else:
            self._made.set_result(client)

    def take(self) -> tuple[Any, float]:
        """The client (the taker closes it) and the seconds waited for it; its maker's error if it failed."""
        t0 = time.monotonic()
        client = self._made.result()
        with self._lock:
            if self._discarded:
                raise BlobStoreError("the S3 client made at the container's start was already released")
            self._taken = True
        return client, time.monotonic() - t0

    def discard(self) -> None:
        """Not wanted after all (a start that failed or stopped early): closed once made. Idempotent; a
        taken client is its taker's."""
        with self._lock:
            if self._taken:
                return
            self._discarded = True
        if self._made.done():
            self._close_unwanted(self._made)

    def _close_unwanted(self, made: Future[Any]) -> None:
        with self._lock:
            # Once, whichever comes second of the discard and the client's making.
            if not self._discarded or self._closed or made.exception() is not None:
                return
            self._closed = True
        made.result().close()


def open_blob_store(
    settings: BlobStoreSettings, executor: Executor, s3_client: Any = None
) -> BlobStoreManager:
    """The job's blob store (S3 when a bucket is set, else the local directory), doing I/O on `executor`.

    `s3_client` shares one client between stores (a boto3 client is thread-safe; making one costs ~60 ms);
    its maker closes it.
    """
    store: BlobStoreManager
    if settings.s3_bucket:
        from samsa.stores.blobstore.s3 import S3BlobStore  # boto3 loads only for S3 jobs (80 ms)

        store = S3BlobStore(
            settings.s3_bucket,
            settings.s3_prefix,
            executor,
            settings.ttl_days,
            endpoint_url=settings.s3_endpoint_url,
            region=settings.s3_region,
            max_retry_duration_s=settings.retry_max_duration_ms / 1000,
            client=s3_client,
        )
    else:
        store = LocalDirBlobStore(settings.local_dir, executor, settings.ttl_days * 86_400.0)
    store.init()
    return store


class LocalDirAdmin:
    """The local directory store needs only its directory."""

    def __init__(self, settings: BlobStoreSettings) -> None:
        self._dir = settings.local_dir

    def create_resources(self) -> None:
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BlobStoreError(f"blobstore.local.dir={self._dir}: cannot create it ({e})") from e

    def validate_resources(self) -> None:
        if not self._dir.is_dir():
            raise BlobStoreError(
                f"blobstore.local.dir={self._dir} does not exist; start the job once to create it"
            )


def blob_store_admin(settings: BlobStoreSettings) -> StateBackendAdmin:
    if settings.s3_bucket:
        from samsa.stores.blobstore.s3 import S3BlobStoreAdmin  # boto3 loads only for S3 jobs

        return S3BlobStoreAdmin(
            settings.s3_bucket,
            settings.s3_prefix,
            settings.ttl_days,
            endpoint_url=settings.s3_endpoint_url,
            region=settings.s3_region,
            job=job_segment(settings.job_name, settings.job_id),
            max_retry_duration_s=settings.retry_max_duration_ms / 1000,
        )
    return LocalDirAdmin(settings)


class BlobStoreBackendFactory:
    """`StateBackendFactory` named `blobstore`: RocksDB stores backed up as incremental snapshots.

    `stores` are the stores this backend backs up. Uploads and downloads have their own I/O pools
    (`blobstore.upload.parallelism`, `blobstore.download.parallelism`) shared by every task of the
    container, so the parallelism is per container whatever the task count; `tasks` (the container's
    count) sizes the pool on which the tasks' uploads and cleanups wait, so that none waits for another's.
    `backup_store` and `restore_store` replace the configured store (tests wrap it to record every request).
    """

    name = "blobstore"

    def __init__(
        self,
        settings: BlobStoreSettings,
        stores: Collection[str],
        *,
        backup_store: BlobStoreManager | None = None,
        restore_store: BlobStoreManager | None = None,
        on_upload: Callable[[UploadStats], None] | None = None,
        on_restore: Callable[[RestoreStats], None] | None = None,
        tasks: int = 1,
        s3_client: PendingS3Client | None = None,
    ) -> None:
        """`s3_client`: the client being made since the container's start (else made here, when needed)."""
        self.settings = settings
        self.stores = frozenset(stores)
        self._on_upload = on_upload
        self._on_restore = on_restore
        self._upload_pool = ThreadPoolExecutor(settings.upload_parallelism, "blob-upload")
        self._download_pool = ThreadPoolExecutor(settings.download_parallelism, "blob-download")
        commit_threads = min(_MAX_COMMIT_THREADS, max(_COMMIT_THREADS, tasks))
        self._commit_pool = ThreadPoolExecutor(commit_threads, "blob-commit")
        self._s3_client = None
        #: Seconds this start waited for the S3 client made since the container's start.
        self.client_wait_s = 0.0
        if settings.s3_bucket and (backup_store is None or restore_store is None):
            if s3_client is not None:
                self._s3_client, self.client_wait_s = s3_client.take()
            else:
                from samsa.stores.blobstore.s3 import make_client  # boto3 loads only for S3 jobs

                self._s3_client = make_client(settings.s3_endpoint_url, settings.s3_region)
        elif s3_client is not None:
            s3_client.discard()
        #: Snapshot indexes the restore managers read, until the task's backup manager takes them.
        self._read_indexes: dict[str, SnapshotIndex] = {}
        self._backup_store = backup_store or open_blob_store(settings, self._upload_pool, self._s3_client)
        self._restore_store = restore_store or open_blob_store(settings, self._download_pool, self._s3_client)
        log.info("blob store: %s", settings.location)

    def backup_manager(self, task: TaskStoresContext) -> BlobStoreBackupManager:
        return BlobStoreBackupManager(
            task,
            sorted(s for s in self.stores if s in task.store_dirs),
            BlobTransfer(self._backup_store, self.settings.chunk_size),
            self._commit_pool,
            self.settings.job_name,
            self.settings.job_id,
            self._on_upload,
            read_index=self._take_index,
        )

    def restore_manager(self, task: TaskStoresContext) -> BlobStoreRestoreManager:
        return BlobStoreRestoreManager(
            task,
            BlobTransfer(self._restore_store, self.settings.chunk_size),
            self.settings.job_name,
            self.settings.job_id,
            self._on_restore,
            on_index=self._read_indexes.__setitem__,
            location=self.settings.location,
            s3=bool(self.settings.s3_bucket),
        )

    def _take_index(self, blob_id: str) -> SnapshotIndex | None:
        return self._read_indexes.pop(blob_id, None)

    def admin(self, stores: Mapping[str, Mapping[str, str]], task_count: int) -> StateBackendAdmin:
        return blob_store_admin(self.settings)

    def close(self, abandon: bool = False) -> None:
        """Waits for the uploads and downloads in flight, then releases the stores and the S3 client.
        `abandon` (after a failure): queued requests are dropped and running ones stop retrying; their
        threads are waited for only until they notice (`ABANDON_WAIT_S` at most, never a retry's duration).
        What they still write keeps its TTL and expires uncommitted."""
        self._read_indexes.clear()  # left by a start that failed before its backup managers took them
        if abandon:
            for store in (self._backup_store, self._restore_store):
                store.abandon()
            pools = (self._commit_pool, self._upload_pool, self._download_pool)
            for pool in pools:
                pool.shutdown(wait=False, cancel_futures=True)
            if not join_pools(pools, ABANDON_WAIT_S):
                # A request stalled on a dead connection: it ends at the client's timeout, and is not retried.
                log.warning(
                    "abandoned blob store requests are still running after %.0f s; they end on their own "
                    "(the S3 client is closed under them)",
                    ABANDON_WAIT_S,
                )
        else:
            self._commit_pool.shutdown(wait=True)
            for store in (self._backup_store, self._restore_store):
                store.close()
            self._upload_pool.shutdown(wait=True)
            self._download_pool.shutdown(wait=True)
        if self._s3_client is not None:
            self._s3_client.close()


if TYPE_CHECKING:  # the factory and its managers satisfy the backend interfaces (checked by mypy only)

    def _is_backend(factory: BlobStoreBackendFactory, context: TaskStoresContext) -> StateBackendFactory:
        backup: TaskBackupManager = factory.backup_manager(context)
        restore: TaskRestoreManager = factory.restore_manager(context)
        admin: StateBackendAdmin = factory.admin({}, 1)
        del backup, restore, admin
        return factory
