"""Where an adjunct store's stream is read from at start: the seed's recovery table, as a pure function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AdjunctStart:
    """Read the stream from `offset` (the store's own, or the oldest when it starts empty); `wipe` the
    store's directory first (it exists but is not valid)."""

    offset: int
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
    changed: Callable[[], str | None] = lambda: None,
    build_changed: Callable[[], str | None] = lambda: None,
) -> AdjunctStart:
    """The seed's decision table, read so that no row is lost. Persistent store: none found -> a new one;
    found but not valid (offsets file missing, older than `max_staleness_ms`, its offset outside the
    partition, `build_changed()` naming the settings its rows were built with that changed since (its
    extractor, serdes, source partitions), or `changed()` saying why the record before it is not the one
    the store read: the topic was deleted and recreated) -> re-created; found and valid -> continued from
    its own offset. A new or re-created store, and an in-memory one, is empty: it is rebuilt from the
    oldest offset, since its rows depend on every message of the stream. The seed's "continue from last
    offset" for a stream not marked bootstrap would leave it holding only later changes; the bootstrap
    flag decides only whether processing waits for the rebuild (the run loop's business), not where it
    starts."""
    again = low
    how = (
        "bootstrapping from the oldest offset before other inputs are processed (samza.bootstrap)"
        if bootstrap
        else "rebuilding from the oldest offset alongside the other inputs (stream not samza.bootstrap)"
    )
    if not persistent:
        return AdjunctStart(again, False, f"in-memory store: {how}")
    if not exists:
        return AdjunctStart(again, False, f"no store yet: {how}")
    if stored_offset is None or stored_at_ms is None:
        return AdjunctStart(again, True, f"store without a usable offsets file: re-created, {how}")
    # Before the rest: a store whose rows another extractor or serde made is wrong however fresh it is.
    rebuilt = build_changed()
    if rebuilt is not None:
        return AdjunctStart(
            again, True, f"{rebuilt}: its rows were built with other settings: re-created, {how}"
        )
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
    # Asked last: it reads a record from the broker. A recreated topic holding at least as many records
    # as the store read passes the range check.
    problem = changed()
    if problem is not None:
        return AdjunctStart(
            again,
            True,
            f"{problem}: the topic is not the one the store was built from (deleted and recreated?): "
            f"re-created, {how}",
        )
    return AdjunctStart(stored_offset, False, f"store valid: continuing from its offset {stored_offset}")
