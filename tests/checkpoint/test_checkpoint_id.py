"""Checkpoint ids: format, parsing, ordering and uniqueness within a process."""

from __future__ import annotations

import threading
import time
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.exceptions import CheckpointError


def test_create_uses_epoch_millis_and_a_sub_millisecond_part() -> None:
    before = time.time_ns() // 1_000_000
    cp_id = CheckpointId.create()
    after = time.time_ns() // 1_000_000
    assert before <= cp_id.millis <= after
    assert 0 <= cp_id.nanos < 1_000_000
    assert str(cp_id) == f"{cp_id.millis}-{cp_id.nanos}"


def test_ids_created_back_to_back_strictly_increase() -> None:
    ids = [CheckpointId.create() for _ in range(20_000)]
    assert all(a < b for a, b in pairwise(ids))
    assert len({str(i) for i in ids}) == len(ids)


def test_ids_from_many_threads_are_unique() -> None:
    out: list[list[CheckpointId]] = [[] for _ in range(8)]

    def make(slot: list[CheckpointId]) -> None:
        slot.extend(CheckpointId.create() for _ in range(2_000))

    threads = [threading.Thread(target=make, args=(slot,)) for slot in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for slot in out for i in slot]
    assert len(set(every)) == len(every)
    for slot in out:  # each thread sees its own ids increasing
        assert slot == sorted(slot)


def test_a_wall_clock_stepped_back_still_gives_a_greater_id(monkeypatch: pytest.MonkeyPatch) -> None:
    first = CheckpointId.create()
    monkeypatch.setattr(time, "time_ns", lambda: (first.millis - 5_000) * 1_000_000)
    monkeypatch.setattr(time, "monotonic_ns", lambda: 999_999)
    second = CheckpointId.create()
    third = CheckpointId.create()
    assert first < second < third


def test_nanos_overflow_carries_into_millis(monkeypatch: pytest.MonkeyPatch) -> None:
    last = CheckpointId.create()
    monkeypatch.setattr(time, "time_ns", lambda: 0)
    monkeypatch.setattr(time, "monotonic_ns", lambda: 0)
    ids = [CheckpointId.create() for _ in range(1_000_001 - last.nanos)]
    assert all(a < b for a, b in pairwise([last, *ids]))
    assert ids[-1].millis == last.millis + 1


def test_ordering_is_by_millis_then_nanos_not_by_text() -> None:
    a, b, c = CheckpointId(1000, 999_999), CheckpointId(1001, 5), CheckpointId(1001, 40)
    assert a < b < c
    assert sorted([c, a, b]) == [a, b, c]
    assert str(b) > str(c)  # "1001-5" > "1001-40" as text: compare ids, never their strings


@given(st.integers(0, 2**53), st.integers(0, 999_999))
def test_parse_round_trip(millis: int, nanos: int) -> None:
    cp_id = CheckpointId(millis, nanos)
    assert CheckpointId.parse(str(cp_id)) == cp_id
    assert CheckpointId.parse(str(cp_id)).millis == millis


def test_parse_reads_samza_ids() -> None:
    assert CheckpointId.parse("1614147487244-33577") == CheckpointId(1614147487244, 33577)


@pytest.mark.parametrize(
    "text", ["", "123", "123-", "-5", "a-1", "1-b", "1-2-3", "1-1000000", "1 -2", "-1-2", "1-²", "1.5-2"]
)
def test_parse_rejects_other_text_naming_it(text: str) -> None:
    with pytest.raises(CheckpointError) as info:
        CheckpointId.parse(text)
    assert repr(text) in str(info.value)


def test_constructor_rejects_out_of_range_parts() -> None:
    with pytest.raises(CheckpointError):
        CheckpointId(1, 1_000_000)
    with pytest.raises(CheckpointError):
        CheckpointId(-1, 0)
