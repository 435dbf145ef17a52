"""File- and dir-level work on a blob store: upload a diff, download a snapshot, remove TTLs, delete blobs.

Samza's `BlobStoreUtil`. Every method blocks its caller (a backup or restore pool thread) but does no
request I/O itself: each request is a future of the store, so the store's executor sets the parallelism.
A whole tree is submitted before anything is waited on; the chunks of one file go one after the other
(the CRC32C of chunk k continues from chunk k-1's), chained by callbacks. The first failure cancels what
has not started and waits for what has, then is raised: no request is left running unobserved.

A file larger than `chunk_size` is stored as several blobs (chunk k at offset k * chunk_size); the CRC32C
and size recorded are those of the bytes actually streamed, so a file that changes under an upload fails
it rather than recording a checksum its blobs do not have.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import logging
import os
import queue
import stat as st
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Generic, TypeVar, cast

from samsa.stores.blobstore import checksum, writeback
from samsa.stores.blobstore.api import SNAPSHOT_INDEX_PATH, BlobMetadata, BlobStoreManager
from samsa.stores.blobstore.diff import DirDiff
from samsa.stores.blobstore.exceptions import (
    BlobDeletedError,
    BlobStoreError,
    CorruptBlobError,
    IndexFormatError,
    UnsafeIndexError,
)
from samsa.stores.blobstore.index import DirIndex, FileBlob, FileIndex, FileMetadata, SnapshotIndex
from samsa.stores.blobstore.safety import child
from samsa.stores.changelog.exceptions import RestoreInterrupted
from samsa.stores.checkpoint_dirs import fsync_dir
from samsa.stores.exceptions import no_room

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CHUNK_SIZE = 64 << 20
# How soon a restore that waits on downloads notices that `stop` was set.
_STOP_POLL_S = 0.1
# Stores treat deleting a missing blob as success; one that reports it anyway is not a failure.
_GONE = (BlobDeletedError,)


class BlobTransfer:
    """Uploads, downloads and deletes the blobs of snapshots on one blob store."""

    def __init__(self, store: BlobStoreManager, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, not {chunk_size}")
        self._store = store
        self._chunk_size = chunk_size

    # -- upload ------------------------------------------------------------------------------------------

    def put_dir(self, diff: DirDiff, local_root: Path, base: BlobMetadata) -> DirIndex:
        """Uploads every added file of `diff` (local dir `local_root`); returns the new snapshot's DirIndex.

        Present = uploaded + retained files and sub-dirs; removed = the diff's removed ones. Deletes nothing.
        """
        started = time.monotonic()
        files = list(_added_files(diff))
        batch: _Batch[FileIndex] = _Batch()
        futures: list[Future[FileIndex]] = []
        try:
            for path in files:
                job = _Upload(
                    self._store, path, _relative(path, local_root), base, self._chunk_size, batch.abort
                )
                futures.append(batch.add(job.start(), job.cancel))
        except BaseException as e:
            batch.fail(e)
        batch.wait()
        uploaded = iter([f.result() for f in futures])
        index = _assemble(diff, uploaded)
        # Not `base.describe()`: the base of a dir's upload has no payload path yet (an empty field).
        log.debug(
            "uploaded %d files (%d bytes) of store %s of %s in %.2f s",
            len(files),
            sum(f.result().size for f in futures),
            base.store_name,
            base.task_name,
            time.monotonic() - started,
        )
        return index

    def put_file(self, path: Path, rel_path: str, base: BlobMetadata) -> FileIndex:
        """Uploads one regular file (`rel_path`: its path in the snapshot) as one blob per chunk."""
        batch: _Batch[FileIndex] = _Batch()
        job = _Upload(self._store, path, rel_path, base, self._chunk_size, batch.abort)
        future = batch.add(job.start(), job.cancel)
        batch.wait()
        return future.result()

    def put_index(self, index: SnapshotIndex) -> str:
        """Uploads a snapshot index; returns its blob id (what the checkpoint records for the store)."""
        data = index.to_bytes()
        m = index.metadata
        meta = BlobMetadata(SNAPSHOT_INDEX_PATH, len(data), m.job_name, m.job_id, m.task_name, m.store_name)
        return _wait_one(self._store.put(lambda: io.BytesIO(data), meta), meta.describe())

    def get_index(self, blob_id: str, base: BlobMetadata) -> SnapshotIndex:
        """Downloads and parses a snapshot index (`BlobDeletedError` when it is gone)."""
        meta = replace(base, payload_path=SNAPSHOT_INDEX_PATH, payload_size=-1)
        sinks: list[_Buffer] = []

        def open_sink() -> BinaryIO:
            sinks.append(_Buffer())
            return sinks[-1]

        _wait_one(self._store.get(blob_id, open_sink, meta), meta.describe())
        data = sinks[-1].value() if sinks else b""
        return SnapshotIndex.from_bytes(data, where=blob_id)

    # -- download ----------------------------------------------------------------------------------------

    def restore_dir(
        self,
        index: DirIndex,
        target: Path,
        base: BlobMetadata,
        stop: threading.Event | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Downloads the snapshot `index` into `target` (created when missing), verifying every file.

        Every name of the index is checked before anything is written (`UnsafeIndexError`). Files are
        written with their recorded permission bits and fsynced, as are the dirs. `progress(bytes, files)`
        is called on this thread as files complete. Raises `RestoreInterrupted` soon after `stop` is set,
        `CorruptBlobError` when a file does not match its index, `BlobDeletedError` when a blob is gone.
        Entries of `target` the index does not name are left alone; after a failure `target` holds a
        partial restore, for the caller to delete.
        """
        started = time.monotonic()
        dirs, files = _plan_restore(index, target)
        batch: _Batch[FileIndex] = _Batch(stop)
        if batch.stopping():
            raise RestoreInterrupted(base.task_name, base.store_name, None)
        try:
            for d in dirs:
                d.mkdir(parents=d == target, exist_ok=True)
            for file, path, rel_path in files:
                if batch.stopping():
                    break
                _create_empty(path)
                job = _Download(self._store, file, path, rel_path, base, batch.abort)
                batch.add(job.start(), job.cancel)
        except BaseException as e:
            batch.fail(e)

        def done(file: FileIndex) -> None:
            if progress is not None:
                progress(file.size, 1)

        try:
            batch.wait(done)
            for d in [*reversed(dirs), target.parent]:
                fsync_dir(d)
        except _Stopped:
            raise RestoreInterrupted(base.task_name, base.store_name, None) from None
        except Exception as e:
            # A download's write refused for want of room: a plain OSError (S3) or the local store's
            # BlobStoreError. Told as the full disk under the store dir, not as a blob-store failure.
            full = no_room(base.store_name, target, "restore from the blob store", e)
            if full is None or full is e:
                raise
            raise full from e
        log.debug(
            "restored %d files (%d bytes) of %s into %s in %.2f s",
            len(files),
            sum(f.size for f, _, _ in files),
            base.describe(),
            target,
            time.monotonic() - started,
        )

    # -- TTLs and deletes --------------------------------------------------------------------------------

    def remove_ttls(
        self,
        index: SnapshotIndex,
        index_blob_id: str,
        base: BlobMetadata,
        permanent: Collection[str] = frozenset(),
    ) -> None:
        """Makes every blob of the snapshot permanent, and the index blob last, once all of those are.

        Blobs in `permanent` are known to be so already and skipped. An index is never permanent while a
        blob it needs may still expire.
        """
        batch: _Batch[None] = _Batch()
        try:
            for rel_path, blob_id in _present_blobs(index.dir_index, ""):
                if blob_id in permanent:
                    continue
                meta = replace(base, payload_path=rel_path, payload_size=-1)
                batch.add(self._store.remove_ttl(blob_id, meta), where=meta.describe())
        except BaseException as e:
            batch.fail(e)
        batch.wait()
        meta = replace(base, payload_path=SNAPSHOT_INDEX_PATH, payload_size=-1)
        _wait_one(self._store.remove_ttl(index_blob_id, meta), meta.describe())

    def delete_removed(self, index: SnapshotIndex, base: BlobMetadata) -> None:
        """Deletes the blobs the snapshot dropped (its removed files and dirs) and the previous index blob.

        A blob the snapshot still lists as present is never deleted, whatever its removed lists say.
        """
        self._start_deletes(_dropped_blobs(index), base).wait(tolerate=_GONE)

    def make_permanent(
        self,
        index: SnapshotIndex,
        index_blob_id: str,
        base: BlobMetadata,
        permanent: Collection[str] = frozenset(),
    ) -> None:
        """`remove_ttls` and `delete_removed` at once: the deletes touch only blobs the snapshot no longer
        lists, so neither has to wait for the other (a cleanup is a round trip shorter)."""
        deletes = self._start_deletes(_dropped_blobs(index), base)
        try:
            self.remove_ttls(index, index_blob_id, base, permanent)
        except Exception:
            # The TTL failure is the one raised; the deletes are waited for, so none is left running.
            with contextlib.suppress(Exception):
                deletes.wait(tolerate=_GONE)
            raise
        deletes.wait(tolerate=_GONE)

    def delete_snapshot(self, index: SnapshotIndex, index_blob_id: str, base: BlobMetadata) -> None:
        """Deletes every blob of the snapshot (present and removed) and the previous index, then its index.

        For a store no longer backed up: the index goes last, so an interrupted delete can be run again.
        """
        root = index.dir_index
        blobs = [*_present_blobs(root, ""), *_removed_blobs(root, "")]
        if index.prev_index_blob_id is not None:  # left over when its cleanup never ran
            blobs.append((SNAPSHOT_INDEX_PATH, index.prev_index_blob_id))
        self._start_deletes(blobs, base).wait(tolerate=_GONE)
        self._start_deletes([(SNAPSHOT_INDEX_PATH, index_blob_id)], base).wait(tolerate=_GONE)

    def _start_deletes(self, blobs: list[tuple[str, str]], base: BlobMetadata) -> _Batch[None]:
        """The deletes of `blobs` ((path, blob id)), started: wait on the batch tolerating `_GONE`."""
        batch: _Batch[None] = _Batch()
        seen: set[str] = set()
        try:
            for rel_path, blob_id in blobs:
                if blob_id in seen:
                    continue
                seen.add(blob_id)
                meta = replace(base, payload_path=rel_path, payload_size=-1)
                batch.add(self._store.delete(blob_id, meta), where=meta.describe())
        except BaseException as e:
            batch.fail(e)
        return batch


def _dropped_blobs(index: SnapshotIndex) -> list[tuple[str, str]]:
    """(path, blob id) of what the snapshot dropped (removed files and dirs) and of the previous index,
    never a blob the snapshot still lists as present, whatever its removed lists say."""
    present = set(index.dir_index.present_blobs())
    blobs = [(path, b) for path, b in _removed_blobs(index.dir_index, "") if b not in present]
    if index.prev_index_blob_id is not None and index.prev_index_blob_id not in present:
        blobs.append((SNAPSHOT_INDEX_PATH, index.prev_index_blob_id))
    return blobs


# -- waiting on many requests --------------------------------------------------------------------------


class _Aborted(Exception):
    """A file's chain of requests stopped because another request of its batch failed (or a stop)."""


class _Stopped(Exception):
    """The batch was abandoned because the caller's stop event was set."""


class _Batch(Generic[T]):
    """Futures of one operation, waited on together by the calling thread.

    The first failure (or a stop) sets `abort`, cancels what has not started, and waits for the rest.
    """

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.abort = threading.Event()
        self._stop = stop
        self._stopped = False
        self._failure: BaseException | None = None
        self._entries: list[tuple[Future[T], Callable[[], object], str]] = []
        self._finished: queue.SimpleQueue[int] = queue.SimpleQueue()

    def add(
        self, future: Future[T], cancel: Callable[[], object] | None = None, where: str = ""
    ) -> Future[T]:
        i = len(self._entries)
        self._entries.append((future, cancel or future.cancel, where))
        future.add_done_callback(lambda _: self._finished.put(i))
        return future

    def fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
            self._cancel()

    def stopping(self) -> bool:
        """Whether the caller's stop event is set (then the batch is being abandoned)."""
        if not self._stopped and self._stop is not None and self._stop.is_set():
            self._stopped = True
            self._cancel()
        return self._stopped

    def wait(
        self,
        on_done: Callable[[T], None] | None = None,
        tolerate: tuple[type[BaseException], ...] = (),
    ) -> None:
        """Waits for every future; raises the first failure, or `_Stopped`; `on_done` runs per success."""
        for _ in range(len(self._entries)):
            future, _, where = self._entries[self._next()]
            try:
                value = future.result()
            except (CancelledError, _Aborted):
                if not self.abort.is_set():
                    self.fail(BlobStoreError(f"a blob store request for {where or 'a file'} was cancelled"))
                continue
            except tolerate:
                continue
            except BaseException as e:
                self.fail(_with_context(e, where))
                continue
            if on_done is not None and not self.abort.is_set():
                try:
                    on_done(value)
                except BaseException as e:
                    self.fail(e)
        if self._failure is not None:
            raise self._failure
        if self._stopped:
            raise _Stopped()

    def _next(self) -> int:
        while True:
            if self._stop is None or self.abort.is_set():
                return self._finished.get()
            try:
                return self._finished.get(timeout=_STOP_POLL_S)
            except queue.Empty:
                self.stopping()

    def _cancel(self) -> None:
        self.abort.set()
        for _, cancel, _ in self._entries:
            cancel()


def _with_context(error: BaseException, where: str) -> BaseException:
    """A `BlobDeletedError` that also names what the blob was for (the store's names only the blob)."""
    if isinstance(error, BlobDeletedError) and where and where not in str(error):
        named = BlobDeletedError(error.blob_id, where)
        named.__cause__ = error
        return named
    return error


def _wait_one(future: Future[T], where: str) -> T:
    try:
        return future.result()
    except BlobDeletedError as e:
        raise _with_context(e, where) from e


# -- one file's chain of chunk requests ----------------------------------------------------------------


class _Job(Generic[T]):
    """The requests of one file, one chunk after the other; `result` completes after the last."""

    def __init__(self, chunks: int, abort: threading.Event) -> None:
        self.result: Future[T] = Future()
        self._chunks = chunks
        self._abort = abort
        self._lock = threading.Lock()
        self._current: Future[Any] | None = None

    def start(self) -> Future[T]:
        self._run(0)
        return self.result

    def cancel(self) -> None:
        with self._lock:
            current = self._current
        if current is not None:
            current.cancel()

    def _request(self, k: int) -> Future[Any]:
        """Submits chunk k's request."""
        raise NotImplementedError

    def _check(self, k: int, request: Future[Any]) -> None:
        """Raises when chunk k's finished request failed or moved the wrong bytes."""
        raise NotImplementedError

    def _finish(self) -> T:
        raise NotImplementedError

    def _run(self, k: int) -> None:
        # Loops rather than recursing while requests complete at once (a store that answers inline), so a
        # file of thousands of chunks cannot exhaust the stack.
        try:
            while True:
                if self._abort.is_set():
                    raise _Aborted()
                if k == self._chunks:
                    self.result.set_result(self._finish())
                    return
                request = self._request(k)
                with self._lock:
                    self._current = request
                if not request.done():
                    request.add_done_callback(functools.partial(self._resume, k))
                    return
                self._check(k, request)
                k += 1
        except BaseException as e:
            self.result.set_exception(e)

    def _resume(self, k: int, request: Future[Any]) -> None:
        try:
            self._check(k, request)
        except BaseException as e:
            self.result.set_exception(e)
            return
        self._run(k + 1)


class _Upload(_Job[FileIndex]):
    def __init__(
        self,
        store: BlobStoreManager,
        path: Path,
        rel_path: str,
        base: BlobMetadata,
        chunk_size: int,
        abort: threading.Event,
    ) -> None:
        try:
            self._stat = os.lstat(path)
        except OSError as e:
            raise BlobStoreError(f"cannot upload {path}: {e}") from e
        if not st.S_ISREG(self._stat.st_mode):
            raise BlobStoreError(
                f"cannot upload {path}: not a regular file (mode {st.filemode(self._stat.st_mode)}); a store "
                "snapshot holds only regular files and dirs"
            )
        size = self._stat.st_size
        super().__init__(-(-size // chunk_size), abort)
        self._store = store
        self._path = path
        self._rel_path = rel_path
        self._base = base
        self._chunk_size = chunk_size
        self._crc = 0
        self._blobs: list[FileBlob] = []
        self._readers: list[_WindowReader] = []

    def _window(self, k: int) -> tuple[int, int]:
        offset = k * self._chunk_size
        return offset, min(self._chunk_size, self._stat.st_size - offset)

    def _request(self, k: int) -> Future[str]:
        offset, length = self._window(k)
        seed = self._crc

        def open_window() -> BinaryIO:
            # One fresh window per attempt, checksummed from the CRC of the chunks before it.
            reader = _WindowReader(self._path, offset, length, seed)
            self._readers.append(reader)
            return cast(BinaryIO, reader)

        meta = replace(self._base, payload_path=self._rel_path, payload_size=length)
        return self._store.put(open_window, meta)

    def _check(self, k: int, request: Future[Any]) -> None:
        offset, length = self._window(k)
        try:
            blob_id = str(request.result())
        except OSError as e:
            raise BlobStoreError(f"cannot upload {self._path}: {e}") from e
        finally:
            readers, self._readers = self._readers, []
            for reader in readers:
                reader.close()
        streamed = readers[-1].size if readers else 0
        if streamed != length:
            raise self._changed(f"{streamed} bytes were read of the chunk at offset {offset}, not {length}")
        self._crc = readers[-1].crc
        self._blobs.append(FileBlob(blob_id, offset))

    def _finish(self) -> FileIndex:
        try:
            now = os.lstat(self._path)
        except OSError as e:
            raise BlobStoreError(f"cannot upload {self._path}: {e}") from e
        if now.st_size != self._stat.st_size or now.st_mtime_ns != self._stat.st_mtime_ns:
            raise self._changed(f"size {self._stat.st_size} -> {now.st_size}")
        s = self._stat
        return FileIndex(
            name=self._path.name,
            blobs=tuple(self._blobs),
            metadata=FileMetadata(
                creation_time_ms=s.st_ctime_ns // 1_000_000,
                last_modified_ms=s.st_mtime_ns // 1_000_000,
                size=s.st_size,
                permissions=st.S_IMODE(s.st_mode),
            ),
            checksum=self._crc,
        )

    def _changed(self, detail: str) -> BlobStoreError:
        return BlobStoreError(
            f"{self._path} changed while it was uploaded ({detail}): a checkpoint dir must not change after "
            "it is taken - is another process writing into it?"
        )


class _Download(_Job[FileIndex]):
    def __init__(
        self,
        store: BlobStoreManager,
        file: FileIndex,
        path: Path,
        rel_path: str,
        base: BlobMetadata,
        abort: threading.Event,
    ) -> None:
        self._blobs = sorted(file.blobs, key=lambda b: b.offset)
        super().__init__(len(self._blobs), abort)
        self._store = store
        self._file = file
        self._path = path
        self._meta = replace(base, payload_path=rel_path)
        self._crc = 0
        self._writers: list[_ChunkWriter] = []

    def _window(self, k: int) -> tuple[int, int]:
        offset = self._blobs[k].offset
        end = self._blobs[k + 1].offset if k + 1 < len(self._blobs) else self._file.size
        return offset, end - offset

    def _request(self, k: int) -> Future[None]:
        offset, length = self._window(k)
        seed = self._crc

        def open_sink() -> BinaryIO:
            # Each attempt truncates the file at the chunk's offset: a retry never appends to a partial one.
            writer = _ChunkWriter(self._path, offset, seed)
            self._writers.append(writer)
            return cast(BinaryIO, writer)

        return self._store.get(self._blobs[k].blob_id, open_sink, replace(self._meta, payload_size=length))

    def _check(self, k: int, request: Future[Any]) -> None:
        blob = self._blobs[k]
        offset, length = self._window(k)
        try:
            request.result()
        except BlobDeletedError as e:
            raise BlobDeletedError(
                blob.blob_id, f"chunk at offset {offset} of {self._meta.describe()}"
            ) from e
        finally:
            writers, self._writers = self._writers, []
            for writer in writers:
                writer.close()
        written = writers[-1].size if writers else 0
        if written != length:
            raise self._corrupt(
                f"blob {blob.blob_id!r} at offset {offset} holds {written} bytes, not {length}"
            )
        self._crc = writers[-1].crc

    def _finish(self) -> FileIndex:
        if self._crc != self._file.checksum:
            raise self._corrupt(f"CRC32C {self._crc:#010x}, the index records {self._file.checksum:#010x}")
        fd = os.open(self._path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size != self._file.size:
                raise self._corrupt(f"{size} bytes on disk, the index records {self._file.size}")
            # Only rwx bits: set-id bits from an untrusted index are not worth the risk.
            os.fchmod(fd, self._file.metadata.permissions & 0o777)
            os.fsync(fd)
        finally:
            os.close(fd)
        return self._file

    def _corrupt(self, detail: str) -> CorruptBlobError:
        ids = ", ".join(b.blob_id for b in self._blobs)
        return CorruptBlobError(
            f"file {self._meta.describe()} restored into {self._path} from blob(s) [{ids}] does not match "
            f"its snapshot index: {detail}; the blob store's copy is damaged - restore the store from "
            "another backend (its changelog) or an older checkpoint"
        )


# -- streams over one chunk of a file ------------------------------------------------------------------


class _WindowReader(io.RawIOBase):
    """Reads bytes [offset, offset + length) of a file, never past the end, with their CRC32C and count.

    `crc` starts from `seed` (the CRC of the chunks before). Seeking inside the window is allowed (a client
    may re-read a body); only bytes read in order from the window's start count towards `crc` and `size`.
    """

    def __init__(self, path: Path, offset: int, length: int, seed: int) -> None:
        super().__init__()
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        self._file.seek(offset)
        self._offset = offset
        self._length = length
        self._pos = 0
        self.crc = seed
        self.size = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        left = self._length - self._pos
        n = left if size is None or size < 0 else min(size, left)
        if n <= 0:
            return b""
        data = self._file.read(n) or b""
        start, self._pos = self._pos, self._pos + len(data)
        if start <= self.size < self._pos:
            self.crc = checksum.extend(self.crc, memoryview(data)[self.size - start :])
            self.size = self._pos
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET, /) -> int:
        start = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length}[whence]
        if start + offset < 0:
            raise ValueError(f"negative seek position {start + offset}")
        self._pos = start + offset
        self._file.seek(self._offset + self._pos)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class _ChunkWriter(io.RawIOBase):
    """Writes one chunk of a file being restored, from its offset on, with the CRC32C and count written.

    Opening truncates the file at the chunk's offset (dropping what a failed attempt wrote). Writes are
    sequential: the stream is not seekable, so a client cannot write the chunk out of order.
    """

    def __init__(self, path: Path, offset: int, seed: int) -> None:
        super().__init__()
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._file = open(fd, "wb", buffering=0)  # noqa: SIM115 - closed by close()
        self._file.seek(offset)
        self._file.truncate()
        self.crc = seed
        self.size = 0
        self._unsynced_from = offset  # start of the bytes written since the last writeback request

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer, /) -> int:
        view = memoryview(data).cast("B")
        written = 0
        while written < len(view):  # a raw write may take only part of the bytes
            written += self._file.write(view[written:]) or 0
        self.crc = checksum.extend(self.crc, view)
        self.size += len(view)
        end = self._file.tell()
        if end - self._unsynced_from >= writeback.INTERVAL:
            writeback.start_writeback(self._file.fileno(), self._unsynced_from, end - self._unsynced_from)
            self._unsynced_from = end
        return len(view)

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class _Buffer(io.BytesIO):
    """An in-memory sink whose bytes outlive `close()` (a store may close the sinks it writes)."""

    _closed_value = b""

    def close(self) -> None:
        if not self.closed:
            self._closed_value = self.getvalue()
        super().close()

    def value(self) -> bytes:
        return self._closed_value if self.closed else self.getvalue()


# -- walking diffs and indexes -------------------------------------------------------------------------


def _added_files(diff: DirDiff) -> Iterator[Path]:
    """Local files to upload, in the order `_assemble` takes their results."""
    yield from diff.files_added
    for sub in diff.subdirs_added + diff.subdirs_retained:
        yield from _added_files(sub)


def _assemble(diff: DirDiff, uploaded: Iterator[FileIndex]) -> DirIndex:
    files = [next(uploaded) for _ in diff.files_added]
    subdirs = [_assemble(sub, uploaded) for sub in diff.subdirs_added + diff.subdirs_retained]
    return DirIndex(
        name=diff.name,
        files_present=tuple(sorted([*files, *diff.files_retained], key=lambda f: f.name)),
        files_removed=diff.files_removed,
        subdirs_present=tuple(sorted(subdirs, key=lambda d: d.name)),
        subdirs_removed=diff.subdirs_removed,
    )


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        raise BlobStoreError(
            f"cannot upload {path}: it is not inside the dir being uploaded, {root}"
        ) from None


def _present_blobs(d: DirIndex, prefix: str) -> Iterator[tuple[str, str]]:
    """(path in the snapshot, blob id) of every blob of every present file, recursively."""
    for f in d.files_present:
        yield from ((prefix + f.name, b.blob_id) for b in f.blobs)
    for sub in d.subdirs_present:
        yield from _present_blobs(sub, f"{prefix}{sub.name}/")


def _removed_blobs(d: DirIndex, prefix: str) -> Iterator[tuple[str, str]]:
    """(path, blob id) of blobs the snapshot dropped: as `DirIndex.removed_blobs`, with their paths."""
    for f in d.files_removed:
        yield from ((prefix + f.name, b.blob_id) for b in f.blobs)
    for sub in d.subdirs_removed:
        yield from _present_blobs(sub, f"{prefix}{sub.name}/")
        yield from _removed_blobs(sub, f"{prefix}{sub.name}/")
    for sub in d.subdirs_present:
        yield from _removed_blobs(sub, f"{prefix}{sub.name}/")


@dataclass
class _Names:
    """The names of one dir of the index, to refuse two entries of one name."""

    dir: str
    seen: set[str]

    def claim(self, name: str) -> None:
        if name in self.seen:
            raise IndexFormatError(f"dir {self.dir!r} of the snapshot index lists {name!r} twice")
        self.seen.add(name)


def _plan_restore(index: DirIndex, target: Path) -> tuple[list[Path], list[tuple[FileIndex, Path, str]]]:
    """(dirs to create, top down; (file, local path, path in the snapshot)), after checking every name."""
    if target.is_symlink():
        raise UnsafeIndexError(
            f"restore target {target} is a symbolic link; a restore never writes through links"
        )
    if target.exists() and not target.is_dir():
        raise BlobStoreError(f"restore target {target} exists and is not a dir: delete it first")
    dirs: list[Path] = []
    files: list[tuple[FileIndex, Path, str]] = []

    def walk(d: DirIndex, path: Path, prefix: str) -> None:
        dirs.append(path)
        names = _Names(prefix or "/", set())
        for f in d.files_present:
            local = child(path, f.name, "file")
            names.claim(f.name)
            if local.is_dir():
                raise BlobStoreError(
                    f"cannot restore file {local}: a dir of that name exists; delete it first"
                )
            _check_blobs(f, prefix + f.name)
            files.append((f, local, prefix + f.name))
        for sub in d.subdirs_present:
            local = child(path, sub.name, "dir")
            names.claim(sub.name)
            if local.exists() and not local.is_dir():
                raise BlobStoreError(
                    f"cannot restore dir {local}: a file of that name exists; delete it first"
                )
            walk(sub, local, f"{prefix}{sub.name}/")

    walk(index, target, "")
    return dirs, files


def _check_blobs(f: FileIndex, rel_path: str) -> None:
    """The blobs of a file must cover it: first at 0, offsets increasing and inside the file."""
    offsets = sorted(b.offset for b in f.blobs)
    covered = (
        (not offsets and f.size == 0)
        or (offsets == [0] and f.size == 0)
        or (
            bool(offsets)
            and offsets[0] == 0
            and all(a < b for a, b in itertools.pairwise(offsets))
            and offsets[-1] < f.size
        )
    )
    if not covered or f.size < 0:
        raise IndexFormatError(
            f"file {rel_path!r} of the snapshot index has size {f.size} but blobs at offsets {offsets[:5]}: "
            "they do not cover it - the index is corrupt"
        )


def _create_empty(path: Path) -> None:
    """Creates `path` empty and new: an existing file is unlinked first (it may be a hard link into a
    checkpoint dir, which truncating would damage), and a link swapped in meanwhile is refused."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)
