"""A retired producer's restore commands of its retired generation or older, read after its retired record
(on a partition read later, or again after a rewind), are fences as usual; only a newer generation is a
producer running again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.exactly_once.alignment import (
    Action,
    AlignmentError,
    BarrierAligner,
    Decision,
    MarkerIn,
    RestoreIn,
    RetiredIn,
    Rewind,
    Tag,
)
from samsa.streams import SystemStreamPartition

JOB = 42


def mid(n: int) -> SystemStreamPartition:
    return SystemStreamPartition("kafka", "mid", n)


def committed_version_1(partitions: int, tasks: int = 0) -> BarrierAligner:
    """Producers 1 and 2 (generation 1) started and marked version 1 everywhere; the task committed it."""
    a = BarrierAligner([mid(n) for n in range(partitions)])
    for n in range(partitions):
        for p in (1, 2):
            assert a.on_restore(mid(n), RestoreIn(p, 1, 0, job=JOB, tasks=tasks), 0) is None
    for n in range(partitions):
        for p in (1, 2):
            a.on_marker(mid(n), MarkerIn(p, 1, 1, job=JOB, tasks=tasks), 10 + p)
    a.advance()
    return a


def round_trip(a: BarrierAligner, partitions: int, *, legacy: bool = False) -> BarrierAligner:
    """The aligner restarted from its checkpoint (`legacy`: as saved before retirements kept generations)."""
    state: dict[str, Any] = json.loads(json.dumps(a.to_dict()))
    if legacy:
        del state["retired_generations"]
    return BarrierAligner.from_dict(state, [mid(n) for n in range(partitions)])


def test_an_earlier_restore_command_read_on_another_partition_after_the_retired_record_is_a_fence() -> None:
    # Producer 2 generation 2 restarted from version 1 and was killed; retired as (generation 2, version 1).
    # Each partition: ... marker 1 (g1), restore 1 (g2), retired 1 (g2). mid(0) is read to its end first.
    a = committed_version_1(partitions=2)
    assert a.on_restore(mid(0), RestoreIn(2, 2, 1, job=JOB), 20) is None
    assert a.on_retired(mid(0), RetiredIn(2, 2, 1, job=JOB), 21) is None
    assert a.on_restore(mid(1), RestoreIn(2, 2, 1, job=JOB), 20) is None, "written before the retirement"
    assert a.classify(mid(1), Tag(2, 2, 2, 1)) == Decision(Action.DROP_STALE), "its uncommitted version"
    assert a.on_retired(mid(1), RetiredIn(2, 2, 1, job=JOB), 21) is None
    assert a.on_marker(mid(0), MarkerIn(1, 1, 2), 30) is False
    assert a.on_marker(mid(1), MarkerIn(1, 1, 2), 30), "producer 2 is no longer awaited"


def test_a_restart_capped_before_the_restore_command_reads_it_again_after_the_retirement() -> None:
    a = committed_version_1(partitions=2)
    assert a.on_restore(mid(0), RestoreIn(2, 2, 1, job=JOB), 20) is None
    assert a.on_retired(mid(0), RetiredIn(2, 2, 1, job=JOB), 21) is None
    a.on_marker(mid(0), MarkerIn(1, 1, 2), 30)
    a.on_marker(mid(1), MarkerIn(1, 1, 2), 30)
    a.advance()  # version 2, mid(1) not read past producer 2's restore command
    for legacy in (False, True):
        b = round_trip(a, 2, legacy=legacy)
        assert b.on_restore(mid(1), RestoreIn(2, 2, 1, job=JOB), 20) is None, f"legacy state: {legacy}"
        assert b.on_retired(mid(1), RetiredIn(2, 2, 1, job=JOB), 21) is None


def test_a_rewind_the_retired_record_causes_reads_the_last_restore_command_again() -> None:
    # One partition, after the task's checkpoint of version 1 (offset 13):
    #   20 rec(p2, g1, v2)  21 restore(p2, g2, v1)  22 rec(p2, g2, v2)  23 retired(p2, g2, v1)
    a = committed_version_1(partitions=1)
    p = mid(0)
    assert a.classify(p, Tag(2, 1, 2, 1)) == Decision(Action.PROCESS, 2)
    rewind = a.on_restore(p, RestoreIn(2, 2, 1, job=JOB), 21)
    assert isinstance(rewind, Rewind) and not rewind.retired
    assert a.classify(p, Tag(2, 1, 2, 1)) == Decision(Action.DROP_STALE), "fenced by generation 2"
    assert a.on_restore(p, RestoreIn(2, 2, 1, job=JOB), 21) is None
    assert a.classify(p, Tag(2, 2, 2, 1)) == Decision(Action.PROCESS, 2)
    rewind = a.on_retired(p, RetiredIn(2, 2, 1, job=JOB), 23)
    assert isinstance(rewind, Rewind) and rewind.retired
    # Read again from the checkpoint: generation 2's restore command precedes its retirement.
    assert a.classify(p, Tag(2, 1, 2, 1)) == Decision(Action.DROP_STALE)
    assert a.on_restore(p, RestoreIn(2, 2, 1, job=JOB), 21) is None
    assert a.classify(p, Tag(2, 2, 2, 1)) == Decision(Action.DROP_STALE), "above its final version"
    assert a.on_retired(p, RetiredIn(2, 2, 1, job=JOB), 23) is None
    assert a.rewinds == 2
    assert a.on_marker(p, MarkerIn(1, 1, 2), 30), "aligned on producer 1 alone"


def test_a_restore_command_of_a_newer_generation_than_the_retired_one_is_still_refused() -> None:
    a = committed_version_1(partitions=2)
    assert a.on_retired(mid(0), RetiredIn(2, 1, 1, job=JOB), 20) is None
    assert a.on_restore(mid(1), RestoreIn(2, 1, 0, job=JOB), 3) is None, "generation 1's own, read late"
    for b in (a, round_trip(a, 2), round_trip(a, 2, legacy=True)):
        with pytest.raises(
            AlignmentError,
            match=r"kafka.mid#1: producer 2 was retired at version 1 as of generation 1 but sent a restore "
            r"command of generation 2: it is running again",
        ):
            b.on_restore(mid(1), RestoreIn(2, 2, 1, job=JOB), 40)


def test_the_checkpoint_keeps_the_retired_generation() -> None:
    a = committed_version_1(partitions=1)
    assert a.on_restore(mid(0), RestoreIn(2, 3, 1, job=JOB), 20) is None
    assert a.on_retired(mid(0), RetiredIn(2, 3, 1, job=JOB), 21) is None
    a.on_marker(mid(0), MarkerIn(1, 1, 2), 30)
    a.advance()
    state = json.loads(json.dumps(a.to_dict()))
    assert state["retired"] == [[2, 1]], "as before: a Samsa without generations reads it"
    assert state["retired_generations"] == [[2, 3]]
    assert BarrierAligner.from_dict(state, [mid(0)]).to_dict() == state
    # Saved without generations: the highest generation of the producer the state knows (its fences).
    del state["retired_generations"]
    assert BarrierAligner.from_dict(state, [mid(0)]).to_dict()["retired_generations"] == [[2, 3]]


def test_a_retired_producers_late_restore_command_is_not_counted_as_a_new_producer() -> None:
    a = committed_version_1(partitions=2, tasks=2)
    assert a.on_restore(mid(0), RestoreIn(2, 2, 1, job=JOB, tasks=2), 20) is None
    assert a.on_retired(mid(0), RetiredIn(2, 2, 1, job=JOB), 21) is None
    # The job runs a new task in the retired one's place: two producers again.
    assert a.on_restore(mid(0), RestoreIn(3, 1, 1, job=JOB, tasks=2), 22) is None
    assert a.on_restore(mid(1), RestoreIn(2, 2, 1, job=JOB, tasks=2), 20) is None
