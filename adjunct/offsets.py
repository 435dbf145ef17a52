"""The offsets file of a persistent adjunct store: the next offset of its stream, written at each flush,
with a mark of the last record read (to tell, at a restart, that the topic is still the one it read)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.kafka.record_marks import RecordMark
from samsa.stores.checkpoint_dirs import read_checked_json, write_checked_json
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)

OFFSETS_FILE = "ADJUNCT-OFFSETS"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class StoredOffsets:
    """What a store's offsets file says: the next offset to read per partition, when it was written, and
    the mark of the last record read (before that offset) of the partitions it has one of."""

    offsets: dict[SystemStreamPartition, int]
    written_at: float  # epoch seconds (the file's mtime)
    marks: dict[SystemStreamPartition, RecordMark] = field(default_factory=dict)
    #: The settings the store's rows were built with (`samsa.adjunct.build`); None in a file of an older
    #: Samsa, which did not record them.
    build: dict[str, object] | None = None


def _name(ssp: SystemStreamPartition) -> str:
    return f"{ssp.system}.{ssp.stream}#{ssp.partition}"


def write_offsets(
    store_dir: Path,
    offsets: dict[SystemStreamPartition, int],
    marks: dict[SystemStreamPartition, RecordMark] | None = None,
    build: Mapping[str, object] | None = None,
) -> None:
    """Records, after the store was flushed, the next offset of each partition feeding it, the marks of
    the records just before them, and the settings its rows were built with (`build`)."""
    payload: dict[str, Any] = {
        "schema-version": SCHEMA_VERSION,
        "offsets": {_name(ssp): offset for ssp, offset in sorted(offsets.items())},
    }
    if marks:
        payload["last-records"] = {_name(ssp): mark.to_json() for ssp, mark in sorted(marks.items())}
    if build is not None:
        # An added field, not a new schema version: an older Samsa still reads the offsets (as before).
        payload["build"] = dict(build)
    write_checked_json(store_dir / OFFSETS_FILE, payload, store=store_dir.name)


def touch_offsets(store_dir: Path) -> None:
    """Marks the store's offsets file, if it has one, as vouched for now (its mtime, the store's age at a
    restart) without rewriting it: the offsets it holds are still the store's."""
    # No fsync: a refresh lost to a power cut only makes the store look older, so at worst it is rebuilt.
    with contextlib.suppress(FileNotFoundError):
        os.utime(store_dir / OFFSETS_FILE)


def read_offsets(store_dir: Path, ssps: list[SystemStreamPartition]) -> StoredOffsets | None:
    """The offsets of `ssps` in the store's file; None when the file is missing, corrupt, of another
    version, or lacks one of them (the store then counts as not valid)."""
    path = store_dir / OFFSETS_FILE
    problem, document, written_at = read_checked_json(path)
    if document is not None and document.get("schema-version") != SCHEMA_VERSION:
        problem, document = f"schema-version {document.get('schema-version')!r}", None
    if document is None:
        log.info("adjunct store %s: no usable offsets file (%s)", store_dir, problem)
        return None
    raw = document.get("offsets")
    last = document.get("last-records")  # absent from the files of an older Samsa
    marks: dict[SystemStreamPartition, RecordMark] = {}
    found: dict[SystemStreamPartition, int] = {}
    for ssp in ssps:
        value = raw.get(_name(ssp)) if isinstance(raw, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            log.info("adjunct store %s: its offsets file has no offset of %s", store_dir, _name(ssp))
            return None
        found[ssp] = value
        mark = RecordMark.from_json(last.get(_name(ssp))) if isinstance(last, dict) else None
        if mark is not None and mark.offset == value - 1:
            marks[ssp] = mark
    build = document.get("build")  # absent from the files of an older Samsa
    return StoredOffsets(found, written_at, marks, build if isinstance(build, dict) else None)
