"""The snapshot index: what files (and blobs) make up one store's snapshot at one commit, as a versioned blob.

A `SnapshotIndex` is necessary and sufficient to rebuild a store dir: its `DirIndex` tree lists every file
present (with its blobs, size, times, permission bits and CRC32C) and what the previous snapshot had that
this one dropped (`*_removed`: deleted from the blob store once this snapshot's checkpoint is durable).
Serialized as JSON with an explicit `schema-version`; unknown fields are ignored (forward compatible), an
unknown version is an `IndexFormatError`. The metadata records the partition counts of the job's grouped
inputs at the snapshot (optional: an index written before they were recorded has none).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from samsa.stores.blobstore.exceptions import IndexFormatError, UnsafeIndexError
from samsa.stores.blobstore.safety import check_name

SCHEMA_VERSION = 1
ROOT_DIR_NAME = ""


@dataclass(frozen=True, slots=True)
class FileBlob:
    """One chunk of a file: the blob holding it and its 64-bit offset in the file."""

    blob_id: str
    offset: int


@dataclass(frozen=True, slots=True)
class FileMetadata:
    """File attributes at upload: epoch-millis times, size in bytes, permission bits (`st_mode & 0o7777`)."""

    creation_time_ms: int
    last_modified_ms: int
    size: int
    permissions: int


@dataclass(frozen=True, slots=True)
class FileIndex:
    """A file of the snapshot: its blobs in offset order (none for an empty file) and its CRC32C."""

    name: str
    blobs: tuple[FileBlob, ...]
    metadata: FileMetadata
    checksum: int

    @property
    def size(self) -> int:
        return self.metadata.size


@dataclass(frozen=True, slots=True)
class DirIndex:
    """A directory of the snapshot; a present sub-dir may carry its own removed entries."""

    name: str
    files_present: tuple[FileIndex, ...] = ()
    files_removed: tuple[FileIndex, ...] = ()
    subdirs_present: tuple[DirIndex, ...] = ()
    subdirs_removed: tuple[DirIndex, ...] = ()

    def __post_init__(self) -> None:
        present = {blob.blob_id for f in self.files_present for blob in f.blobs}
        removed = {blob.blob_id for f in self.files_removed for blob in f.blobs}
        both = present & removed
        if both:
            raise IndexFormatError(
                f"dir {self.name!r} of a snapshot index lists blob(s) {sorted(both)[:3]} both present and "
                "removed: the index is corrupt"
            )

    def present_blobs(self) -> Iterator[str]:
        """Every blob of every present file, recursively."""
        for f in self.files_present:
            yield from (b.blob_id for b in f.blobs)
        for sub in self.subdirs_present:
            yield from sub.present_blobs()

    def removed_blobs(self) -> Iterator[str]:
        """Blobs this snapshot dropped: removed files, everything in removed sub-dirs, recursively."""
        for f in self.files_removed:
            yield from (b.blob_id for b in f.blobs)
        for sub in self.subdirs_removed:
            yield from sub.present_blobs()
            yield from sub.removed_blobs()
        for sub in self.subdirs_present:
            yield from sub.removed_blobs()

    def stats(self) -> tuple[int, int]:
        """(files, bytes) present, recursively."""
        files = len(self.files_present)
        size = sum(f.size for f in self.files_present)
        for sub in self.subdirs_present:
            sub_files, sub_bytes = sub.stats()
            files, size = files + sub_files, size + sub_bytes
        return files, size


@dataclass(frozen=True, slots=True)
class SnapshotMetadata:
    """Which store of which task of which job, at which commit, under which input partition counts."""

    checkpoint_id: str
    job_name: str
    job_id: str
    task_name: str
    store_name: str
    #: `system.stream` -> partition count of each input grouped into the job's tasks when the snapshot was
    #: taken (a key's task follows from them); None: not recorded (an index written by an older Samsa).
    input_partitions: dict[str, int] | None = None


@dataclass(frozen=True, slots=True)
class SnapshotIndex:
    """The index blob of one store at one commit; `prev_index_blob_id` is deleted at this one's cleanup."""

    creation_time_ms: int
    metadata: SnapshotMetadata
    dir_index: DirIndex
    prev_index_blob_id: str | None = None
    schema_version: int = field(default=SCHEMA_VERSION)

    def to_bytes(self) -> bytes:
        meta: dict[str, Any] = {
            "checkpoint-id": self.metadata.checkpoint_id,
            "job-name": self.metadata.job_name,
            "job-id": self.metadata.job_id,
            "task-name": self.metadata.task_name,
            "store-name": self.metadata.store_name,
        }
        if self.metadata.input_partitions is not None:
            # An optional field, not a new schema version: an older Samsa reading this index ignores it.
            meta["input-partition-counts"] = dict(sorted(self.metadata.input_partitions.items()))
        document = {
            "schema-version": self.schema_version,
            "creation-time-millis": self.creation_time_ms,
            "snapshot-metadata": meta,
            "dir-index": _dir_to_json(self.dir_index),
            "prev-snapshot-index-blob-id": self.prev_index_blob_id,
        }
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "") -> SnapshotIndex:
        """Parses an index blob; `where` (the blob id) goes into error messages."""
        origin = f"snapshot index {where}" if where else "snapshot index"
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise IndexFormatError(f"{origin} is not JSON ({e}); first bytes: {data[:80]!r}") from e
        if not isinstance(document, dict):
            raise IndexFormatError(f"{origin} is not a JSON object; first bytes: {data[:80]!r}")
        version = document.get("schema-version")
        if version != SCHEMA_VERSION:
            raise IndexFormatError(
                f"{origin} has schema-version {version!r}; this Samsa reads version {SCHEMA_VERSION}: "
                "it was written by another Samsa release - run that release, or restore from the changelog"
            )
        try:
            meta = document["snapshot-metadata"]
            index = cls(
                creation_time_ms=int(document["creation-time-millis"]),
                metadata=SnapshotMetadata(
                    str(meta["checkpoint-id"]),
                    str(meta["job-name"]),
                    str(meta["job-id"]),
                    str(meta["task-name"]),
                    str(meta["store-name"]),
                    _input_partitions(meta.get("input-partition-counts")),
                ),
                dir_index=_dir_from_json(document["dir-index"], root=True),
                prev_index_blob_id=_optional_str(document.get("prev-snapshot-index-blob-id")),
            )
        except UnsafeIndexError as e:
            raise UnsafeIndexError(f"{origin}: {e}") from e
        except (KeyError, TypeError, ValueError) as e:
            raise IndexFormatError(f"{origin} is malformed: missing or invalid field {e}") from e
        return index


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _input_partitions(value: Any) -> dict[str, int] | None:
    # Absent from an index written before the counts were recorded: accepted as before, unchecked.
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"'input-partition-counts' is not an object: {value!r}")
    return {str(stream): int(count) for stream, count in value.items()}


def _file_to_json(f: FileIndex) -> dict[str, Any]:
    m = f.metadata
    return {
        "file-name": f.name,
        "blobs": [{"blob-id": b.blob_id, "offset": b.offset} for b in f.blobs],
        "file-metadata": {
            "creation-time-millis": m.creation_time_ms,
            "last-modified-time-millis": m.last_modified_ms,
            "size": m.size,
            "permissions": m.permissions,
        },
        "checksum": f.checksum,
    }


def _file_from_json(d: dict[str, Any]) -> FileIndex:
    m = d["file-metadata"]
    blobs = tuple(FileBlob(str(b["blob-id"]), int(b["offset"])) for b in d["blobs"])
    return FileIndex(
        check_name(str(d["file-name"]), "file"),
        tuple(sorted(blobs, key=lambda b: b.offset)),
        FileMetadata(
            int(m["creation-time-millis"]),
            int(m["last-modified-time-millis"]),
            int(m["size"]),
            int(m["permissions"]),
        ),
        int(d["checksum"]),
    )


def _dir_to_json(d: DirIndex) -> dict[str, Any]:
    return {
        "dir-name": d.name,
        "files-present": [_file_to_json(f) for f in d.files_present],
        "files-removed": [_file_to_json(f) for f in d.files_removed],
        "sub-dirs-present": [_dir_to_json(s) for s in d.subdirs_present],
        "sub-dirs-removed": [_dir_to_json(s) for s in d.subdirs_removed],
    }


def _dir_from_json(d: dict[str, Any], root: bool = False) -> DirIndex:
    name = str(d["dir-name"])
    if root:
        if name != ROOT_DIR_NAME:
            raise IndexFormatError(f"the root dir of a snapshot index must be named '', not {name!r}")
    else:
        check_name(name, "dir")
    return DirIndex(
        name,
        tuple(_file_from_json(f) for f in d["files-present"]),
        tuple(_file_from_json(f) for f in d["files-removed"]),
        tuple(_dir_from_json(s) for s in d["sub-dirs-present"]),
        tuple(_dir_from_json(s) for s in d["sub-dirs-removed"]),
    )
