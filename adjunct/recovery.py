"""Where an adjunct store's stream is read from at start: the seed's recovery table, as a pure function."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AdjunctStart:
    """Read the stream from `offset` (None: from the task's checkpoint, as any input); `wipe` the store's
    directory first (it exists but is not valid)."""

    offset: int | None
    wipe: bool
    note: str


def adjunct_start(
    *,
    persistent: bool,
    bootstrap: bool,
    exists: bool,
    stored_offset: int | None,
    stored_at_ms: float | None,
    now_ms: float,
    max_staleness_ms: int,
    low: int,
    high: int,
) -> AdjunctStart:
    """The seed's decision table. Persistent store: none found -> a new one; found but not valid (offsets
    file missing, older than `max_staleness_ms`, or its offset outside the partition) -> re-created; either
    way bootstrapped from the oldest offset when the stream is marked bootstrap, else continued from the
    last (checkpointed) offset. Found and valid -> continued from its own offset. In-memory store:
    bootstrapped when marked, else continued from the last offset."""
    again = low if bootstrap else None
    how = "bootstrapping from the oldest offset" if bootstrap else "continuing from the checkpointed offset"
    if not persistent:
        return AdjunctStart(again, False, f"in-memory store: {how}")
    if not exists:
        return AdjunctStart(again, False, f"no store yet: {how}")
    if stored_offset is None or stored_at_ms is None:
        return AdjunctStart(again, True, f"store without a usable offsets file: re-created, {how}")
    age_ms = now_ms - stored_at_ms
    if age_ms >= max_staleness_ms:
        return AdjunctStart(
            again,
            True,
            f"store is {age_ms / 1000:.0f} s old, beyond adstore.max.staleness.ms={max_staleness_ms}: "
            f"re-created, {how}",
        )
    if not low <= stored_offset <= high:
        return AdjunctStart(
            again,
            True,
            f"store's offset {stored_offset} is outside the partition's [{low}, {high}] (topic recreated or "
            f"records expired): re-created, {how}",
        )
    return AdjunctStart(stored_offset, False, f"store valid: continuing from its offset {stored_offset}")
