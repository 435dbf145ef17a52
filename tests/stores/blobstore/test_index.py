"""The snapshot index's JSON form: round trips, versions, malformed and crafted documents."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.stores.blobstore.exceptions import IndexFormatError, UnsafeIndexError
from samsa.stores.blobstore.index import (
    SCHEMA_VERSION,
    DirIndex,
    FileBlob,
    FileIndex,
    FileMetadata,
    SnapshotIndex,
    SnapshotMetadata,
)


def file(name: str, *blobs: tuple[str, int], size: int = 10, crc: int = 7) -> FileIndex:
    return FileIndex(
        name,
        tuple(FileBlob(b, o) for b, o in blobs),
        FileMetadata(1_700_000_000_001, 1_700_000_000_002, size, 0o640),
        crc,
    )


def deep_index() -> SnapshotIndex:
    leaf = DirIndex(
        "leaf",
        files_present=(file("000042.sst", ("b-42a", 0), ("b-42b", 1 << 40), size=(1 << 40) + 5),),
        files_removed=(file("000041.sst", ("b-41", 0)),),
    )
    middle = DirIndex(
        "middle",
        files_present=(file("empty", size=0, crc=0),),
        subdirs_present=(leaf, DirIndex("empty-dir")),
        subdirs_removed=(DirIndex("old", files_present=(file("x", ("b-old-x", 0)),)),),
    )
    root = DirIndex(
        "",
        files_present=(file("CURRENT", ("b-current-2", 0), crc=0xFFFFFFFF),),
        files_removed=(file("CURRENT", ("b-current-1", 0)),),
        subdirs_present=(middle,),
    )
    return SnapshotIndex(
        creation_time_ms=1_700_000_000_123,
        metadata=SnapshotMetadata("1700000000000-123456", "job", "1", "Partition 0", "counts"),
        dir_index=root,
        prev_index_blob_id="prev-index",
    )


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(deep_index().to_bytes())
    return loaded


def parse(doc: dict[str, Any]) -> SnapshotIndex:
    return SnapshotIndex.from_bytes(json.dumps(doc).encode(), where="idx-1")


def test_round_trip_of_a_deep_index() -> None:
    index = deep_index()

    again = SnapshotIndex.from_bytes(index.to_bytes())

    assert again == index
    assert again.schema_version == SCHEMA_VERSION
    assert again.to_bytes() == index.to_bytes()
    assert set(again.dir_index.present_blobs()) == {"b-current-2", "b-42a", "b-42b"}
    assert set(again.dir_index.removed_blobs()) == {"b-current-1", "b-41", "b-old-x"}
    assert again.dir_index.stats() == (3, 10 + 0 + (1 << 40) + 5)


def test_round_trip_without_previous_index() -> None:
    index = SnapshotIndex(1, SnapshotMetadata("1-1", "j", "1", "t", "s"), DirIndex(""))

    again = SnapshotIndex.from_bytes(index.to_bytes())

    assert again == index
    assert again.prev_index_blob_id is None


def test_blobs_are_read_in_offset_order() -> None:
    doc = document()
    leaf = doc["dir-index"]["sub-dirs-present"][0]["sub-dirs-present"][0]
    leaf["files-present"][0]["blobs"].reverse()

    blobs = parse(doc).dir_index.subdirs_present[0].subdirs_present[0].files_present[0].blobs

    assert [b.offset for b in blobs] == [0, 1 << 40]


@pytest.mark.parametrize("version", [0, 2, 99, "1", None])
def test_unknown_schema_version_is_refused(version: object) -> None:
    doc = document()
    doc["schema-version"] = version

    with pytest.raises(IndexFormatError, match=f"schema-version {version!r}") as info:
        parse(doc)
    assert "idx-1" in str(info.value)


def test_missing_schema_version_is_refused() -> None:
    doc = document()
    del doc["schema-version"]

    with pytest.raises(IndexFormatError, match="schema-version None"):
        parse(doc)


@pytest.mark.parametrize("data", [b"", b"not json", b"\xff\xfe", b"[1, 2]", b'"index"'])
def test_not_a_json_object_is_refused(data: bytes) -> None:
    with pytest.raises(IndexFormatError, match="idx-9"):
        SnapshotIndex.from_bytes(data, where="idx-9")


@pytest.mark.parametrize(
    "path",
    [
        ("snapshot-metadata", "store-name"),
        ("creation-time-millis",),
        ("dir-index",),
        ("dir-index", "files-present", 0, "checksum"),
        ("dir-index", "files-present", 0, "file-metadata", "size"),
        ("dir-index", "files-present", 0, "blobs", 0, "offset"),
        ("dir-index", "sub-dirs-present", 0, "dir-name"),
        ("dir-index", "sub-dirs-removed"),
    ],
    ids=lambda p: "/".join(map(str, p)),
)
def test_missing_field_is_refused(path: tuple[Any, ...]) -> None:
    doc = document()
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]

    with pytest.raises(IndexFormatError, match=f"malformed.*{path[-1]}"):
        parse(doc)


def test_wrong_field_type_is_refused() -> None:
    doc = document()
    doc["dir-index"]["files-present"][0]["file-metadata"]["size"] = "ten"

    with pytest.raises(IndexFormatError, match="malformed"):
        parse(doc)


def test_unknown_fields_are_ignored() -> None:
    doc = document()
    doc["written-by"] = "samsa 9"
    doc["snapshot-metadata"]["region"] = "eu"
    doc["dir-index"]["owner"] = "x"
    doc["dir-index"]["files-present"][0]["xattrs"] = {"a": 1}
    doc["dir-index"]["files-present"][0]["blobs"][0]["etag"] = "e"

    assert parse(doc) == deep_index()


def test_root_dir_must_be_unnamed() -> None:
    doc = document()
    doc["dir-index"]["dir-name"] = "root"

    with pytest.raises(IndexFormatError, match="root"):
        parse(doc)


CRAFTED = ["../x", "/etc/x", "a/b", "..", "", ".", "a\\b", "a\x00b"]


@pytest.mark.parametrize("name", CRAFTED)
@pytest.mark.parametrize(
    "where",
    [
        ("dir-index", "files-present", 0, "file-name"),
        ("dir-index", "files-removed", 0, "file-name"),
        ("dir-index", "sub-dirs-present", 0, "dir-name"),
        ("dir-index", "sub-dirs-present", 0, "sub-dirs-present", 0, "files-present", 0, "file-name"),
        ("dir-index", "sub-dirs-present", 0, "sub-dirs-present", 0, "dir-name"),
        ("dir-index", "sub-dirs-present", 0, "sub-dirs-removed", 0, "dir-name"),
        ("dir-index", "sub-dirs-present", 0, "sub-dirs-removed", 0, "files-present", 0, "file-name"),
    ],
    ids=["file", "removed-file", "dir", "nested-file", "nested-dir", "removed-dir", "file-in-removed-dir"],
)
def test_crafted_names_are_refused(name: str, where: tuple[Any, ...]) -> None:
    doc = document()
    parent: Any = doc
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = name

    with pytest.raises(UnsafeIndexError, match="idx-1") as info:
        parse(doc)
    assert repr(name) in str(info.value)


def test_blob_both_present_and_removed_is_refused() -> None:
    doc = document()
    removed = doc["dir-index"]["files-removed"][0]
    removed["blobs"][0]["blob-id"] = doc["dir-index"]["files-present"][0]["blobs"][0]["blob-id"]

    with pytest.raises(IndexFormatError, match="b-current-2"):
        parse(doc)
