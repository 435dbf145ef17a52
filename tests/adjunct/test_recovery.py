"""The adjunct stores' recovery table (the seed's), and their offsets file."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.adjunct.offsets import OFFSETS_FILE, read_offsets, write_offsets
from samsa.adjunct.recovery import adjunct_start
from samsa.streams import SystemStreamPartition

DAY = 86_400_000
NOW = 10 * DAY


def start(**changes: object):  # type: ignore[no-untyped-def]
    inputs: dict[str, object] = {
        "persistent": True,
        "bootstrap": True,
        "exists": True,
        "stored_offset": 50,
        "stored_at_ms": NOW - 1000,
        "now_ms": NOW,
        "max_staleness_ms": DAY,
        "low": 10,
        "high": 100,
    }
    inputs.update(changes)
    return adjunct_start(**inputs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "offset", "wipe"),
    [
        # Persistent, stream marked bootstrap.
        ({"exists": False, "stored_offset": None, "stored_at_ms": None}, 10, False),  # no store: bootstrap
        ({"stored_offset": None, "stored_at_ms": None}, 10, True),  # no offsets file: re-create, bootstrap
        ({"stored_at_ms": NOW - DAY}, 10, True),  # stale: re-create, bootstrap
        ({"stored_offset": 101}, 10, True),  # beyond the partition: re-create, bootstrap
        ({"stored_offset": 9}, 10, True),  # expired from the partition: re-create, bootstrap
        ({}, 50, False),  # valid: continue from its offset
        ({"stored_offset": 100}, 100, False),  # valid, caught up
        # Persistent, not marked bootstrap: a new or re-created store is empty, so it is rebuilt from the
        # oldest offset too (the checkpoint would leave it holding only later changes).
        ({"bootstrap": False, "exists": False, "stored_offset": None, "stored_at_ms": None}, 10, False),
        ({"bootstrap": False, "stored_offset": None, "stored_at_ms": None}, 10, True),
        ({"bootstrap": False, "stored_at_ms": NOW - DAY}, 10, True),
        ({"bootstrap": False, "stored_offset": 101}, 10, True),
        ({"bootstrap": False}, 50, False),
        # In-memory: always empty at start, so always rebuilt; nothing on disk to keep or wipe.
        ({"persistent": False}, 10, False),
        ({"persistent": False, "bootstrap": False}, 10, False),
    ],
)
def test_the_recovery_table(changes: dict[str, object], offset: int | None, wipe: bool) -> None:
    decision = start(**changes)
    assert (decision.offset, decision.wipe) == (offset, wipe), decision.note


def test_the_offsets_file_round_trips_and_refuses_what_it_does_not_hold(tmp_path: Path) -> None:
    a, b = SystemStreamPartition("kafka", "customers", 0), SystemStreamPartition("kafka", "customers", 1)
    assert read_offsets(tmp_path, [a]) is None
    write_offsets(tmp_path, {a: 7, b: 9})
    stored = read_offsets(tmp_path, [a, b])
    assert stored is not None and stored.offsets == {a: 7, b: 9}
    assert read_offsets(tmp_path, [SystemStreamPartition("kafka", "customers", 2)]) is None
    (tmp_path / OFFSETS_FILE).write_text((tmp_path / OFFSETS_FILE).read_text().replace("7", "8"))
    assert read_offsets(tmp_path, [a]) is None, "an edited (or torn) file is not trusted"
