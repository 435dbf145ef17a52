"""What changed between a local checkpoint dir and a snapshot's `DirIndex`: files to upload, keep and drop.

Samza's `DirDiffUtil`: names are compared over the union of both sides, level by level. A file is the
same when name, size and permission bits match and, for small files, the CRC32C too: small files
(RocksDB's CURRENT, MANIFEST, OPTIONS, Samsa's offset files) change in place, while large ones (SSTs) are
written once, so reading them at every commit would cost a full read of the store for nothing. Timestamps
are ignored: a restored file has new ones and must still count as the same.
"""

from __future__ import annotations

import os
import stat as st
from dataclasses import dataclass
from pathlib import Path

from samsa.stores.blobstore import checksum
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.index import DirIndex, FileIndex
from samsa.stores.checkpoint_dirs import MARKER_FILE

SMALL_FILE_BYTES = 1 << 20
"""Files up to this size are compared by content (CRC32C); larger ones only when asked to."""

DEFAULT_IGNORE = frozenset({MARKER_FILE, MARKER_FILE + ".tmp"})
"""Written into a checkpoint dir after its upload, so never part of a snapshot."""


@dataclass(frozen=True, slots=True)
class DiffStats:
    """How much of a snapshot an upload sends and how much it reuses from the previous one."""

    files_to_upload: int = 0
    bytes_to_upload: int = 0
    files_retained: int = 0
    bytes_retained: int = 0

    def __add__(self, other: DiffStats) -> DiffStats:
        return DiffStats(
            self.files_to_upload + other.files_to_upload,
            self.bytes_to_upload + other.bytes_to_upload,
            self.files_retained + other.files_retained,
            self.bytes_retained + other.bytes_retained,
        )


@dataclass(frozen=True)
class DirDiff:
    """One dir of a diff; a name can be both added and removed (a changed file, uploaded again)."""

    name: str
    #: Local files to upload.
    files_added: tuple[Path, ...] = ()
    #: Files of the previous snapshot that are unchanged: their blobs are reused.
    files_retained: tuple[FileIndex, ...] = ()
    #: Files of the previous snapshot that are gone or changed: their blobs are deleted after the commit.
    files_removed: tuple[FileIndex, ...] = ()
    #: New local sub-dirs: everything in them is added.
    subdirs_added: tuple[DirDiff, ...] = ()
    #: Sub-dirs on both sides, diffed recursively.
    subdirs_retained: tuple[DirDiff, ...] = ()
    #: Sub-dirs of the previous snapshot that are gone: everything in them is removed.
    subdirs_removed: tuple[DirIndex, ...] = ()

    def __post_init__(self) -> None:
        retained = {f.name for f in self.files_retained}
        _refuse_overlap(self.name, "file", "added", {p.name for p in self.files_added}, "retained", retained)
        _refuse_overlap(
            self.name, "file", "retained", retained, "removed", {f.name for f in self.files_removed}
        )
        kept = {d.name for d in self.subdirs_retained}
        _refuse_overlap(self.name, "dir", "added", {d.name for d in self.subdirs_added}, "retained", kept)
        _refuse_overlap(self.name, "dir", "retained", kept, "removed", {d.name for d in self.subdirs_removed})

    def is_empty(self) -> bool:
        """Nothing added or removed at any depth: the local dir holds exactly the snapshot's files."""
        return not (
            self.files_added or self.files_removed or self.subdirs_added or self.subdirs_removed
        ) and all(sub.is_empty() for sub in self.subdirs_retained)

    def stats(self) -> DiffStats:
        """Files and bytes to upload (sizes read from the local files now) and retained, recursively."""
        total = DiffStats(
            len(self.files_added),
            sum(p.stat().st_size for p in self.files_added),
            len(self.files_retained),
            sum(f.size for f in self.files_retained),
        )
        for sub in self.subdirs_added + self.subdirs_retained:
            total += sub.stats()
        return total


def _refuse_overlap(where: str, kind: str, a: str, names_a: set[str], b: str, names_b: set[str]) -> None:
    both = names_a & names_b
    if both:
        raise BlobStoreError(
            f"a dir diff of dir {where!r} lists {kind}(s) {sorted(both)[:3]} as both {a} and {b}: "
            "this is a bug in the diff's builder"
        )


def same_file(
    local: Path, remote: FileIndex, stat: os.stat_result | None = None, verify_large: bool = False
) -> bool:
    """Whether `local` holds the content `remote` describes (name, size, mode bits, and CRC32C when read)."""
    if stat is None:
        stat = os.lstat(local)
    if local.name != remote.name or stat.st_size != remote.size:
        return False
    if st.S_IMODE(stat.st_mode) & 0o777 != remote.metadata.permissions & 0o777:
        return False
    if stat.st_size > SMALL_FILE_BYTES and not verify_large:
        return True
    return checksum.file_crc(local) == remote.checksum


def dir_diff(
    local_dir: Path, remote: DirIndex, ignore: frozenset[str] = DEFAULT_IGNORE, verify_large: bool = False
) -> DirDiff:
    """The diff that turns snapshot `remote` into the content of `local_dir` (names in `ignore` skipped).

    Raises `BlobStoreError` for an entry that is neither a regular file nor a dir (a link, a socket):
    a snapshot holds only those.
    """
    return _diff(local_dir, remote, remote.name, ignore, verify_large)


def same_dir(
    local_dir: Path, remote: DirIndex, ignore: frozenset[str] = DEFAULT_IGNORE, verify_large: bool = False
) -> bool:
    """Whether `local_dir` holds exactly the files of `remote` (names in `ignore` aside), at every depth.

    False, not an error, when `local_dir` is missing or holds an entry a snapshot cannot (a link): such a
    dir cannot stand in for the snapshot.
    """
    try:
        return dir_diff(local_dir, remote, ignore, verify_large).is_empty()
    except (FileNotFoundError, NotADirectoryError, _NotRegularError):
        return False


class _NotRegularError(BlobStoreError):
    def __init__(self, path: Path, mode: int) -> None:
        super().__init__(
            f"{path} is not a regular file or a dir (mode {st.filemode(mode)}): a store snapshot holds only "
            "those - remove it from the store's checkpoint dir (a store engine never writes one)"
        )


def _scan(local_dir: Path, ignore: frozenset[str]) -> tuple[dict[str, os.stat_result], dict[str, Path]]:
    """(regular files by name with their stat, sub-dirs by name) of `local_dir`, without `ignore`."""
    files: dict[str, os.stat_result] = {}
    dirs: dict[str, Path] = {}
    with os.scandir(local_dir) as entries:
        for entry in entries:
            if entry.name in ignore:
                continue
            stat = entry.stat(follow_symlinks=False)
            if st.S_ISREG(stat.st_mode):
                files[entry.name] = stat
            elif st.S_ISDIR(stat.st_mode):
                dirs[entry.name] = Path(entry.path)
            else:
                raise _NotRegularError(Path(entry.path), stat.st_mode)
    return files, dirs


def _diff(
    local_dir: Path, remote: DirIndex, name: str, ignore: frozenset[str], verify_large: bool
) -> DirDiff:
    files, dirs = _scan(local_dir, ignore)
    remote_files = {f.name: f for f in remote.files_present if f.name not in ignore}
    remote_dirs = {d.name: d for d in remote.subdirs_present if d.name not in ignore}

    added: list[Path] = []
    retained: list[FileIndex] = []
    removed: list[FileIndex] = []
    for file_name in sorted(files.keys() | remote_files.keys()):
        stat, old = files.get(file_name), remote_files.get(file_name)
        path = local_dir / file_name
        if stat is not None and old is not None and same_file(path, old, stat, verify_large):
            retained.append(old)
            continue
        if stat is not None:
            added.append(path)
        if old is not None:
            removed.append(old)

    return DirDiff(
        name=name,
        files_added=tuple(added),
        files_retained=tuple(retained),
        files_removed=tuple(removed),
        subdirs_added=tuple(_all_added(dirs[d], d, ignore) for d in sorted(dirs.keys() - remote_dirs.keys())),
        subdirs_retained=tuple(
            _diff(dirs[d], remote_dirs[d], d, ignore, verify_large)
            for d in sorted(dirs.keys() & remote_dirs.keys())
        ),
        subdirs_removed=tuple(remote_dirs[d] for d in sorted(remote_dirs.keys() - dirs.keys())),
    )


def _all_added(local_dir: Path, name: str, ignore: frozenset[str]) -> DirDiff:
    files, dirs = _scan(local_dir, ignore)
    return DirDiff(
        name=name,
        files_added=tuple(local_dir / f for f in sorted(files)),
        subdirs_added=tuple(_all_added(dirs[d], d, ignore) for d in sorted(dirs)),
    )
