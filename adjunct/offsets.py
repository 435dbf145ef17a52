"""The offsets file of a persistent adjunct store: the next offset of its stream, written at each flush,
with a mark of the last record read (to tell, at a restart, that the topic is still the one it read)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.kafka import KafkaConsumer, RawMessage
from samsa.stores.checkpoint_dirs import read_checked_json, write_checked_json
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)

OFFSETS_FILE = "ADJUNCT-OFFSETS"
SCHEMA_VERSION = 1


# How long a start waits for the one record it reads back to check a mark.
_MARK_READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RecordMark:
    """What identifies the record at `offset` of a partition: its timestamp and, when known, a digest of
    its key and value. A topic deleted and recreated holds, at the same offset, another record."""

    offset: int
    timestamp: int  # epoch ms
    digest: str | None = None

    @classmethod
    def of(cls, msg: RawMessage) -> RecordMark:
        """The mark of a consumed record."""
        return cls(msg.offset(), msg.timestamp()[1], _digest(msg))

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "timestamp": self.timestamp, "digest": self.digest}

    @classmethod
    def from_json(cls, value: object) -> RecordMark | None:
        """The mark `to_json` wrote; None for anything else (a file of an older Samsa has none)."""
        if not isinstance(value, dict):
            return None
        offset, timestamp, digest = value.get("offset"), value.get("timestamp"), value.get("digest")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (offset, timestamp)):
            return None
        if digest is not None and not isinstance(digest, str):
            return None
        assert isinstance(offset, int) and isinstance(timestamp, int)
        return cls(offset, timestamp, digest)


def _digest(msg: RawMessage) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (msg.key(), msg.value()):
        # Length-prefixed, a null apart from an empty one: no two (key, value) pairs feed the same bytes.
        h.update(b"\xff" if part is None else len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def mark_problem(consumer: KafkaConsumer, ssp: SystemStreamPartition, mark: RecordMark) -> str | None:
    """Why the partition does not hold, at the mark's offset, the marked record (its topic was deleted and
    recreated, or the record compacted away); None when it does, or when it expired (below the partition's
    low watermark: nothing to compare). Reads the one record with `consumer`, which must be unassigned."""
    tp = (ssp.stream, ssp.partition)
    low, high = consumer.watermarks(tp)
    if mark.offset < low:
        return None
    if mark.offset >= high:
        return f"offset {mark.offset}, the last record the store read, is past the partition's end {high}"
    consumer.assign({tp: mark.offset})
    try:
        deadline = time.monotonic() + _MARK_READ_TIMEOUT_S
        while True:
            found = [m for m in consumer.consume(1, 0.2) if (m.topic(), m.partition()) == tp]
            if found:
                msg = found[0]
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"could not read {ssp} at offset {mark.offset} within {_MARK_READ_TIMEOUT_S:.0f} s to "
                    "check that the topic is the one the adjunct store was built from; is the broker up?"
                )
    finally:
        consumer.unassign()
    if msg.offset() != mark.offset:
        return (
            f"offset {mark.offset}, the last record the store read, is gone (the next record is at "
            f"{msg.offset()}: compacted away, or the topic was recreated)"
        )
    timestamp = msg.timestamp()[1]
    if timestamp != mark.timestamp:
        return (
            f"the record at offset {mark.offset} has timestamp {timestamp}, the one the store read had "
            f"{mark.timestamp}"
        )
    if mark.digest is not None and _digest(msg) != mark.digest:
        return f"the record at offset {mark.offset} has another key or value than the one the store read"
    return None


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
    write_checked_json(store_dir / OFFSETS_FILE, payload)


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
