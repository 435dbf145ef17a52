"""What `samsa state` and `samsa blobstore` do: list, show, download and verify snapshots; collect garbage.

The functions take the blob store and the checkpoints already read, so they run without a broker or an
argument parser; `samsa.cli` reads the job, its checkpoints and its blob store, and prints what they return.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, cast

from samsa.checkpoint.model import AnyCheckpoint, CheckpointV2
from samsa.stores.backends import BLOBSTORE, CHANGELOG
from samsa.stores.blobstore import checksum
from samsa.stores.blobstore.api import SNAPSHOT_INDEX_PATH, BlobMetadata, BlobStoreManager
from samsa.stores.blobstore.exceptions import (
    BlobDeletedError,
    BlobStoreError,
    IndexFormatError,
    UnsafeIndexError,
)
from samsa.stores.blobstore.factory import open_blob_store
from samsa.stores.blobstore.index import DirIndex, FileIndex, SnapshotIndex
from samsa.stores.blobstore.local import GcResult, LocalDirBlobStore
from samsa.stores.blobstore.requests import ID_END, BlobInfo, check_blob_id, job_segment
from samsa.stores.blobstore.settings import BlobStoreSettings
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.changelog.exceptions import ChangelogMarkerError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)

Reread = Callable[[], Mapping[str, AnyCheckpoint]]
"""Reads every task's last checkpoint again. A running job's next commit deletes the snapshot the previous
checkpoint names, so a tool that finds a snapshot gone asks whether the checkpoint has moved on."""

# How many times a tool follows a running job's checkpoint to its newer snapshot before it reports the gone
# one: each commit (task.commit.ms) replaces the last, so a tool slower than that would chase for ever.
MAX_SNAPSHOT_RETRIES = 5
_CHASED = (
    f"the job's checkpoint moved on {MAX_SNAPSHOT_RETRIES} times while this ran, each commit deleting the "
    "snapshot before; run it again, or with the job stopped"
)


@contextmanager
def opened_store(settings: BlobStoreSettings) -> Iterator[BlobStoreManager]:
    """The job's blob store with its own I/O pool (`blobstore.download.parallelism` threads), closed after."""
    pool = ThreadPoolExecutor(settings.download_parallelism, "blob-tool")
    try:
        store = open_blob_store(settings, pool)
        try:
            yield store
        finally:
            store.close()
    finally:
        pool.shutdown(wait=True)


# -- what the checkpoints name -------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotRef:
    """The blob-store snapshot one task's last checkpoint names for one store."""

    task: str
    store: str
    checkpoint_id: str
    index_blob_id: str

    def base(self, job_name: str, job_id: str) -> BlobMetadata:
        return BlobMetadata(SNAPSHOT_INDEX_PATH, -1, job_name, job_id, self.task, self.store)


def blob_snapshots(tasks: Sequence[str], checkpoints: Mapping[str, AnyCheckpoint]) -> list[SnapshotRef]:
    """Every (task, store) snapshot the checkpoints of `tasks` name, in task order then store name."""
    refs = []
    for task in tasks:
        checkpoint = checkpoints.get(task)
        if isinstance(checkpoint, CheckpointV2):
            for store, blob_id in sorted(checkpoint.state_markers.get(BLOBSTORE, {}).items()):
                refs.append(SnapshotRef(task, store, str(checkpoint.checkpoint_id), blob_id))
    return refs


def find_snapshot(
    tasks: Sequence[str], checkpoints: Mapping[str, AnyCheckpoint], task: str, store: str
) -> SnapshotRef:
    """The snapshot of `store` in `task`'s last checkpoint; else a `BlobStoreError` naming the known ones."""
    if task not in tasks:
        raise BlobStoreError(f"--task {task!r}: no such task (tasks: {', '.join(tasks) or 'none'})")
    checkpoint = checkpoints.get(task)
    if checkpoint is None:
        raise BlobStoreError(f"task {task!r} has no checkpoint yet: there is no snapshot to download")
    refs = {r.store: r for r in blob_snapshots([task], checkpoints)}
    if store not in refs:
        known = ", ".join(sorted(refs)) or "none"
        raise BlobStoreError(
            f"--store {store!r}: the last checkpoint of task {task!r} has no blob-store snapshot of it "
            f"(stores with one: {known}); `samsa state ls` lists them"
        )
    return refs[store]


def moved_on(ref: SnapshotRef, reread: Reread | None) -> SnapshotRef | None:
    """The snapshot of `ref`'s task and store the last checkpoint names now, when that is another one."""
    if reread is None:
        return None
    checkpoint = reread().get(ref.task)
    if not isinstance(checkpoint, CheckpointV2):
        return None
    blob_id = checkpoint.state_markers.get(BLOBSTORE, {}).get(ref.store)
    if blob_id is None or blob_id == ref.index_blob_id:
        return None
    log.info(
        "task %s store %s: snapshot %s is gone and the checkpoint moved on to %s (a commit of the running "
        "job): reading that one",
        ref.task,
        ref.store,
        ref.index_blob_id,
        blob_id,
    )
    return SnapshotRef(ref.task, ref.store, str(checkpoint.checkpoint_id), blob_id)


def read_index_bytes(store: BlobStoreManager, blob_id: str, base: BlobMetadata) -> bytes:
    """The raw bytes of a snapshot index blob (`BlobDeletedError` when it is gone)."""
    sink = _Capture()
    store.get(blob_id, sink.open, replace(base, payload_path=SNAPSHOT_INDEX_PATH)).result()
    return sink.value


def read_index(store: BlobStoreManager, blob_id: str, base: BlobMetadata) -> SnapshotIndex:
    return SnapshotIndex.from_bytes(read_index_bytes(store, blob_id, base), where=blob_id)


# -- samsa state ls --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateRow:
    """One store of one task's last checkpoint (or a task without one: `store` is None)."""

    task: str
    store: str | None = None
    checkpoint_id: str | None = None
    #: `blobstore` or `changelog`: the backend whose marker `marker` is.
    backend: str | None = None
    marker: str | None = None
    files: int | None = None
    bytes: int | None = None
    created_ms: int | None = None
    #: Why there is no snapshot detail (no checkpoint, an unreadable index...).
    note: str = ""
    #: The whole error of an unreadable index: too long for the table, printed below it.
    error: str = ""

    @property
    def problem(self) -> bool:
        """The snapshot index the checkpoint names is missing or unreadable."""
        return self.note.startswith((_MISSING_INDEX, _UNREADABLE_INDEX))


def list_state(
    tasks: Sequence[str],
    checkpoints: Mapping[str, AnyCheckpoint],
    store: BlobStoreManager | None,
    job_name: str,
    job_id: str,
    changelogs: Mapping[str, SystemStream] | None = None,
    reread: Reread | None = None,
) -> list[StateRow]:
    """A row per store with a state marker in each task's last checkpoint, in the order of `tasks`.

    A store with a blob-store marker shows its snapshot index (read from `store`); one with a changelog
    marker only shows that. `changelogs` (store -> changelog stream) names the stores of V1 checkpoints.
    A task whose snapshot index is gone while `reread` shows its checkpoint moved on (a running job's
    commit deleted it) is listed from the newer checkpoint.
    """
    rows: list[StateRow] = []
    for task in tasks:
        checkpoint = checkpoints.get(task)
        if checkpoint is None:
            rows.append(StateRow(task, note="no checkpoint yet"))
            continue
        for attempt in range(MAX_SNAPSHOT_RETRIES + 1):
            found = _task_rows(task, checkpoint, store, job_name, job_id, changelogs or {})
            if reread is None or not any(r.note.startswith(_MISSING_INDEX) for r in found):
                break
            newer = reread().get(task)
            if newer is None or newer == checkpoint:
                break  # the checkpoint still names the gone index
            if attempt == MAX_SNAPSHOT_RETRIES:
                found = [replace(r, note=f"{r.note} ({_CHASED})") if r.note else r for r in found]
                break
            checkpoint = newer
        rows += found or [StateRow(task, note="checkpoint without state markers (no durable store)")]
    return rows


def _task_rows(
    task: str,
    checkpoint: AnyCheckpoint,
    store: BlobStoreManager | None,
    job_name: str,
    job_id: str,
    changelogs: Mapping[str, SystemStream],
) -> list[StateRow]:
    if isinstance(checkpoint, CheckpointV2):
        return _v2_rows(task, checkpoint, store, job_name, job_id)
    return _v1_rows(task, checkpoint.changelog_offsets, changelogs)


def _v2_rows(
    task: str, checkpoint: CheckpointV2, store: BlobStoreManager | None, job_name: str, job_id: str
) -> list[StateRow]:
    checkpoint_id = str(checkpoint.checkpoint_id)
    blobs = checkpoint.state_markers.get(BLOBSTORE, {})
    logs = checkpoint.state_markers.get(CHANGELOG, {})
    rows = []
    for name in sorted(set(blobs) | set(logs)):
        if name in blobs:
            ref = SnapshotRef(task, name, checkpoint_id, blobs[name])
            rows.append(_snapshot_row(ref, store, job_name, job_id))
        else:
            rows.append(StateRow(task, name, checkpoint_id, CHANGELOG, _changelog_text(logs[name], name)))
    return rows


def _snapshot_row(ref: SnapshotRef, store: BlobStoreManager | None, job_name: str, job_id: str) -> StateRow:
    row = StateRow(ref.task, ref.store, ref.checkpoint_id, BLOBSTORE, ref.index_blob_id)
    if store is None:
        return replace(row, note="blob store not opened")
    try:
        index = read_index(store, ref.index_blob_id, ref.base(job_name, job_id))
    except BlobDeletedError:
        return replace(row, note=_MISSING_INDEX)
    except BlobStoreError as e:
        return replace(row, note=f"{_UNREADABLE_INDEX} (error below the table)", error=str(e))
    files, size = index.dir_index.stats()
    return replace(row, files=files, bytes=size, created_ms=index.creation_time_ms)


_MISSING_INDEX = "MISSING: the snapshot index is not in the blob store"
_UNREADABLE_INDEX = "UNREADABLE"


def state_problems(rows: Sequence[StateRow]) -> list[str]:
    """A line per row whose snapshot index cannot be read, with its whole error (the table only marks it)."""
    return [
        f"task {r.task} store {r.store}: snapshot index {r.marker} is unreadable: {r.error}"
        for r in rows
        if r.error
    ]


def _changelog_text(marker: str, store: str) -> str:
    try:
        decoded = ChangelogMarker.decode(marker, store)
    except ChangelogMarkerError:
        return marker
    text = _changelog_position(decoded.changelog, decoded.offset)
    # An operator deciding where a store can restore needs these more than the offset: only one host's
    # copy holds a cut-short rebuild's state, and a given-up state restarts empty.
    if decoded.rebuilding is not None:
        mark = decoded.rebuilding
        text += f", REBUILDING: only the local copy {mark.local_dir} on host {mark.host} holds its state"
    if decoded.given_up:
        text += ", GIVEN UP: the next start empties the store"
    return text


def _changelog_position(ssp: SystemStreamPartition, offset: int | None) -> str:
    at = "empty" if offset is None else f"offset {offset}"
    return f"changelog {ssp.system}.{ssp.stream}#{ssp.partition} {at}"


def _v1_rows(
    task: str,
    positions: Mapping[SystemStreamPartition, tuple[str, int | None]],
    changelogs: Mapping[str, SystemStream],
) -> list[StateRow]:
    by_stream = {(s.system, s.stream): name for name, s in changelogs.items()}
    rows = []
    for ssp, (checkpoint_id, offset) in positions.items():
        name = by_stream.get((ssp.system, ssp.stream), f"? ({ssp.system}.{ssp.stream})")
        text = _changelog_position(ssp, offset)
        rows.append(StateRow(task, name, checkpoint_id, CHANGELOG, text))
    return sorted(rows, key=lambda r: r.store or "")


def render_state(rows: Sequence[StateRow]) -> list[str]:
    """`rows` as an aligned table, one line per row after a header."""
    table = [("TASK", "STORE", "CHECKPOINT", "BACKEND", "MARKER", "FILES", "BYTES", "CREATED")]
    for r in rows:
        if r.store is None:
            table.append((r.task, "-", "-", "-", r.note, "", "", ""))
            continue
        marker = f"{r.marker} ({r.note})" if r.note else (r.marker or "")
        table.append(
            (
                r.task,
                r.store,
                r.checkpoint_id or "-",
                r.backend or "-",
                marker,
                "" if r.files is None else str(r.files),
                "" if r.bytes is None else str(r.bytes),
                "" if r.created_ms is None else format_time(r.created_ms),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    right = {5, 6}  # numbers
    return [
        "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in table
    ]


def format_time(epoch_ms: int) -> str:
    """UTC, to the millisecond: `2026-11-23T05:00:00.123Z`."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


# -- samsa state show -----------------------------------------------------------------------------------


def read_named_index(store: BlobStoreManager, blob_id: str, base: BlobMetadata) -> bytes:
    """The bytes of the snapshot index a user named (`BlobDeletedError` when it is gone); an id the blob
    store could never have made (a typo) is said not to exist, not to be corrupt."""
    try:
        check_blob_id(blob_id)
    except BlobStoreError:
        raise BlobStoreError(
            f"snapshot index {blob_id!r} does not exist: index ids look like "
            "<job.name>-<job.id>/<task>/<store>/snapshot-index.<32 hex digits>; `samsa state ls` lists "
            "those of the last checkpoints"
        ) from None
    return read_index_bytes(store, blob_id, base)


def index_json(data: bytes, blob_id: str) -> str:
    """The index blob as indented JSON, every field kept (the blob must parse as an index first)."""
    SnapshotIndex.from_bytes(data, where=blob_id)
    return json.dumps(json.loads(data), indent=2)


def render_index(blob_id: str, index: SnapshotIndex) -> list[str]:
    """Metadata, previous index, the tree of present files and what the snapshot removed."""
    m = index.metadata
    files, size = index.dir_index.stats()
    removed = list(removed_files(index.dir_index))
    lines = [
        f"snapshot index {blob_id}",
        f"  job {m.job_name} (id {m.job_id}), task {m.task_name}, store {m.store_name}",
        f"  checkpoint {m.checkpoint_id}, created {format_time(index.creation_time_ms)}, "
        f"schema version {index.schema_version}",
        f"  previous index: {index.prev_index_blob_id or 'none (the first snapshot)'}",
        f"  input partitions: {_input_partitions_text(m.input_partitions)}",
        f"present: {files} file(s), {size} bytes",
        *_tree(index.dir_index, "  "),
        f"removed: {len(removed)} file(s), {sum(f.size for _, f in removed)} bytes"
        " (deleted from the blob store once this snapshot's checkpoint is durable)",
        *(f"  {path}  {_file_text(f)}" for path, f in removed),
    ]
    return lines


def _input_partitions_text(counts: Mapping[str, int] | None) -> str:
    if counts is None:
        return "not recorded (an index written by an older Samsa: not checked at restore)"
    return ", ".join(f"{stream} {n}" for stream, n in sorted(counts.items())) or "none"


def _file_text(f: FileIndex) -> str:
    return (
        f"size {f.size}  blobs {len(f.blobs)}  crc32c {f.checksum:08x}  "
        f"mode {f.metadata.permissions & 0o7777:04o}"
    )


def _tree(d: DirIndex, indent: str) -> Iterator[str]:
    width = max((len(f.name) for f in d.files_present), default=0)
    for f in d.files_present:
        yield f"{indent}{f.name.ljust(width)}  {_file_text(f)}"
    for sub in d.subdirs_present:
        yield f"{indent}{sub.name}/"
        yield from _tree(sub, indent + "  ")


def present_files(d: DirIndex, prefix: str = "") -> Iterator[tuple[str, FileIndex]]:
    """(path in the snapshot, file) of every present file, recursively."""
    for f in d.files_present:
        yield prefix + f.name, f
    for sub in d.subdirs_present:
        yield from present_files(sub, f"{prefix}{sub.name}/")


def removed_files(d: DirIndex, prefix: str = "") -> Iterator[tuple[str, FileIndex]]:
    """(path, file) of every file the snapshot dropped, in removed dirs too, recursively."""
    for f in d.files_removed:
        yield prefix + f.name, f
    for sub in d.subdirs_removed:
        yield from present_files(sub, f"{prefix}{sub.name}/")
        yield from removed_files(sub, f"{prefix}{sub.name}/")
    for sub in d.subdirs_present:
        yield from removed_files(sub, f"{prefix}{sub.name}/")


# -- samsa state download -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DownloadResult:
    files: int
    bytes: int
    seconds: float
    #: The snapshot downloaded: a newer one than asked for when a running job's commit replaced that.
    snapshot: SnapshotRef


def download_snapshot(
    transfer: BlobTransfer,
    ref: SnapshotRef,
    target: Path,
    job_name: str,
    job_id: str,
    stop: threading.Event | None = None,
    reread: Reread | None = None,
) -> DownloadResult:
    """Restores the snapshot `ref` into `target` (missing or an empty dir), every file CRC-verified.

    A snapshot found gone while `reread` shows the checkpoint moved on (a running job's commit deleted it)
    is replaced by the newer one. On a failure the partial download is deleted (and `target` too when this
    created it).
    """
    if target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        raise BlobStoreError(f"--to {target}: it exists and is not an empty dir; name a new dir")
    created = not target.exists()
    started = time.monotonic()
    for attempt in range(MAX_SNAPSHOT_RETRIES + 1):
        try:
            files, size = _download(transfer, ref, target, job_name, job_id, stop)
            return DownloadResult(files, size, time.monotonic() - started, ref)
        except BlobDeletedError as e:
            newer = moved_on(ref, reread)
            if newer is None or attempt == MAX_SNAPSHOT_RETRIES:
                _empty(target, remove=created)
                if newer is None:
                    raise  # the checkpoint still names the gone snapshot
                raise BlobStoreError(f"task {ref.task} store {ref.store}: {_CHASED}") from e
            _empty(target, remove=False)
            ref = newer
        except BaseException:
            _empty(target, remove=created)
            raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _download(
    transfer: BlobTransfer,
    ref: SnapshotRef,
    target: Path,
    job_name: str,
    job_id: str,
    stop: threading.Event | None,
) -> tuple[int, int]:
    """(files, bytes) of the snapshot `ref` restored into `target`."""
    base = ref.base(job_name, job_id)
    index = transfer.get_index(ref.index_blob_id, base)
    done = [0, 0]

    def advance(size: int, files: int) -> None:
        done[0] += size
        done[1] += files

    transfer.restore_dir(index.dir_index, target, base, stop, advance)
    return done[1], done[0]


def _empty(target: Path, remove: bool) -> None:
    if not target.is_dir():
        return
    if remove:
        shutil.rmtree(target, ignore_errors=True)
        return
    for entry in target.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


# -- samsa blobstore verify -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """A blob a checkpointed snapshot needs that is missing or does not match its index."""

    task: str
    store: str
    file: str
    blob_id: str
    detail: str
    #: The blob is gone (not corrupt or unreadable): a running job's commit may have deleted it.
    missing: bool = False

    def line(self) -> str:
        return f"task {self.task} store {self.store} file {self.file} blob {self.blob_id}: {self.detail}"


@dataclass
class VerifyReport:
    snapshots: int = 0
    files: int = 0
    blobs: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, other: VerifyReport) -> None:
        self.snapshots += other.snapshots
        self.files += other.files
        self.blobs += other.blobs
        self.bytes += other.bytes
        self.problems += other.problems

    def summary(self) -> str:
        verdict = "all match" if self.ok else f"{len(self.problems)} problem(s)"
        return (
            f"verified {self.snapshots} snapshot(s): {self.files} file(s), {self.blobs} blob(s), "
            f"{self.bytes} bytes: {verdict}"
        )


def verify_snapshots(
    store: BlobStoreManager,
    refs: Sequence[SnapshotRef],
    job_name: str,
    job_id: str,
    parallelism: int = 8,
    reread: Reread | None = None,
) -> VerifyReport:
    """Downloads every blob of every snapshot in `refs` into a CRC32C counter (nothing is written to disk)
    and checks each file's size and CRC32C against its index; a missing or unreadable index is a problem
    too. Files are checked `parallelism` at a time; the chunks of one file one after the other.

    A snapshot with a missing index or blob while `reread` shows its task's checkpoint moved on (a running
    job's commit deleted it) is replaced by the newer one; missing is reported only while the checkpoint
    still names it."""
    report = VerifyReport()
    with ThreadPoolExecutor(max(1, parallelism), "blob-verify") as pool:
        started = [(ref, _start_check(store, ref, job_name, job_id, pool)) for ref in refs]
        for ref, files in started:
            for attempt in range(MAX_SNAPSHOT_RETRIES + 1):
                part = _finish_check(files)
                if not any(p.missing for p in part.problems):
                    break
                newer = moved_on(ref, reread)
                if newer is None:
                    break  # the checkpoint still names the missing blobs
                if attempt == MAX_SNAPSHOT_RETRIES:
                    part.problems = [replace(p, detail=f"{p.detail} ({_CHASED})") for p in part.problems]
                    break
                ref = newer
                files = _start_check(store, ref, job_name, job_id, pool)
            report.add(part)
    return report


_FileCheck = Future[tuple[int, int, list[Problem]]]


def _start_check(
    store: BlobStoreManager, ref: SnapshotRef, job_name: str, job_id: str, pool: ThreadPoolExecutor
) -> Problem | list[_FileCheck]:
    """Reads the snapshot's index and starts the checks of its files on `pool`; or the index's problem."""
    base = ref.base(job_name, job_id)
    try:
        index = read_index(store, ref.index_blob_id, base)
    except BlobDeletedError:
        return _index_problem(ref, "MISSING snapshot index", missing=True)
    except (IndexFormatError, UnsafeIndexError) as e:
        return _index_problem(ref, f"CORRUPT snapshot index: {e}")
    except BlobStoreError as e:
        return _index_problem(ref, f"UNREADABLE snapshot index: {e}")
    return [
        pool.submit(_verify_file, store, ref, path, f, replace(base, payload_path=path))
        for path, f in present_files(index.dir_index)
    ]


def _finish_check(started: Problem | list[_FileCheck]) -> VerifyReport:
    """One snapshot's report, once the checks `_start_check` started are done."""
    if isinstance(started, Problem):
        return VerifyReport(problems=[started])
    report = VerifyReport(snapshots=1)
    for check in started:
        blobs, size, problems = check.result()
        report.files += 1
        report.blobs += blobs
        report.bytes += size
        report.problems += problems
    return report


def _index_problem(ref: SnapshotRef, detail: str, missing: bool = False) -> Problem:
    return Problem(ref.task, ref.store, SNAPSHOT_INDEX_PATH, ref.index_blob_id, detail, missing)


def _verify_file(
    store: BlobStoreManager, ref: SnapshotRef, path: str, f: FileIndex, base: BlobMetadata
) -> tuple[int, int, list[Problem]]:
    """(blobs read, bytes read, problems) of one file."""
    blobs = sorted(f.blobs, key=lambda b: b.offset)
    problems: list[Problem] = []
    crc = size = 0
    whole = True  # every chunk read with its expected length: the file's CRC is meaningful
    for k, blob in enumerate(blobs):
        end = blobs[k + 1].offset if k + 1 < len(blobs) else f.size
        expected = end - blob.offset
        counter = _CrcCounter(crc)
        try:
            store.get(blob.blob_id, counter.open, replace(base, payload_size=expected)).result()
        except BlobDeletedError:
            problems.append(Problem(ref.task, ref.store, path, blob.blob_id, "MISSING", missing=True))
            whole = False
            continue
        except BlobStoreError as e:
            problems.append(Problem(ref.task, ref.store, path, blob.blob_id, f"UNREADABLE: {e}"))
            whole = False
            continue
        size += counter.size
        if counter.size != expected:
            detail = (
                f"CORRUPT: holds {counter.size} bytes, the index expects {expected} at offset {blob.offset}"
            )
            problems.append(Problem(ref.task, ref.store, path, blob.blob_id, detail))
            whole = False
        crc = counter.crc
    if whole and size != f.size:
        ids = ",".join(b.blob_id for b in blobs) or "-"
        detail = f"CORRUPT: the blobs hold {size} bytes, the index records {f.size}"
        problems.append(Problem(ref.task, ref.store, path, ids, detail))
    elif whole and crc != f.checksum:
        ids = ",".join(b.blob_id for b in blobs) or "-"
        detail = f"CORRUPT: CRC32C {crc:08x}, the index records {f.checksum:08x}"
        problems.append(Problem(ref.task, ref.store, path, ids, detail))
    return len(blobs), size, problems


class _CrcSink:
    """A write-only stream counting its bytes and their CRC32C (continuing from `seed`); keeps no bytes."""

    def __init__(self, seed: int, keep: bool = False) -> None:
        self.crc = seed
        self.size = 0
        self.closed = False
        #: The bytes after all, when asked to keep them (a small blob read into memory).
        self.parts: list[bytes] | None = [] if keep else None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        self.crc = checksum.extend(self.crc, view)
        self.size += view.nbytes
        if self.parts is not None:
            self.parts.append(bytes(view))
        return view.nbytes

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> _CrcSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _CrcCounter:
    """The sink `Opener` of one chunk: each attempt starts a fresh count, so a retry never counts twice."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._last = _CrcSink(seed)

    def open(self) -> BinaryIO:
        self._last = _CrcSink(self._seed)
        return cast(BinaryIO, self._last)

    @property
    def crc(self) -> int:
        return self._last.crc

    @property
    def size(self) -> int:
        return self._last.size


class _Capture:
    """The sink `Opener` of a small blob read into memory (each attempt starts empty)."""

    def __init__(self) -> None:
        self._last = _CrcSink(0, keep=True)

    def open(self) -> BinaryIO:
        self._last = _CrcSink(0, keep=True)
        return cast(BinaryIO, self._last)

    @property
    def value(self) -> bytes:
        return b"".join(self._last.parts or ())


# -- samsa blobstore gc ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GcReport:
    """A gc pass (or what a dry run would do); `kept` are expired blobs the checkpoints still need."""

    result: GcResult
    dry_run: bool
    kept: tuple[str, ...] = ()
    #: The first segment of the blob ids looked at (`job_segment`): the only blobs gc touched.
    job: str = ""

    def lines(self, where: str) -> list[str]:
        r = self.result
        verb = "would delete" if self.dry_run else "deleted"
        lines = [
            f"blob store {where}, blobs of job {self.job} only (under {self.job}/; other jobs' blobs in the "
            f"same dir are left alone): {verb} {r.blobs_deleted} expired blob(s) never committed, "
            f"{r.bytes_deleted} bytes"
        ]
        if not self.dry_run:
            lines.append(
                f"  and {r.temp_files_deleted} stale temp file(s), {r.sidecars_deleted} orphan sidecar(s)"
            )
        if self.kept:
            verb = "would make" if self.dry_run else "made"
            lines.append(
                f"  {verb} {len(self.kept)} expired blob(s) permanent: the last checkpoints still use them "
                "(their commit's cleanup never ran)"
            )
        return lines


def referenced_blobs(
    store: BlobStoreManager,
    refs: Sequence[SnapshotRef],
    job_name: str,
    job_id: str,
    reread: Reread | None = None,
) -> tuple[set[str], list[SnapshotRef]]:
    """(every blob the snapshots of `refs` use, index blobs included; the refs whose index is unreadable).

    An index found gone while `reread` shows the checkpoint moved on is replaced by the newer one."""
    used: set[str] = set()
    unreadable = []
    for ref in refs:
        try:
            current, index = _current_index(store, ref, job_name, job_id, reread)
        except BlobStoreError:
            unreadable.append(ref)
            continue
        used.add(current.index_blob_id)
        used.update(index.dir_index.present_blobs())
    return used, unreadable


def _current_index(
    store: BlobStoreManager, ref: SnapshotRef, job_name: str, job_id: str, reread: Reread | None
) -> tuple[SnapshotRef, SnapshotIndex]:
    """`ref` and its index, or the snapshot the checkpoint moved on to and its index when `ref`'s is gone."""
    for attempt in range(MAX_SNAPSHOT_RETRIES + 1):
        try:
            return ref, read_index(store, ref.index_blob_id, ref.base(job_name, job_id))
        except BlobDeletedError:
            newer = moved_on(ref, reread) if attempt < MAX_SNAPSHOT_RETRIES else None
            if newer is None:
                raise
            ref = newer
    raise AssertionError("unreachable: the last attempt returns or raises")


def gc_local(
    store: LocalDirBlobStore,
    referenced: Collection[str],
    job_name: str,
    job_id: str,
    dry_run: bool = False,
    now: float | None = None,
) -> GcReport:
    """Deletes job `job_name` (id `job_id`)'s blobs whose TTL expired (never committed), with `gc`'s
    leftovers of its crashed writes; other jobs' blobs in the same dir are never looked at.

    A blob in `referenced` (used by the last checkpoints) is made permanent instead, as the job's next
    start would: its commit's cleanup never ran. A dry run changes nothing and counts blobs only.
    """
    # Only this job's checkpoints were read: another job's expired blobs may be its last snapshot (a crash
    # before its cleanup), so they are selected by the whole first segment of their ids (`a` is not `a-b`).
    job = job_segment(job_name, job_id)
    now = time.time() if now is None else now
    expired = [b for b in store.list_blobs(job) if b.expires_at is not None and b.expires_at <= now]
    kept = sorted(b.blob_id for b in expired if b.blob_id in referenced)
    if dry_run:
        doomed = [b for b in expired if b.blob_id not in referenced]
        return GcReport(GcResult(len(doomed), sum(b.size for b in doomed)), True, tuple(kept), job)
    for blob_id in kept:
        log.warning("blob %s is expired but the last checkpoint uses it: making it permanent", blob_id)
        meta = BlobMetadata(blob_id, -1, job_name, job_id, "", "")
        store.remove_ttl(blob_id, meta).result()
    return GcReport(store.gc(now, job), False, tuple(kept), job)


# -- samsa blobstore gc: committed snapshots no checkpoint names ----------------------------------------

Checkpointed = Callable[[], Sequence[SnapshotRef]]
"""Reads again the snapshots the checkpoints name (each task's last V2 record, whichever version the job
reads): a running job's commit may checkpoint a new one at any time."""


@dataclass(frozen=True)
class LeftSnapshot:
    """A committed snapshot that no task's last checkpoint names, and what deleting it removes."""

    index_blob_id: str
    task: str
    store: str
    checkpoint_id: str
    #: (blob id, bytes) of its files' blobs that no checkpointed snapshot uses, its index last.
    blobs: tuple[tuple[str, int], ...]
    #: Blobs of its files kept: a checkpointed snapshot uses them too.
    shared: int = 0

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.blobs)

    def line(self, dry_run: bool) -> str:
        verb = "would delete" if dry_run else "deleted"
        kept = f", kept {self.shared} blob(s) a checkpointed snapshot uses" if self.shared else ""
        return (
            f"  {verb} snapshot {self.index_blob_id} of task {self.task} store {self.store} (checkpoint "
            f"{self.checkpoint_id}): {len(self.blobs)} blob(s) with its index, {self.bytes} bytes{kept}"
        )


@dataclass(frozen=True)
class LeftReport:
    """The committed snapshots gc found no checkpoint naming (deleted, or what a dry run would delete)."""

    snapshots: tuple[LeftSnapshot, ...]
    dry_run: bool
    job: str
    #: Why no committed snapshot is deleted, when one is not safe to (then `snapshots` is empty).
    refused: str = ""
    #: Indexes under the job's keys gc cannot read as a snapshot index: never deleted.
    skipped: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        verb = "would delete" if self.dry_run else "deleted"
        if self.refused:
            return [
                f"committed snapshots of job {self.job} no checkpoint names: none deleted; {self.refused}"
            ]
        blobs = sum(len(s.blobs) for s in self.snapshots)
        size = sum(s.bytes for s in self.snapshots)
        lines = [
            f"committed snapshots of job {self.job} that no task's last checkpoint names (stores no longer "
            f"backed up to the blob store, or removed): {verb} {len(self.snapshots)} snapshot(s), "
            f"{blobs} blob(s), {size} bytes"
        ]
        lines += [s.line(self.dry_run) for s in self.snapshots]
        lines += [
            f"  skipped {blob_id}: not readable as a snapshot index; left alone" for blob_id in self.skipped
        ]
        return lines


class _Refused(Exception):
    """A checkpointed snapshot's index cannot be read: its blobs, which must stay, are not known."""


def is_index_id(blob_id: str) -> bool:
    """Whether `blob_id` has the shape of a snapshot index's id (`.../snapshot-index.<32 hex digits>`)."""
    name = blob_id.rsplit("/", 1)[-1]
    return ID_END.search(name) is not None and name[:-33] == SNAPSHOT_INDEX_PATH  # 33: "." + uuid hex


def job_blobs(
    store: BlobStoreManager, job_name: str, job_id: str
) -> tuple[Iterable[BlobInfo], Callable[[BlobInfo], bool]]:
    """(job `job_name` (id `job_id`)'s blobs, listed lazily; whether a blob still has its TTL), in the
    local dir or on S3."""
    job = job_segment(job_name, job_id)
    if isinstance(store, LocalDirBlobStore):
        return store.list_blobs(job), lambda info: info.expires_at is not None
    from samsa.stores.blobstore.s3 import S3BlobStore  # boto3 loads only for S3 jobs

    if not isinstance(store, S3BlobStore):
        raise BlobStoreError(
            f"gc cannot list the blobs of {type(store).__name__}: only the dir and S3 stores"
        )
    s3 = store
    # A tag lookup per index only (a listing gives no tags): the files' blobs are never asked.
    return s3.list_blobs(job=job), lambda info: s3.expiring(info.blob_id)


def find_left_snapshots(
    store: BlobStoreManager,
    listed: Iterable[BlobInfo],
    expiring: Callable[[BlobInfo], bool],
    checkpointed: Checkpointed,
    job_name: str,
    job_id: str,
    dry_run: bool = False,
) -> LeftReport:
    """The committed snapshots under job `job_name` (id `job_id`)'s keys that no task's last checkpoint
    names, each with the blobs that only it uses (`listed`: the job's blobs; `expiring(blob)`: it still
    carries its TTL). Deletes nothing.

    Only indexes without a TTL count: a commit in flight (its checkpoint not written yet) puts its blobs
    and index with their TTL, and its cleanup makes the index permanent last, after its checkpoint is
    durable; so an index permanent when listed has its checkpoint already written, and the checkpoints are
    read again after the listing (a commit in between names its snapshot there). Every blob a checkpointed
    snapshot uses stays; when such a snapshot's index cannot be read, nothing is deleted.
    """
    job = job_segment(job_name, job_id)
    first = list(checkpointed())
    named = {r.index_blob_id for r in first}
    infos = {b.blob_id: b for b in listed}
    sizes = {blob_id: info.size for blob_id, info in infos.items()}
    candidates: dict[str, SnapshotIndex] = {}
    skipped = []
    for info_id in sorted(i for i in infos if is_index_id(i) and i not in named):
        found = _committed_index(store, infos[info_id], expiring, job_name, job_id)
        if isinstance(found, SnapshotIndex):
            candidates[info_id] = found
        elif found:
            skipped.append(info_id)
    try:
        protected, used = _checkpointed_blobs(
            store, [*first, *checkpointed()], checkpointed, job_name, job_id
        )
    except _Refused as e:
        return LeftReport((), dry_run, job, refused=str(e))
    left = []
    taken: set[str] = set()
    for blob_id, index in candidates.items():
        if blob_id in protected:
            continue  # a commit after the first read named it
        own = set(index.dir_index.present_blobs()) | set(index.dir_index.removed_blobs())
        shared = own & used
        mine = sorted(b for b in own - used - taken - protected if b in sizes)
        taken.update(mine)
        m = index.metadata
        blobs = (*((b, sizes[b]) for b in mine), (blob_id, sizes[blob_id]))
        left.append(LeftSnapshot(blob_id, m.task_name, m.store_name, m.checkpoint_id, blobs, len(shared)))
    return LeftReport(tuple(left), dry_run, job, skipped=tuple(skipped))


def _committed_index(
    store: BlobStoreManager,
    info: BlobInfo,
    expiring: Callable[[BlobInfo], bool],
    job_name: str,
    job_id: str,
) -> SnapshotIndex | bool:
    """The index blob's snapshot when it is committed; False when it expires (a commit in flight, or one
    that failed: the TTL gc's) or is gone; True when it does not read as a snapshot index."""
    try:
        if expiring(info):
            return False
        base = BlobMetadata(SNAPSHOT_INDEX_PATH, -1, job_name, job_id, "", "")
        return read_index(store, info.blob_id, base)
    except BlobDeletedError:
        return False  # deleted meanwhile (a running job's cleanup)
    except (IndexFormatError, UnsafeIndexError) as e:
        log.warning("gc leaves %s alone: it does not read as a snapshot index (%s)", info.blob_id, e)
        return True


def _checkpointed_blobs(
    store: BlobStoreManager,
    refs: Sequence[SnapshotRef],
    checkpointed: Checkpointed,
    job_name: str,
    job_id: str,
) -> tuple[set[str], set[str]]:
    """(the index ids the checkpoints name, every blob their snapshots use); an index found gone is
    followed to the checkpoints' newer snapshot (at most `MAX_SNAPSHOT_RETRIES` times). Raises `_Refused`
    when an index the last checkpoints name cannot be read."""
    protected: set[str] = set()
    used: set[str] = set()
    pending = list(refs)
    rounds = 0
    while pending:
        ref = pending.pop()
        if ref.index_blob_id in protected:
            continue
        protected.add(ref.index_blob_id)
        try:
            index = read_index(store, ref.index_blob_id, ref.base(job_name, job_id))
        except BlobDeletedError as e:
            latest = list(checkpointed())
            if ref.index_blob_id in {r.index_blob_id for r in latest}:
                raise _Refused(
                    f"the last checkpoint of task {ref.task} names snapshot {ref.index_blob_id} of store "
                    f"{ref.store}, which is not in the blob store ({e}); `samsa blobstore verify` checks it"
                ) from e
            rounds += 1
            if rounds > MAX_SNAPSHOT_RETRIES:
                raise _Refused(_CHASED) from e
            pending += latest  # a running job's commit deleted it: keep what the newer ones use
            continue
        except BlobStoreError as e:
            raise _Refused(
                f"the snapshot index {ref.index_blob_id} that the last checkpoint of task {ref.task} names "
                f"for store {ref.store} cannot be read, so the blobs it uses are not known: {e}"
            ) from e
        used.update(index.dir_index.present_blobs())
    return protected, used


def delete_left_snapshots(
    store: BlobStoreManager,
    snapshots: Sequence[LeftSnapshot],
    job_name: str,
    job_id: str,
    on_deleted: Callable[[LeftSnapshot], None] | None = None,
) -> None:
    """Deletes each snapshot's blobs, then its index (so a run cut short finds it again and finishes)."""
    for snapshot in snapshots:
        base = BlobMetadata.of_store(job_name, job_id, snapshot.task, snapshot.store)
        *files, (index_id, _) = snapshot.blobs
        deletes = [store.delete(b, replace(base, payload_path=b.rsplit("/", 1)[-1])) for b, _ in files]
        for request in deletes:
            request.result()
        store.delete(index_id, replace(base, payload_path=SNAPSHOT_INDEX_PATH)).result()
        log.info("gc deleted snapshot %s (%d blobs, %d bytes)", index_id, len(snapshot.blobs), snapshot.bytes)
        if on_deleted is not None:
            on_deleted(snapshot)
