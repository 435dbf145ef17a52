"""The diff of a local checkpoint dir against a snapshot's DirIndex (Samza's TestDirDiffUtil table)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from samsa.stores.blobstore import checksum
from samsa.stores.blobstore.diff import (
    DEFAULT_IGNORE,
    SMALL_FILE_BYTES,
    DirDiff,
    dir_diff,
    same_dir,
    same_file,
)
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.index import DirIndex, FileBlob, FileIndex, FileMetadata
from samsa.stores.checkpoint_dirs import MARKER_FILE

DIR = object()
"""A tree value: an (empty) dir."""

BIG = SMALL_FILE_BYTES + 4096


@dataclass(frozen=True)
class Big:
    """A sparse file of BIG bytes whose first bytes are `head` (cheap to create, too big to checksum)."""

    head: bytes

    def content(self) -> bytes:
        return self.head + bytes(BIG - len(self.head))


@dataclass(frozen=True)
class Mode:
    """A file with explicit permission bits."""

    data: bytes
    mode: int


Tree = dict[str, object]


def content_of(value: object) -> tuple[bytes, int]:
    if isinstance(value, Mode):
        return value.data, value.mode
    if isinstance(value, Big):
        return value.content(), 0o644
    assert isinstance(value, bytes)
    return value, 0o644


def make_local(root: Path, tree: Tree) -> Path:
    """Writes `tree` ({'a/b': bytes | Mode | Big | DIR}) under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, value in tree.items():
        path = root / rel
        if value is DIR:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, Big):
            with open(path, "wb") as f:
                f.write(value.head)
                f.truncate(BIG)
        else:
            path.write_bytes(content_of(value)[0])
        os.chmod(path, content_of(value)[1])
    return root


def make_index(tree: Tree, name: str = "") -> DirIndex:
    """The DirIndex an upload of `tree` would have produced (fake blob ids)."""
    files: list[FileIndex] = []
    dirs: dict[str, Tree] = {}
    for rel, value in tree.items():
        head, _, rest = rel.partition("/")
        if rest or value is DIR:
            sub = dirs.setdefault(head, {})
            if rest:
                sub[rest] = value
            continue
        data, mode = content_of(value)
        blobs = (FileBlob(f"blob:{name}/{rel}", 0),) if data else ()
        files.append(FileIndex(rel, blobs, FileMetadata(1, 2, len(data), mode), checksum.extend(0, data)))
    return DirIndex(name, tuple(files), subdirs_present=tuple(make_index(t, n) for n, t in dirs.items()))


def summary(diff: DirDiff, prefix: str = "") -> set[str]:
    """`+path` added, `=path` retained, `-path` removed; dirs end in `/` (removed dirs not expanded)."""
    out = {f"+{prefix}{p.name}" for p in diff.files_added}
    out |= {f"={prefix}{f.name}" for f in diff.files_retained}
    out |= {f"-{prefix}{f.name}" for f in diff.files_removed}
    for sub in diff.subdirs_added:
        out |= {f"+{prefix}{sub.name}/"} | summary(sub, f"{prefix}{sub.name}/")
    for sub in diff.subdirs_retained:
        out |= {f"={prefix}{sub.name}/"} | summary(sub, f"{prefix}{sub.name}/")
    out |= {f"-{prefix}{d.name}/" for d in diff.subdirs_removed}
    return out


CASES: list[tuple[str, Tree, Tree, set[str], bool]] = [
    # (id, local tree, remote tree, expected summary, verify_large)
    ("both-empty", {}, {}, set(), False),
    ("new-file", {"a": b"x"}, {}, {"+a"}, False),
    ("new-empty-file", {"e": b""}, {}, {"+e"}, False),
    ("unchanged-file", {"a": b"x"}, {"a": b"x"}, {"=a"}, False),
    ("unchanged-empty-file", {"e": b""}, {"e": b""}, {"=e"}, False),
    ("removed-file", {}, {"a": b"x"}, {"-a"}, False),
    ("changed-content-same-size", {"a": b"xy"}, {"a": b"yx"}, {"+a", "-a"}, False),
    ("changed-size", {"a": b"xyz"}, {"a": b"xy"}, {"+a", "-a"}, False),
    ("changed-permissions", {"a": Mode(b"x", 0o600)}, {"a": Mode(b"x", 0o644)}, {"+a", "-a"}, False),
    ("changed-execute-bit", {"a": Mode(b"x", 0o755)}, {"a": Mode(b"x", 0o655)}, {"+a", "-a"}, False),
    (
        "add-keep-remove",
        {"keep": b"k", "new": b"n", "CURRENT": b"MANIFEST-2"},
        {"keep": b"k", "gone": b"g", "CURRENT": b"MANIFEST-1"},
        {"=keep", "+new", "-gone", "+CURRENT", "-CURRENT"},
        False,
    ),
    ("new-empty-dir", {"d": DIR}, {}, {"+d/"}, False),
    (
        "new-nested-dirs",
        {"d/x": b"1", "d/e/y": b"2", "d/f": DIR},
        {},
        {"+d/", "+d/x", "+d/e/", "+d/e/y", "+d/f/"},
        False,
    ),
    ("retained-empty-dir", {"d": DIR}, {"d": DIR}, {"=d/"}, False),
    ("retained-dir-unchanged-file", {"d/x": b"1"}, {"d/x": b"1"}, {"=d/", "=d/x"}, False),
    ("removed-dir", {}, {"d/x": b"1"}, {"-d/"}, False),
    ("removed-nested-dirs", {"a": b"1"}, {"a": b"1", "d/e/x": b"1", "d/y": b"2"}, {"=a", "-d/"}, False),
    (
        "changed-file-in-nested-dir",
        {"d/e/y": b"new", "d/e/z": b"z"},
        {"d/e/y": b"old", "d/e/z": b"z"},
        {"=d/", "=d/e/", "+d/e/y", "-d/e/y", "=d/e/z"},
        False,
    ),
    (
        "dir-added-in-retained-dir",
        {"d/n/x": b"1", "d/k": b"k"},
        {"d/k": b"k"},
        {"=d/", "=d/k", "+d/n/", "+d/n/x"},
        False,
    ),
    ("file-replaced-by-dir", {"x/y": b"1"}, {"x": b"1"}, {"-x", "+x/", "+x/y"}, False),
    ("dir-replaced-by-file", {"x": b"1"}, {"x/y": b"1"}, {"+x", "-x/"}, False),
    ("marker-ignored-at-root", {MARKER_FILE: b"{}", MARKER_FILE + ".tmp": b"{"}, {}, set(), False),
    (
        "marker-ignored-nested",
        {f"d/{MARKER_FILE}": b"{}", "d/x": b"1"},
        {"d/x": b"1"},
        {"=d/", "=d/x"},
        False,
    ),
    ("marker-in-remote-ignored", {"a": b"1"}, {"a": b"1", MARKER_FILE: b"old"}, {"=a"}, False),
    ("large-same-size-other-content", {"big": Big(b"new")}, {"big": Big(b"old")}, {"=big"}, False),
    ("large-other-content-verified", {"big": Big(b"new")}, {"big": Big(b"old")}, {"+big", "-big"}, True),
    ("large-same-content-verified", {"big": Big(b"same")}, {"big": Big(b"same")}, {"=big"}, True),
    (
        "large-in-nested-dir-verified",
        {"d/e/big": Big(b"new")},
        {"d/e/big": Big(b"old")},
        {"=d/", "=d/e/", "+d/e/big", "-d/e/big"},
        True,
    ),
    ("large-size-changed", {"big": Big(b"x")}, {"big": b"x" * 10}, {"+big", "-big"}, False),
]


@pytest.mark.parametrize(
    ("local", "remote", "expected", "verify_large"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_dir_diff(tmp_path: Path, local: Tree, remote: Tree, expected: set[str], verify_large: bool) -> None:
    root = make_local(tmp_path / "checkpoint", local)
    index = make_index(remote)

    diff = dir_diff(root, index, verify_large=verify_large)

    assert summary(diff) == expected
    assert diff.name == ""
    # Unchanged means nothing added or removed at any depth; the same rule decides `same_dir`.
    unchanged = not any(entry[0] in "+-" for entry in expected)
    assert same_dir(root, index, verify_large=verify_large) is unchanged


def test_ignore_is_configurable(tmp_path: Path) -> None:
    root = make_local(tmp_path / "c", {"OFFSET": b"1", "d/OFFSET": b"2", "a": b"a", MARKER_FILE: b"m"})
    index = make_index({"a": b"a"})

    assert summary(dir_diff(root, index, ignore=frozenset({"OFFSET"}))) == {"=a", f"+{MARKER_FILE}", "+d/"}
    assert summary(dir_diff(root, index, ignore=DEFAULT_IGNORE | {"OFFSET"})) == {"=a", "+d/"}


def test_symlink_in_local_dir_is_refused(tmp_path: Path) -> None:
    root = make_local(tmp_path / "c", {"d/x": b"1"})
    (root / "d" / "link").symlink_to(root / "d" / "x")

    with pytest.raises(BlobStoreError, match="link"):
        dir_diff(root, make_index({"d/x": b"1"}))
    with pytest.raises(BlobStoreError, match=str(root / "d" / "link")):
        dir_diff(root, DirIndex(""))  # inside an added dir too
    assert same_dir(root, make_index({"d/x": b"1"})) is False


def test_symlink_to_dir_is_refused(tmp_path: Path) -> None:
    root = make_local(tmp_path / "c", {"a": b"1"})
    (root / "d").symlink_to(tmp_path)

    with pytest.raises(BlobStoreError, match="is not a regular file or a dir"):
        dir_diff(root, make_index({"a": b"1"}))


def test_fifo_is_refused(tmp_path: Path) -> None:
    root = make_local(tmp_path / "c", {})
    os.mkfifo(root / "pipe")

    with pytest.raises(BlobStoreError, match="pipe"):
        dir_diff(root, DirIndex(""))


def test_same_dir_of_missing_dir_is_false(tmp_path: Path) -> None:
    assert same_dir(tmp_path / "missing", DirIndex("")) is False


def test_same_file_ignores_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "a"
    path.write_bytes(b"abc")
    os.chmod(path, 0o640)
    remote = FileIndex("a", (), FileMetadata(0, 0, 3, 0o640), checksum.extend(0, b"abc"))
    os.utime(path, (1, 1))

    assert same_file(path, remote)
    assert not same_file(path, FileIndex("b", (), remote.metadata, remote.checksum))
    assert not same_file(path, FileIndex("a", (), remote.metadata, remote.checksum ^ 1))


def test_same_file_large_checks_content_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "big"
    make_local(tmp_path, {"big": Big(b"new")})
    remote = make_index({"big": Big(b"old")}).files_present[0]

    assert same_file(path, remote)
    assert not same_file(path, remote, verify_large=True)


def test_diff_rejects_a_name_both_added_and_retained() -> None:
    kept = make_index({"a": b"1"}).files_present[0]

    with pytest.raises(BlobStoreError, match="both added and retained"):
        DirDiff("", files_added=(Path("/x/a"),), files_retained=(kept,))
    with pytest.raises(BlobStoreError, match="both retained and removed"):
        DirDiff("", files_retained=(kept,), files_removed=(kept,))
    with pytest.raises(BlobStoreError, match="dir"):
        DirDiff("", subdirs_retained=(DirDiff("d"),), subdirs_removed=(DirIndex("d"),))
    # Added and removed under one name is a changed file.
    assert DirDiff("", files_added=(Path("/x/a"),), files_removed=(kept,)).files_removed == (kept,)


def test_stats_counts_files_and_bytes(tmp_path: Path) -> None:
    root = make_local(tmp_path / "c", {"keep": b"kk", "new": b"nnn", "d/x": b"xxxx", "e/y": b"y"})
    index = make_index({"keep": b"kk", "e/y": b"y", "gone": b"g"})

    stats = dir_diff(root, index).stats()

    assert (stats.files_to_upload, stats.bytes_to_upload) == (2, 7)
    assert (stats.files_retained, stats.bytes_retained) == (2, 3)
