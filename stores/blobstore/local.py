"""The embedded blob store: each blob a file under a directory, with a JSON sidecar holding its TTL.

Blob ids are readable relative paths, `<job>-<job id>/<task>/<store>/<payload path>.<uuid4 hex>`, shared
with the S3 store (`new_blob_id`, `check_blob_id`). Next to blob `X` lies its sidecar `X.meta.json`
(expires-at in epoch seconds or null once permanent, created-at, size, and whom it is for); files ending
in `.part` are writes in progress, or leftovers of crashed ones that `gc` removes. A put becomes visible
only whole and with its sidecar: data and sidecar are written under temporary names, synced, and renamed
into place (sidecar first). Expired blobs stay readable until `gc` deletes them, as on S3 until its
lifecycle rule runs. Every stream a request opens is closed by the request.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from samsa.stores.blobstore.api import BlobMetadata, Opener
from samsa.stores.blobstore.exceptions import BlobDeletedError, BlobStoreError
from samsa.stores.blobstore.requests import (
    ID_END,
    BlobInfo,
    ExecutorBlobStore,
    RequestTracker,
    check_blob_id,
    copy_stream,
    new_blob_id,
)
from samsa.stores.checkpoint_dirs import fsync_dir
from samsa.stores.exceptions import no_room

P = ParamSpec("P")
T = TypeVar("T")

_log = logging.getLogger(__name__)

SIDECAR_SUFFIX = ".meta.json"
TEMP_SUFFIX = ".part"
# What to do when the blob store dir's disk is full (a `StoreDiskFullError` of a put, remove_ttl or init).
_BLOB_DIR_FIX = (
    "Free space there, or point blobstore.local.dir (by default <job.logged.store.base.dir>/blobstore) at a "
    "disk with room, moving its contents along, then restart: the container resumes from its last "
    "checkpoint, and nothing checkpointed is lost"
)


@dataclass(frozen=True, slots=True)
class GcResult:
    """What one `gc` pass removed: expired blobs (and their bytes), stale temp files, orphan sidecars."""

    blobs_deleted: int = 0
    bytes_deleted: int = 0
    temp_files_deleted: int = 0
    sidecars_deleted: int = 0


def _temp_name(path: Path) -> Path:
    return path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}")


def _write_json_atomically(path: Path, content: dict[str, Any]) -> None:
    temp = _temp_name(path)
    try:
        with open(temp, "w", encoding="utf-8") as out:
            json.dump(content, out, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def sidecar_of(blob: Path) -> Path:
    """The sidecar metadata file of the blob file `blob`."""
    return blob.with_name(blob.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> dict[str, Any] | None:
    """A sidecar's content; None when there is none. A corrupt one is a `BlobStoreError` naming it."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise BlobStoreError(
            f"blob sidecar {path} cannot be read ({exc}); delete it to make the blob permanent"
        ) from exc
    if not isinstance(content, dict):
        raise BlobStoreError(
            f"blob sidecar {path} is not a JSON object; delete it to make the blob permanent"
        )
    return content


class LocalDirBlobStore(ExecutorBlobStore):
    """A `BlobStoreManager` keeping blobs as files under `root` (config `blobstore.local.dir`).

    Every put gets a TTL of `ttl_s` seconds by `clock`; `gc` deletes blobs whose TTL ran out before
    `remove_ttl` made them permanent. Requests run on `executor`.
    """

    def __init__(
        self, root: Path, executor: Executor, ttl_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        if ttl_s <= 0:
            raise BlobStoreError(f"blob TTL {ttl_s} s for {root} must be positive")
        self._root = Path(root)
        self._ttl_s = ttl_s
        self._clock = clock
        self._requests = RequestTracker(executor, f"blob store {self._root}")

    @property
    def root(self) -> Path:
        return self._root

    def init(self) -> None:
        try:
            self._root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # No store named: the dir holds every store's blobs (a disk out of inodes refuses even a dir).
            full = no_room(None, self._root, "create the blob store dir", exc, _BLOB_DIR_FIX)
            raise full or BlobStoreError(f"cannot create the blob store dir {self._root}: {exc}") from exc

    def _path(self, blob_id: str) -> Path:
        path = self._root / check_blob_id(blob_id)
        # A link anywhere on the way could still lead outside the root.
        if not path.resolve().is_relative_to(self._root.resolve()):
            raise BlobStoreError(
                f"blob id {blob_id!r} leads outside the blob store dir {self._root} (through a link); "
                "nothing was touched"
            )
        return path

    def _put(self, source: Opener, metadata: BlobMetadata) -> str:
        blob_id = new_blob_id(metadata)
        path = self._root / blob_id
        temp = _temp_name(path)
        sidecar = sidecar_of(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with source() as stream, open(temp, "wb") as out:
                size = copy_stream(stream, out)
                out.flush()
                os.fsync(out.fileno())
            now = self._clock()
            _write_json_atomically(sidecar, self._sidecar(metadata, size, now, now + self._ttl_s))
            os.replace(temp, path)
            fsync_dir(path.parent)
        except BaseException as exc:
            temp.unlink(missing_ok=True)
            if not path.exists():
                sidecar.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                action = f"put of {metadata.describe()} as blob {blob_id}"
                raise no_room(metadata.store_name, self._root, action, exc, _BLOB_DIR_FIX) or BlobStoreError(
                    f"put of {metadata.describe()} as blob {blob_id} in {self._root} failed: {exc}; check "
                    "the source file and that the blob store dir is writable and has space"
                ) from exc
            raise
        return blob_id

    @staticmethod
    def _sidecar(metadata: BlobMetadata, size: int, created_at: float, expires_at: float) -> dict[str, Any]:
        return {
            "expires-at": expires_at,
            "created-at": created_at,
            "size": size,
            "payload-path": metadata.payload_path,
            "job": f"{metadata.job_name}-{metadata.job_id}",
            "task": metadata.task_name,
            "store": metadata.store_name,
        }

    def _get(self, blob_id: str, sink: Opener, metadata: BlobMetadata) -> None:
        path = self._path(blob_id)
        try:
            blob = open(path, "rb")  # noqa: SIM115 - closed below; a missing file must not touch the sink
        except FileNotFoundError:
            raise BlobDeletedError(blob_id, f"no file {path}") from None
        except OSError as exc:
            raise BlobStoreError(f"get of blob {blob_id} ({metadata.describe()}) failed: {exc}") from exc
        with blob:
            try:
                with sink() as out:
                    copy_stream(blob, out)
            except OSError as exc:
                raise BlobStoreError(
                    f"get of blob {blob_id} ({metadata.describe()}) failed copying it to its sink: {exc}; "
                    "check that the store dir is writable and has space"
                ) from exc

    def _delete(self, blob_id: str, metadata: BlobMetadata) -> None:
        path = self._path(blob_id)
        try:
            # Blob first: a crash in between leaves an orphan sidecar (gc removes it), never a blob
            # without one (which would count as permanent).
            path.unlink(missing_ok=True)
            sidecar_of(path).unlink(missing_ok=True)
        except OSError as exc:
            raise BlobStoreError(f"delete of blob {blob_id} ({metadata.describe()}) failed: {exc}") from exc

    def _remove_ttl(self, blob_id: str, metadata: BlobMetadata) -> None:
        path = self._path(blob_id)
        sidecar = sidecar_of(path)
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise BlobDeletedError(blob_id, f"no file {path}") from None
        content = read_sidecar(sidecar)
        if content is not None and content.get("expires-at") is None:
            return
        if content is None:  # never written by this store; the blob counts as permanent already
            content = {"created-at": stat.st_mtime, "size": stat.st_size}
        content["expires-at"] = None
        try:
            _write_json_atomically(sidecar, content)
            # The rename made durable: a power loss that brought the expiring sidecar back would let gc
            # delete a blob the committed checkpoint names.
            fsync_dir(sidecar.parent)
        except OSError as exc:
            # The sidecar is rewritten whole: a full disk refuses it like a put (the old one stays).
            action = f"remove_ttl of blob {blob_id} ({metadata.describe()}) writing its TTL sidecar"
            raise no_room(metadata.store_name, self._root, action, exc, _BLOB_DIR_FIX) or BlobStoreError(
                f"remove_ttl of blob {blob_id} ({metadata.describe()}) failed writing {sidecar}: {exc}"
            ) from exc

    def list_blobs(self, job: str | None = None) -> Iterator[BlobInfo]:
        """Every blob under the root, or only job `job`'s (the first segment of its blob ids, `job_segment`),
        in no particular order (reads sidecars; skips writes in progress)."""
        for path in self._files(job):
            if not ID_END.search(path.name):
                continue
            try:
                stat = path.stat()
                content = read_sidecar(sidecar_of(path)) or {}
            except FileNotFoundError:
                continue  # deleted meanwhile
            expires_at = content.get("expires-at")
            yield BlobInfo(
                blob_id=path.relative_to(self._root).as_posix(),
                size=stat.st_size,
                created_at=float(content.get("created-at", stat.st_mtime)),
                expires_at=None if expires_at is None else float(expires_at),
            )

    def gc(self, now: float | None = None, job: str | None = None) -> GcResult:
        """Deletes blobs whose TTL ran out (never made permanent), and temp files and orphan sidecars
        older than the TTL (left by crashed puts and deletes); only job `job`'s (the first segment of its
        blob ids, `job_segment`) when given. Runs on the caller's thread."""
        now = self._clock() if now is None else now
        blobs = size = temps = sidecars = 0
        for path in self._files(job):
            try:
                if path.name.endswith(TEMP_SUFFIX):
                    if path.stat().st_mtime + self._ttl_s <= now:
                        path.unlink()
                        temps += 1
                elif path.name.endswith(SIDECAR_SUFFIX):
                    blob = path.with_name(path.name[: -len(SIDECAR_SUFFIX)])
                    if not blob.exists() and path.stat().st_mtime + self._ttl_s <= now:
                        path.unlink()
                        sidecars += 1
                elif ID_END.search(path.name):
                    freed = self._collect_blob(path, now)
                    if freed is not None:
                        blobs += 1
                        size += freed
            except FileNotFoundError:
                continue  # a concurrent delete or gc got there first
            except BlobStoreError as exc:
                _log.warning("gc skips %s: %s", path, exc)
        result = GcResult(blobs, size, temps, sidecars)
        _log.info("blob store gc of %s: %s", self._root if job is None else self._root / job, result)
        return result

    @staticmethod
    def _collect_blob(path: Path, now: float) -> int | None:
        content = read_sidecar(sidecar_of(path))
        expires_at = None if content is None else content.get("expires-at")
        if expires_at is None or float(expires_at) > now:
            return None
        size = path.stat().st_size
        path.unlink()
        sidecar_of(path).unlink(missing_ok=True)
        return size

    def _files(self, job: str | None = None) -> Iterator[Path]:
        top = self._root
        if job is not None:
            # Jobs sharing the dir (the default one is shared by every job with the same base dir) each own
            # one top-level dir: another job's blobs must never be touched.
            if job in ("", ".", "..") or "/" in job or "\\" in job:
                raise BlobStoreError(f"{job!r} is not a job's blob dir name (<job.name>-<job.id>)")
            top = self._root / job
        if not top.is_dir():
            return
        for parent, _dirs, files in os.walk(top):
            for name in files:
                yield Path(parent) / name
