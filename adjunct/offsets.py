"""The offsets file of a persistent adjunct store: the next offset of its stream, written at each flush."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from samsa.stores.checkpoint_dirs import read_checked_json, write_checked_json
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)

OFFSETS_FILE = "ADJUNCT-OFFSETS"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class StoredOffsets:
    """What a store's offsets file says: the next offset to read per partition, and when it was written."""

    offsets: dict[SystemStreamPartition, int]
    written_at: float  # epoch seconds (the file's mtime)


def _name(ssp: SystemStreamPartition) -> str:
    return f"{ssp.system}.{ssp.stream}#{ssp.partition}"


def write_offsets(store_dir: Path, offsets: dict[SystemStreamPartition, int]) -> None:
    """Records, after the store was flushed, the next offset of each partition feeding it."""
    payload = {
        "schema-version": SCHEMA_VERSION,
        "offsets": {_name(ssp): offset for ssp, offset in sorted(offsets.items())},
    }
    write_checked_json(store_dir / OFFSETS_FILE, payload)


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
    found: dict[SystemStreamPartition, int] = {}
    for ssp in ssps:
        value = raw.get(_name(ssp)) if isinstance(raw, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            log.info("adjunct store %s: its offsets file has no offset of %s", store_dir, _name(ssp))
            return None
        found[ssp] = value
    return StoredOffsets(found, written_at)
