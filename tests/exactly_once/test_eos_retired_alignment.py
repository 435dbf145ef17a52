"""Retiring an upstream producer in band: the retired record ends the wait, voids its later records, survives
restarts exactly, and lets a shrunk upstream job restart stating fewer tasks."""

from __future__ import annotations

import json

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


def started(*producers: int, partitions: int = 2, tasks: int = 0) -> BarrierAligner:
    """An aligner at version 1 that has seen each producer's first restore command on every partition."""
    a = BarrierAligner([mid(n) for n in range(partitions)])
    for n in range(partitions):
        for p in producers:
            assert a.on_restore(mid(n), RestoreIn(p, 1, 0, job=JOB, tasks=tasks), 0) is None
    return a


def close(a: BarrierAligner, version: int, *producers: int, partitions: int = 2, offset: int = 10) -> bool:
    aligned = False
    for n in range(partitions):
        for p in producers:
            aligned = a.on_marker(mid(n), MarkerIn(p, 1, version), offset + p)
    return aligned


def test_a_retired_record_ends_the_wait_for_a_gone_producer() -> None:
    a = started(1, 2)
    assert close(a, 1, 1, 2)
    a.advance()
    close(a, 2, 1)
    assert a.waiting_for() == [(mid(0), 2), (mid(1), 2)], "producer 2 stopped after version 1: a stall"
    # Its job was redeployed under a new job.id: `samsa eos retire` writes its retired record everywhere.
    assert a.on_retired(mid(0), RetiredIn(2, 1, 1, job=JOB), 20) is None
    assert a.aligned, "its markers reached its final version on mid(1) too: nothing of it can follow there"
    assert a.advance() == {}
    assert a.to_dict()["retired"] == [[2, 1]]
    assert a.on_retired(mid(1), RetiredIn(2, 1, 1, job=JOB), 21) is None, "the copy on mid(1): a no-op"
    assert a.duplicate_control_records == 1
    assert close(a, 3, 1), "no longer waits for producer 2"


def test_its_uncommitted_records_are_dropped_and_a_version_that_used_them_rewinds() -> None:
    a = started(1, 2)
    assert close(a, 1, 1, 2)
    a.advance()
    # Producer 2 sent records of its version 2 and stopped without committing it.
    assert a.classify(mid(1), Tag(2, 1, 2, 1)) == Decision(Action.PROCESS, 2)
    assert a.classify(mid(0), Tag(1, 1, 2, 1)) == Decision(Action.PROCESS, 2)
    rewind = a.on_retired(mid(0), RetiredIn(2, 1, 1, job=JOB), 30)
    assert rewind == Rewind(1, mid(0), 2, 1, 1, retired=True), "version 2 used a record never committed"
    assert a.current_version == 2 and a.rewinds == 1
    # Read again from the checkpoint: its record is stale now; the retired record again is no new rewind.
    assert a.classify(mid(0), Tag(1, 1, 2, 1)) == Decision(Action.PROCESS, 2)
    assert a.classify(mid(1), Tag(2, 1, 2, 1)) == Decision(Action.DROP_STALE)
    assert a.on_retired(mid(0), RetiredIn(2, 1, 1, job=JOB), 30) is None
    assert a.classify(mid(1), Tag(2, 1, 2, 2)) == Decision(Action.DROP_STALE)
    assert a.stale_dropped == 2
    assert close(a, 2, 1)
    a.advance()


def test_its_records_up_to_the_final_version_are_still_awaited_where_the_record_is_not_read_yet() -> None:
    a = started(1, 2)
    # Producer 2 committed version 1 but its marker reached only mid(0) before it stopped (a crash).
    a.on_marker(mid(0), MarkerIn(2, 1, 1), 5)
    a.on_marker(mid(0), MarkerIn(1, 1, 1), 6)
    a.on_marker(mid(1), MarkerIn(1, 1, 1), 6)
    assert a.on_retired(mid(0), RetiredIn(2, 1, 1, job=JOB), 7) is None
    assert a.waiting_for() == [(mid(1), 2)], (
        "its version 1 records on mid(1) precede its retired record there"
    )
    assert a.classify(mid(1), Tag(2, 1, 1, 1)) == Decision(Action.PROCESS, 1)
    assert a.on_retired(mid(1), RetiredIn(2, 1, 1, job=JOB), 8) is None
    assert a.aligned, "the retired record closes its final version where its marker never came"
    assert a.advance() == {}


def test_a_restart_before_the_checkpoint_passes_the_retired_record_reads_it_again() -> None:
    a = started(1, 2)
    assert close(a, 1, 1, 2)
    # Producer 2 committed version 2, sent no marker 2 to mid(0), then stopped for good. Its retired record
    # is read there before the cut of version 1: it closes version 2 above the cut.
    assert a.on_retired(mid(0), RetiredIn(2, 1, 2, job=JOB), 17) is None
    caps = a.advance()
    assert caps == {mid(0): 17}, "the checkpointed offset of mid(0) must not pass the retired record"
    state = json.loads(json.dumps(a.to_dict()))
    assert state["retired"] == [[2, 2]]
    # A crash after this checkpoint: the restarted task reads mid(0) again from offset 17.
    b = BarrierAligner.from_dict(state, [mid(0), mid(1)])
    close(b, 2, 1)
    b.on_marker(mid(1), MarkerIn(2, 1, 2), 30)
    assert b.waiting_for() == [(mid(0), 2)], "its version 2 records on mid(0) may precede the record"
    assert b.on_retired(mid(0), RetiredIn(2, 1, 2, job=JOB), 17) is None
    assert b.aligned


def test_a_retired_producer_stays_retired_through_a_checkpoint() -> None:
    a = started(1, 2)
    assert close(a, 1, 1, 2)
    a.on_retired(mid(0), RetiredIn(2, 1, 1, job=JOB), 20)
    a.on_retired(mid(1), RetiredIn(2, 1, 1, job=JOB), 20)
    a.advance()
    state = json.loads(json.dumps(a.to_dict()))
    b = BarrierAligner.from_dict(state, [mid(0), mid(1)])
    assert b.to_dict() == state
    assert close(b, 2, 1), "restored from the checkpoint past its retired records: still not awaited"
    assert b.classify(mid(0), Tag(2, 1, 2, 1)) == Decision(Action.DROP_STALE)
    with pytest.raises(
        AlignmentError, match=r"kafka.mid#1: producer 2 was retired at version 1 .* running again"
    ):
        b.on_restore(mid(1), RestoreIn(2, 2, 1, job=JOB), 40)


def test_a_producer_never_seen_is_done_at_once() -> None:
    a = started(1, partitions=1, tasks=2)
    assert a.on_marker(mid(0), MarkerIn(1, 1, 1, job=JOB, tasks=2), 3) is False
    assert a.waiting_for() == [(mid(0), None)], "its job states two tasks"
    assert a.on_retired(mid(0), RetiredIn(9, 1, 0, job=JOB), 4) is None
    assert a.aligned, "the retired task counts among the two; nothing of it follows its record"
    assert a.classify(mid(0), Tag(9, 1, 1, 1)) == Decision(Action.DROP_STALE)


def test_a_shrunk_upstream_job_restarts_once_its_removed_tasks_are_retired() -> None:
    a = started(1, 2, 3, 4, partitions=1, tasks=4)
    assert close(a, 1, 1, 2, 3, 4, partitions=1)
    a.advance()
    # Stopped, its tasks 3 and 4 retired, then started again with two tasks.
    for p in (3, 4):
        assert a.on_retired(mid(0), RetiredIn(p, 1, 1, job=JOB), 20 + p) is None
    for p in (1, 2):
        assert a.on_restore(mid(0), RestoreIn(p, 2, 1, job=JOB, tasks=2), 30 + p) is None
    assert a.take_notices() == [], "the retired tasks make up the difference"
    assert a.on_marker(mid(0), MarkerIn(1, 2, 2, job=JOB, tasks=2), 40) is False
    assert a.on_marker(mid(0), MarkerIn(2, 2, 2, job=JOB, tasks=2), 41), "aligned on the two tasks left"
    a.advance()
    # A new producer of the job is counted without the retired ones (4 seen, 4 stated).
    assert a.on_restore(mid(0), RestoreIn(5, 1, 0, job=JOB, tasks=3), 50) is None


def test_a_shrunk_upstream_job_started_before_its_removed_tasks_are_retired_waits_for_them() -> None:
    a = started(1, 2, 3, 4, partitions=1, tasks=4)
    assert close(a, 1, 1, 2, 3, 4, partitions=1)
    a.advance()
    for p in (1, 2):
        assert a.on_restore(mid(0), RestoreIn(p, 2, 1, job=JOB, tasks=2), 30 + p) is None
    [notice] = a.take_notices()
    assert "stating 2 tasks for its job, which had 4 (0 retired)" in notice and "samsa eos retire" in notice
    a.on_marker(mid(0), MarkerIn(1, 2, 2, job=JOB, tasks=2), 40)
    a.on_marker(mid(0), MarkerIn(2, 2, 2, job=JOB, tasks=2), 41)
    assert a.waiting_for() == [(mid(0), 3), (mid(0), 4)], "the removed tasks stall it"
    assert a.on_retired(mid(0), RetiredIn(3, 1, 1, job=JOB), 50) is None
    assert a.on_retired(mid(0), RetiredIn(4, 1, 1, job=JOB), 51) is None
    assert a.aligned, "retired after the smaller restart in the log: the wait ends all the same"
    assert a.take_notices() == []


def test_a_retirement_that_contradicts_what_was_seen_is_refused() -> None:
    a = started(1, 2)
    close(a, 1, 2)
    close(a, 2, 2)
    with pytest.raises(
        AlignmentError, match=r"kafka.mid#0: producer 2 was retired at version 1, but its marker"
    ):
        a.on_retired(mid(0), RetiredIn(2, 1, 1, job=JOB), 9)
    b = started(1, 2)
    b.on_restore(mid(0), RestoreIn(2, 2, 0, job=JOB), 3)
    with pytest.raises(AlignmentError, match="generation 2 of it was seen: it restarted"):
        b.on_retired(mid(0), RetiredIn(2, 1, 0, job=JOB), 9)
    c = started(1, 2)
    c.on_retired(mid(0), RetiredIn(2, 1, 0, job=JOB), 9)
    with pytest.raises(AlignmentError, match="retired at version 0 and again at version 1"):
        c.on_retired(mid(1), RetiredIn(2, 1, 1, job=JOB), 9)
