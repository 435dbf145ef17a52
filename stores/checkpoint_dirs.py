"""Local store checkpoint dirs (`<storeDir>-<checkpointId>`) and the marker file naming the commit of each.

A commit's blocking phase has the engine write a RocksDB checkpoint (hard links) next to the live store
dir; once the backends have uploaded, a `CHECKPOINT-V2` marker file in that dir records the checkpoint id
and each backend's marker for the store. At restore, a checkpoint dir whose marker matches the job's
checkpoint is copied back into the store dir instead of replaying the whole changelog.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import time
import zlib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from samsa.stores.exceptions import StoreError, no_room

log = logging.getLogger(__name__)

MARKER_FILE = "CHECKPOINT-V2"
MARKER_SCHEMA_VERSION = 1
# Suffix of the dir `restore_store_dir` builds before renaming it over the store dir. A store name never
# holds a dot (it is one segment of a `stores.<s>.` key), so no store dir can take this name.
_RESTORING_SUFFIX = ".restoring"


@runtime_checkable
class Checkpointable(Protocol):
    """An engine that can write a consistent copy of itself into a new directory (RocksDB)."""

    def checkpoint(self, dest_dir: Path) -> Path: ...


@dataclass(frozen=True, slots=True)
class StoreMarker:
    """What a checkpoint dir's marker file says: which checkpoint made it, with each backend's marker."""

    checkpoint_id: str
    #: Backend name -> that backend's state checkpoint marker for this store.
    markers: dict[str, str]
    #: The marker file's mtime (epoch seconds): when the commit wrote it.
    written_at: float


def checkpoint_dir(store_dir: Path, checkpoint_id: str) -> Path:
    """The checkpoint dir of `store_dir` for one checkpoint: its sibling `<store_dir>-<checkpoint_id>`."""
    return store_dir.with_name(f"{store_dir.name}-{checkpoint_id}")


def _checkpoint_name(store_dir: Path) -> re.Pattern[str]:
    # Exactly two numeric parts after the store's name: store `a` must not take store `a-b`'s dirs, nor
    # (`a-b-<millis>-<nanos>` having three parts) store `a-1`'s.
    return re.compile(re.escape(store_dir.name) + r"-(\d+)-(\d+)")


def list_checkpoint_dirs(store_dir: Path) -> list[tuple[str, Path]]:
    """(checkpoint id, dir) of every checkpoint dir of `store_dir`, oldest first."""
    pattern = _checkpoint_name(store_dir)
    found: list[tuple[tuple[int, int], str, Path]] = []
    try:
        entries = list(store_dir.parent.iterdir())
    except FileNotFoundError:
        return []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            continue
        millis, nanos = match.groups()
        found.append(((int(millis), int(nanos)), f"{millis}-{nanos}", entry))
    found.sort(key=lambda item: item[0])
    return [(checkpoint_id, path) for _, checkpoint_id, path in found]


def create_checkpoint(engine: object, store_dir: Path, checkpoint_id: str) -> Path | None:
    """Have `engine` write its checkpoint dir for `checkpoint_id`; None for an engine without one (in-memory).

    For RocksDB this costs a memtable flush (none after the commit's store flush) plus one hard link per
    SST file: milliseconds, whatever the store's size.
    """
    if not isinstance(engine, Checkpointable):
        return None
    return engine.checkpoint(checkpoint_dir(store_dir, checkpoint_id))


def write_marker(dir: Path, checkpoint_id: str, markers: dict[str, str], store: str | None = None) -> None:
    """Atomically write `dir`/CHECKPOINT-V2 with the checkpoint id and each backend's marker.

    `dir` must exist: a marker alone in a new dir would pass for a checkpoint without any data. A disk
    without room raises `StoreDiskFullError` naming `store`, the store whose checkpoint dir `dir` is.
    """
    if not dir.is_dir():
        raise StoreError(
            f"cannot write {MARKER_FILE} into {dir}: no such checkpoint dir; the commit's checkpoint "
            "of this store was not created (an engine without checkpoints, or a failed snapshot)"
        )
    payload: dict[str, Any] = {
        "schema-version": MARKER_SCHEMA_VERSION,
        "checkpoint-id": checkpoint_id,
        "markers": dict(markers),
    }
    write_checked_json(dir / MARKER_FILE, payload, store)


def write_checked_json(target: Path, payload: dict[str, Any], store: str | None = None) -> None:
    """Atomically writes `payload` with a CRC32 of its canonical form: temp file, fsync, rename, dir fsync.

    A reader (`read_checked_json`) then sees the old file or the new one, never a torn one. A disk without
    room raises `StoreDiskFullError` naming `store` (the store the file belongs to) and `target`.
    """
    document = {**payload, "crc32": _crc32(payload)}
    tmp = target.with_name(f"{target.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()  # a partial write holds room that a full disk needs back
        raise no_room(store, target, "write", e) or StoreError(f"cannot write {target}: {e}") from e


def read_checked_json(path: Path) -> tuple[str, dict[str, Any] | None, float]:
    """(problem, payload, mtime) of a file `write_checked_json` wrote: payload None with the problem when
    it is missing, unreadable, not JSON or its checksum does not match."""
    try:
        text = path.read_text(encoding="utf-8")
        written_at = path.stat().st_mtime
    except FileNotFoundError:
        return "missing", None, 0.0
    except (OSError, UnicodeDecodeError) as e:
        return f"unreadable ({e})", None, 0.0
    try:
        document = json.loads(text)
    except ValueError as e:
        return f"not JSON ({e})", None, written_at
    if not isinstance(document, dict):
        return "not a JSON object", None, written_at
    checksum = document.pop("crc32", None)
    if checksum != _crc32(document):
        return "checksum mismatch (a torn or edited file)", None, written_at
    return "", document, written_at


def read_marker(dir: Path) -> StoreMarker | None:
    """The marker in `dir`, or None when it is missing, unreadable, corrupt or of an unknown version."""
    path = dir / MARKER_FILE
    problem, document, written_at = read_checked_json(path)
    marker = None if document is None else _parse_marker(document, written_at)
    if document is not None and marker is None:
        problem = _marker_problem(document)
    if marker is None:
        level = logging.DEBUG if problem == "missing" else logging.WARNING
        log.log(level, "ignoring checkpoint marker %s: %s", path, problem)
    return marker


def _marker_problem(document: dict[str, Any]) -> str:
    version = document.get("schema-version")
    if version != MARKER_SCHEMA_VERSION:
        return f"schema-version {version!r}, this Samsa reads {MARKER_SCHEMA_VERSION}"
    return "'checkpoint-id' must be a string and 'markers' an object mapping backend names to strings"


def _parse_marker(document: dict[str, Any], written_at: float) -> StoreMarker | None:
    if document.get("schema-version") != MARKER_SCHEMA_VERSION:
        return None
    checkpoint_id, markers = document.get("checkpoint-id"), document.get("markers")
    if not isinstance(checkpoint_id, str) or not isinstance(markers, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in markers.items()):
        return None
    return StoreMarker(checkpoint_id, markers, written_at)


def _crc32(payload: dict[str, Any]) -> int:
    # Over a canonical rendering, so the file's own layout (indentation, key order) does not matter.
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return zlib.crc32(canonical.encode("ascii"))


def is_stale(marker: StoreMarker | None, retention_ms: int, now: float | None = None) -> bool:
    """Whether local state is too old to catch up from the changelog (Samza's `isStaleStore`).

    Once older than the changelog's tombstone retention, the changelog may have dropped deletes made
    since, so replaying its tail would resurrect deleted keys. No marker counts as stale.
    """
    if marker is None:
        return True
    now = time.time() if now is None else now
    return (now - marker.written_at) * 1000 >= retention_ms


def delete_checkpoint_dirs(store_dir: Path, keep: Collection[str] = ()) -> None:
    """Delete the checkpoint dirs of `store_dir` except those of the ids in `keep`.

    Also removes what RocksDB leaves of a checkpoint cut short (`<dir>.tmp`). A dir vanishing meanwhile
    (another cleanup) is fine; any other failure raises `StoreError` naming the dir.
    """
    doomed = [path for checkpoint_id, path in list_checkpoint_dirs(store_dir) if checkpoint_id not in keep]
    leftover = re.compile(_checkpoint_name(store_dir).pattern + r"\.tmp")
    try:
        doomed += [p for p in store_dir.parent.iterdir() if leftover.fullmatch(p.name) and p.is_dir()]
    except FileNotFoundError:
        return
    for path in doomed:
        delete_checkpoint_dir(path)


def delete_checkpoint_dir(path: Path) -> None:
    """Deletes one checkpoint dir, its marker first: a dir half deleted never passes for a usable one."""
    log.debug("deleting checkpoint dir %s", path)
    try:
        (path / MARKER_FILE).unlink(missing_ok=True)
    except FileNotFoundError:
        return  # the dir itself is gone
    except OSError as e:
        raise StoreError(
            f"cannot delete checkpoint marker {path / MARKER_FILE}: {e}; remove it by hand"
        ) from e
    for _ in range(3):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            # Another cleanup removed part of it meanwhile: done if all of it is gone, else go again.
            if not path.exists():
                return
        except OSError as e:
            raise StoreError(f"cannot delete checkpoint dir {path}: {e}; remove it by hand") from e
    raise StoreError(f"cannot delete checkpoint dir {path}: its entries kept changing while deleting it")


def restore_store_dir(checkpoint_dir: Path, store_dir: Path) -> None:
    """Replace `store_dir` with a copy of `checkpoint_dir`, which stays in place.

    SST files (immutable) are hard-linked, the rest copied, so this is cheap; where hard links cannot be
    made (another filesystem) everything is copied. The copy is built in a side dir and renamed over the
    store dir, so a crash at any point leaves either the old store dir or the new one, and running this
    again completes it. The marker file is not copied: the live store moves on from the checkpoint.
    """
    if not checkpoint_dir.is_dir():
        raise StoreError(f"cannot restore {store_dir} from {checkpoint_dir}: no such checkpoint dir")
    staging = store_dir.with_name(store_dir.name + _RESTORING_SUFFIX)
    try:
        if staging.exists():
            shutil.rmtree(staging)
        _link_or_copy_tree(checkpoint_dir, staging)
        fsync_dir(staging)
        if store_dir.exists():
            shutil.rmtree(store_dir)
        os.rename(staging, store_dir)
        fsync_dir(store_dir.parent)
    except OSError as e:
        full = no_room(store_dir.name, store_dir, f"restore from checkpoint dir {checkpoint_dir}", e)
        raise full or StoreError(
            f"cannot restore store dir {store_dir} from checkpoint dir {checkpoint_dir}: {e}"
        ) from e


def _link_or_copy_tree(source: Path, dest: Path) -> None:
    dest.mkdir()
    can_link = True
    for entry in sorted(source.iterdir()):
        target = dest / entry.name
        if entry.name in (MARKER_FILE, f"{MARKER_FILE}.tmp"):
            continue
        if entry.is_dir():
            _link_or_copy_tree(entry, target)
            continue
        if can_link and entry.suffix == ".sst":
            try:
                os.link(entry, target)
                continue
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
                    raise
                log.info("cannot hard-link %s into %s (%s); copying instead", entry, dest, e)
                can_link = False
        _copy_durably(entry, target)


def _copy_durably(source: Path, dest: Path) -> None:
    shutil.copy2(source, dest)
    with open(dest, "rb") as copied:
        os.fsync(copied.fileno())


def fsync_dir(dir: Path) -> None:
    """fsync a directory, so that entries created or renamed in it survive a power loss."""
    # Makes a rename or a new entry in `dir` survive a power loss (POSIX only syncs the file's data).
    fd = os.open(dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
