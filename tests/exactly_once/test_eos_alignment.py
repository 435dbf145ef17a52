"""Barrier alignment over shared channels: scenarios, errors, snapshots, and a random-pipeline property."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.exactly_once.alignment import (
    Action,
    AlignmentError,
    BarrierAligner,
    Decision,
    MarkerIn,
    RestoreIn,
    Rewind,
    Tag,
)
from samsa.streams import SystemStreamPartition

S3 = SystemStreamPartition("kafka", "s3", 0)
S4 = SystemStreamPartition("kafka", "s4", 0)


def mid(n: int) -> SystemStreamPartition:
    return SystemStreamPartition("kafka", "mid", n)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def hello(aligner: BarrierAligner, partition: SystemStreamPartition, *producers: int) -> None:
    for p in producers:
        assert aligner.on_restore(partition, RestoreIn(p, 1, 0), 0) is None


PROCESS_1 = Decision(Action.PROCESS, 1)


# -- scenarios --------------------------------------------------------------------------------------


def test_the_seeds_figure_2_early_arrivals_wait_for_the_next_version() -> None:
    """n1 and n2 share S3 and S4; n3 must not put their version-2 records into its version 1."""
    clock = Clock()
    n3 = BarrierAligner([S3, S4], clock=clock)
    hello(n3, S3, 1, 2)
    hello(n3, S4, 1, 2)
    assert n3.classify(S3, Tag(1, 1, 1, 1)) == PROCESS_1
    assert not n3.on_marker(S3, MarkerIn(1, 1, 1), 10)  # n1 closes v1 on S3
    assert n3.classify(S3, Tag(1, 1, 2, 2)) == Decision(Action.BUFFER, 2)  # pos 24: early
    assert n3.classify(S3, Tag(2, 1, 1, 1)) == PROCESS_1  # n2 still in v1
    clock.now = 101.0
    assert not n3.on_marker(S3, MarkerIn(2, 1, 1), 12)
    assert n3.classify(S4, Tag(2, 1, 1, 1)) == PROCESS_1
    assert not n3.on_marker(S4, MarkerIn(2, 1, 1), 20)
    assert n3.classify(S4, Tag(2, 1, 2, 2)) == Decision(Action.BUFFER, 2)  # pos 54: early
    assert n3.waiting_for() == [(S4, 1)]
    assert n3.alignment_started_at == 100.0 and n3.alignment_wait() == 1.0
    clock.now = 103.5
    assert n3.on_marker(S4, MarkerIn(1, 1, 1), 21), "marker 1 from every producer on every partition"
    caps = n3.advance()
    assert n3.current_version == 2 and list(n3.aligned_versions) == [1]
    assert n3.last_alignment_wait == 3.5
    assert caps == {}, "no marker above the new cut was read"
    assert n3.admit_buffered(S3, Tag(1, 1, 2, 2)) == Decision(Action.PROCESS, 2)
    assert n3.classify(S3, Tag(1, 1, 2, 3)) == Decision(Action.PROCESS, 2)


def test_duplicates_by_sequence_and_by_committed_version() -> None:
    a = BarrierAligner([mid(0)])
    hello(a, mid(0), 7)
    assert a.classify(mid(0), Tag(7, 1, 1, 1)).action is Action.PROCESS
    assert a.classify(mid(0), Tag(7, 1, 1, 1)) == Decision(Action.DROP_DUPLICATE)
    assert a.on_marker(mid(0), MarkerIn(7, 1, 1), 5)
    a.advance()
    assert a.classify(mid(0), Tag(7, 1, 1, 1)).action is Action.DROP_DUPLICATE, "version 1 is committed"
    assert not a.on_marker(mid(0), MarkerIn(7, 1, 1), 5), "a repeated marker is ignored"
    assert a.duplicates_dropped == 2 and a.duplicate_control_records == 1


def test_a_producer_seen_on_one_partition_is_awaited_on_all_of_its_stream() -> None:
    a = BarrierAligner([mid(0), mid(1)])
    hello(a, mid(0), 1, 2)
    hello(a, mid(1), 1)
    assert not a.on_marker(mid(0), MarkerIn(1, 1, 1), 3)
    assert not a.on_marker(mid(0), MarkerIn(2, 1, 1), 4)
    assert not a.on_marker(mid(1), MarkerIn(1, 1, 1), 2)
    assert a.waiting_for() == [(mid(1), 2)], "producer 2 was never seen on partition 1, yet awaited"
    hello(a, mid(1), 2)
    assert a.on_marker(mid(1), MarkerIn(2, 1, 1), 5)


def test_a_producer_appearing_later_joins_at_the_current_version() -> None:
    a = BarrierAligner([mid(0)])
    hello(a, mid(0), 1)
    for v in (1, 2, 3):
        assert a.on_marker(mid(0), MarkerIn(1, 1, v), v)
        a.advance()
    a.take_joins()
    hello(a, mid(0), 9)  # a new upstream task starts at its version 1
    [join] = a.take_joins()
    assert (join.producer, join.offset, join.at_version) == (9, -3, 4)
    assert a.classify(mid(0), Tag(9, 1, 1, 1)) == Decision(Action.PROCESS, 4)
    assert a.classify(mid(0), Tag(1, 1, 4, 1)) == Decision(Action.PROCESS, 4)
    assert not a.on_marker(mid(0), MarkerIn(1, 1, 4), 9)
    assert a.on_marker(mid(0), MarkerIn(9, 1, 1), 10), "its version 1 is the task's version 4"


def test_restore_drops_old_generation_records_above_the_restored_version_everywhere() -> None:
    a = BarrierAligner([mid(0), mid(1)])
    hello(a, mid(0), 1)
    hello(a, mid(1), 1)
    for part in (mid(0), mid(1)):
        assert a.classify(part, Tag(1, 1, 1, 1)).action is Action.PROCESS
        a.on_marker(part, MarkerIn(1, 1, 1), 2)
    a.advance()
    assert a.classify(mid(1), Tag(1, 1, 2, 2)) == Decision(Action.PROCESS, 2)
    # Producer 1 crashed in version 2 and restarted from its checkpoint 1 as generation 2.
    rewind = a.on_restore(mid(0), RestoreIn(1, 2, 1), 3)
    assert rewind == Rewind(1, mid(0), 1, 2, 1), "version 2 used a voided record: back to checkpoint 1"
    assert a.current_version == 2 and a.rewinds == 1
    # Re-reading mid(1) from the checkpoint: the voided record is stale now; generation 2 goes on.
    assert a.classify(mid(1), Tag(1, 1, 2, 2)) == Decision(Action.DROP_STALE)
    assert a.on_restore(mid(1), RestoreIn(1, 2, 1), 4) is None
    assert a.classify(mid(1), Tag(1, 2, 2, 2)) == Decision(Action.PROCESS, 2), "sequence resumes"
    assert a.on_restore(mid(0), RestoreIn(1, 2, 1), 3) is None, "re-read restore: no second rewind"
    assert a.stale_dropped == 1


def test_restore_without_voided_work_needs_no_rewind_and_voids_the_buffer() -> None:
    a = BarrierAligner([mid(0), mid(1)])
    hello(a, mid(0), 1, 2)
    hello(a, mid(1), 1, 2)
    assert a.classify(mid(0), Tag(1, 1, 1, 1)) == PROCESS_1
    a.on_marker(mid(0), MarkerIn(1, 1, 1), 3)
    assert a.classify(mid(0), Tag(1, 1, 2, 2)) == Decision(Action.BUFFER, 2)
    assert a.on_restore(mid(1), RestoreIn(1, 2, 1), 5) is None, "only version 1 work, which stands"
    for p, part in ((2, mid(0)), (2, mid(1)), (1, mid(1))):
        a.on_marker(part, MarkerIn(p, 2 if p == 1 else 1, 1), 9)
    assert a.aligned
    a.advance()
    assert a.admit_buffered(mid(0), Tag(1, 1, 2, 2)) == Decision(Action.DROP_STALE)


def test_a_restore_closes_a_version_whose_marker_the_crash_cut_off() -> None:
    a = BarrierAligner([mid(0)])
    hello(a, mid(0), 1)
    a.classify(mid(0), Tag(1, 1, 1, 1))
    assert a.on_restore(mid(0), RestoreIn(1, 2, 1), 4) is None  # committed 1, crashed before marker 1
    assert a.aligned
    assert a.advance() == {}


def test_errors_name_the_partition_and_producer() -> None:
    a = BarrierAligner([mid(0)])
    hello(a, mid(0), 1)
    a.on_marker(mid(0), MarkerIn(1, 1, 1), 1)
    a.on_marker(mid(0), MarkerIn(1, 1, 2), 2)
    with pytest.raises(
        AlignmentError, match=r"kafka.mid#0: producer 1 restarted .* from version 1, but version 2"
    ):
        a.on_restore(mid(0), RestoreIn(1, 2, 1), 3)
    with pytest.raises(AlignmentError, match=r"markers 3\.\.3 are missing"):
        a.classify(mid(0), Tag(1, 1, 4, 1))
    with pytest.raises(AlignmentError, match="generation 3 came before that generation's restore"):
        a.classify(mid(0), Tag(1, 3, 3, 1))
    with pytest.raises(AlignmentError, match=r"kafka\.mid#5 is not an intermediate input"):
        a.classify(mid(5), Tag(1, 1, 1, 1))
    b = BarrierAligner([mid(0)])
    with pytest.raises(AlignmentError, match="before version 1 is aligned"):
        b.advance()


def test_an_aligner_without_input_never_aligns() -> None:
    a = BarrierAligner([mid(0)])
    assert not a.aligned and a.waiting_for() == []


def test_marker_counts_hold_alignment_until_every_task_of_the_job_was_seen() -> None:
    a = BarrierAligner([mid(0)])
    assert not a.on_marker(mid(0), MarkerIn(1, 1, 0, job=42, tasks=2), 0)
    assert not a.on_marker(mid(0), MarkerIn(1, 1, 1, job=42, tasks=2), 1)
    assert a.waiting_for() == [(mid(0), None)], "the job states two tasks; one was seen"
    a.on_restore(mid(0), RestoreIn(2, 1, 0, job=42, tasks=2), 2)
    assert a.on_marker(mid(0), MarkerIn(2, 1, 1, job=42, tasks=2), 3)
    with pytest.raises(AlignmentError, match="producer number 3 of a job stating 2 tasks"):
        a.on_marker(mid(0), MarkerIn(3, 1, 1, job=42, tasks=2), 4)
    # A restart stating fewer tasks: the removed one is still awaited (until retired), and said so.
    assert a.on_restore(mid(0), RestoreIn(2, 2, 1, job=42, tasks=1), 5) is None
    [notice] = a.take_notices()
    assert "stream kafka.mid: producer 2 restarted stating 1 tasks for its job, which had 2" in notice


def test_retire_stops_waiting_after_the_final_version() -> None:
    a = BarrierAligner([mid(0)])
    hello(a, mid(0), 1, 2)
    a.on_marker(mid(0), MarkerIn(1, 1, 1), 1)
    a.on_marker(mid(0), MarkerIn(2, 1, 1), 2)
    a.advance()
    a.on_marker(mid(0), MarkerIn(1, 1, 2), 3)
    assert a.waiting_for() == [(mid(0), 2)]
    a.retire(2, final_version=2)
    assert a.waiting_for() == [(mid(0), 2)], "its version 2 records may still come"
    assert a.classify(mid(0), Tag(2, 1, 2, 1)) == Decision(Action.PROCESS, 2)
    assert a.on_marker(mid(0), MarkerIn(2, 1, 2), 4)
    a.advance()
    assert a.classify(mid(0), Tag(2, 1, 3, 2)) == Decision(Action.DROP_STALE), "uncommitted leftovers"
    assert a.on_marker(mid(0), MarkerIn(1, 1, 3), 5), "no longer waits for producer 2"
    with pytest.raises(AlignmentError, match="was retired"):
        a.on_restore(mid(0), RestoreIn(2, 2, 2), 6)


def test_snapshot_is_the_committed_cut_and_caps_the_checkpointed_offsets() -> None:
    a = BarrierAligner([mid(0), mid(1)])
    hello(a, mid(0), 1)
    hello(a, mid(1), 1)
    a.on_marker(mid(0), MarkerIn(1, 1, 1), 1)
    a.on_marker(mid(0), MarkerIn(1, 1, 2), 2)  # early: no records of version 2 on mid(0)
    a.on_restore(mid(0), RestoreIn(1, 2, 2), 3)  # a restart, above the cut too
    assert a.on_marker(mid(1), MarkerIn(1, 1, 1), 7)
    assert a.advance() == {mid(0): 2}, "the early marker lies above the cut: re-read it after a restart"
    state = json.loads(json.dumps(a.to_dict()))
    b = BarrierAligner.from_dict(state, [mid(0), mid(1)])
    assert b.current_version == 2 and not b.aligned, "the early marker is not part of the checkpoint"
    assert b.to_dict() == state
    assert not b.on_marker(mid(0), MarkerIn(1, 1, 2), 2)
    assert b.on_restore(mid(0), RestoreIn(1, 2, 2), 3) is None
    assert b.classify(mid(1), Tag(1, 1, 2, 1)) == Decision(Action.PROCESS, 2), "still below the fence"
    with pytest.raises(AlignmentError, match="format"):
        BarrierAligner.from_dict({**state, "format": 99}, [mid(0)])


# -- property: random pipelines of producers on shared partitions -------------------------------------


@dataclass
class Logs:
    """Per-partition logs of items, and the truth: version of each committed record, the void ones."""

    parts: list[list[tuple[Any, ...]]]
    truth: dict[tuple[int, ...], int] = field(default_factory=dict)
    stale: set[tuple[int, ...]] = field(default_factory=set)


def producer_logs(pid: int, n: int, versions: int, rng: random.Random, crashes: int) -> Logs:
    """One producer's output: records of each version, markers, and optional crashes + restarts.

    A crash comes before a commit (the version's records are void) or after it, with the marker sent
    to a prefix of the partitions only; the new generation restores the last committed version and
    resumes the sequences checkpointed with it."""
    out = Logs([[] for _ in range(n)])
    generation, committed = 1, 0
    seq, committed_seq = [0] * n, [0] * n
    for j in range(n):
        out.parts[j].append(("restore", RestoreIn(pid, generation, 0)))
    plans = {rng.randint(1, versions): rng.choice(["before", *range(n + 1)]) for _ in range(crashes)}
    v = 1
    while v <= versions:
        emitted = []
        for j in range(n):
            for i in range(rng.choice((0, 0, 1, 2, 3))):
                seq[j] += 1
                rid = (pid, generation, v, j, i)
                out.parts[j].append(("rec", Tag(pid, generation, v, seq[j]), rid))
                emitted.append(rid)
        plan = plans.pop(v, None)
        if plan == "before":
            out.stale.update(emitted)
        else:
            committed, committed_seq = v, list(seq)
            out.truth.update((rid, v) for rid in emitted)
        sent_to = n if plan is None else 0 if plan == "before" else int(plan)
        for j in range(sent_to):
            out.parts[j].append(("marker", MarkerIn(pid, generation, v)))
        if plan is not None:
            generation += 1
            seq = list(committed_seq)
            for j in range(n):
                out.parts[j].append(("restore", RestoreIn(pid, generation, committed)))
        v = committed + 1
    return out


def merge(rng: random.Random, lists: list[list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """A random interleaving keeping each list's order."""
    lists = [list(reversed(items)) for items in lists if items]
    merged = []
    while lists:
        pick = rng.randrange(len(lists))
        merged.append(lists[pick].pop())
        if not lists[pick]:
            lists.pop(pick)
    return merged


def with_duplicates(rng: random.Random, log: list[tuple[Any, ...]], count: int) -> list[tuple[Any, ...]]:
    """Copies of random items inserted later in the same log (redelivery, producer retries)."""
    log = list(log)
    for _ in range(count):
        if not log:
            break
        i = rng.randrange(len(log))
        log.insert(rng.randint(i + 1, len(log)), log[i])
    return log


@dataclass
class Checkpoint:
    version: int
    resume: list[int]
    state: dict[str, Any]


class Task:
    """The run loop in miniature: reads, buffers (emptied on restart, as `EosBuffer` does), checkpoints,
    rewinds, and crashes; records what each committed version processed."""

    def __init__(self, logs: list[list[tuple[Any, ...]]], rng: random.Random, crash_rate: float) -> None:
        self.logs, self.rng, self.crash_rate = logs, rng, crash_rate
        self.crashes_left = 3  # a bounded number of task crashes, so every run ends
        self.parts = [mid(j) for j in range(len(logs))]
        self.aligner = BarrierAligner(self.parts)
        self.pos = [0] * len(logs)
        self.buffer: dict[int, list[tuple[int, Tag, Any, int]]] = {}
        self.current: list[Any] = []
        self.committed: dict[int, list[Any]] = {}
        self.checkpoint = Checkpoint(0, [0] * len(logs), self.aligner.to_dict())
        self.stale_dropped: set[Any] = set()
        self.alignment_checks = 0

    def run(self, exact: bool) -> None:
        while True:
            unread = [j for j in range(len(self.logs)) if self.pos[j] < len(self.logs[j])]
            if not unread:
                return
            if self.crashes_left and self.rng.random() < self.crash_rate:
                self.crashes_left -= 1
                self.crash()
                continue
            j = self.rng.choice(unread)
            index, item = self.pos[j], self.logs[j][self.pos[j]]
            self.pos[j] += 1
            if item[0] == "rec":
                self.take(j, item[1], item[2], index)
                continue
            if item[0] == "marker":
                aligned = self.aligner.on_marker(self.parts[j], item[1], index)
            else:
                rewind = self.aligner.on_restore(self.parts[j], item[1], index)
                if rewind is not None:
                    assert rewind.to_version == self.checkpoint.version
                    self.restart()
                    continue
                aligned = self.aligner.aligned
            if exact:
                assert aligned == self.all_markers_read(self.aligner.current_version)
                self.alignment_checks += 1
            while self.aligner.aligned:
                self.commit()

    def take(self, j: int, tag: Tag, rid: Any, index: int) -> None:
        decision = self.aligner.classify(self.parts[j], tag)
        if decision.action is Action.PROCESS:
            assert decision.version == self.aligner.current_version
            self.current.append(rid)
        elif decision.action is Action.BUFFER:
            assert decision.version is not None and decision.version > self.aligner.current_version
            self.buffer.setdefault(decision.version, []).append((j, tag, rid, index))
        elif decision.action is Action.DROP_STALE:
            self.stale_dropped.add(rid)

    def commit(self) -> None:
        version = self.aligner.current_version
        self.committed[version] = self.current
        self.current = []
        caps = self.aligner.advance()
        resume = list(self.pos)
        for records in self.buffer.values():
            for j, _, _, index in records:
                resume[j] = min(resume[j], index)
        for part, offset in caps.items():
            resume[part.partition] = min(resume[part.partition], offset)
        self.checkpoint = Checkpoint(version, resume, json.loads(json.dumps(self.aligner.to_dict())))
        for j, tag, rid, _ in self.buffer.pop(version + 1, []):
            decision = self.aligner.admit_buffered(self.parts[j], tag)
            if decision.action is Action.PROCESS:
                self.current.append(rid)
            else:
                self.stale_dropped.add(rid)

    def restart(self) -> None:
        self.pos = list(self.checkpoint.resume)
        self.buffer = {}
        self.current = []
        self.committed = {v: rids for v, rids in self.committed.items() if v <= self.checkpoint.version}

    def crash(self) -> None:
        self.aligner = BarrierAligner.from_dict(self.checkpoint.state, self.parts)
        self.restart()

    def all_markers_read(self, version: int) -> bool:
        producers = {item[1].producer for log in self.logs for item in log}
        for j, log in enumerate(self.logs):
            closed = {p: 0 for p in producers}
            for item in log[: self.pos[j]]:
                if item[0] != "rec":
                    closed[item[1].producer] = max(closed[item[1].producer], item[1].version)
            if min(closed.values()) < version:
                return False
        return True


def pipeline(
    rng: random.Random, producers: int, n: int, versions: int, crashes: int, dups: int, hellos_first: bool
) -> tuple[Logs, list[list[tuple[Any, ...]]]]:
    outs = [producer_logs(pid, n, versions, rng, crashes) for pid in range(1, producers + 1)]
    logs = []
    for j in range(n):
        own = [out.parts[j] for out in outs]
        if hellos_first:  # every producer started before any wrote: their restore commands come first
            head, own = [items[0] for items in own], [items[1:] for items in own]
        else:
            head = []
        # Without the startup prefix, the last producer often starts late: versions align without it.
        late = own.pop() if not hellos_first and len(own) > 1 and rng.random() < 0.5 else []
        logs.append(with_duplicates(rng, head + merge(rng, own) + late, dups))
    total = Logs([])
    for out in outs:
        total.truth.update(out.truth)
        total.stale |= out.stale
    return total, logs


@settings(max_examples=150, deadline=None)
@given(
    rng=st.randoms(use_true_random=False),
    producers=st.integers(1, 4),
    n=st.integers(1, 3),
    versions=st.integers(1, 4),
    crashes=st.integers(0, 2),
    dups=st.integers(0, 4),
    crash_rate=st.sampled_from([0.0, 0.02, 0.1]),
)
def test_every_record_lands_in_its_producers_version_exactly_once(
    rng: random.Random, producers: int, n: int, versions: int, crashes: int, dups: int, crash_rate: float
) -> None:
    """Producers started together: each task version holds exactly its producers' records of that
    version, alignment happens exactly when every marker of the version was read, and restores drop
    exactly the void records - through duplicates, producer crashes and task crashes."""
    total, logs = pipeline(rng, producers, n, versions, crashes, dups, hellos_first=True)
    task = Task(logs, rng, crash_rate)
    task.run(exact=True)
    assert sorted(task.committed) == list(range(1, versions + 1))
    assert task.current == [] and task.buffer == {}
    for version, rids in task.committed.items():
        assert Counter(rids) == Counter(rid for rid, v in total.truth.items() if v == version)
    assert task.stale_dropped == total.stale
    assert task.alignment_checks > 0


@settings(max_examples=150, deadline=None)
@given(
    rng=st.randoms(use_true_random=False),
    producers=st.integers(1, 4),
    n=st.integers(1, 3),
    versions=st.integers(1, 4),
    crashes=st.integers(0, 2),
    dups=st.integers(0, 4),
    crash_rate=st.sampled_from([0.0, 0.05]),
)
def test_producers_seen_late_join_without_loss_or_duplicates(
    rng: random.Random, producers: int, n: int, versions: int, crashes: int, dups: int, crash_rate: float
) -> None:
    """Producers start at random points of the logs: a channel first seen after a version was aligned
    joins at the task's current version; every valid record is still handled exactly once, in the task
    version its channel's offset maps it to, and no void record is ever committed."""
    total, logs = pipeline(rng, producers, n, versions, crashes, dups, hellos_first=False)
    task = Task(logs, rng, crash_rate)
    task.run(exact=False)
    committed = [rid for rids in task.committed.values() for rid in rids]
    buffered = {rid for records in task.buffer.values() for _, _, rid, _ in records}
    # A void record may wait in the buffer of a version that never aligned: its drain would drop it.
    pending = task.current + sorted(buffered - total.stale)
    assert Counter(committed + pending) == Counter(total.truth.keys()), "each valid record once, none void"
    for version, rids in task.committed.items():
        for pid, _, v, j, _ in rids:
            assert version == v - task.aligner.offset(mid(j), pid)  # type: ignore[operator]
    assert task.stale_dropped | (buffered & total.stale) == total.stale


def test_a_marker_closes_every_version_up_to_it() -> None:
    a = BarrierAligner([mid(0)])
    hello(a, mid(0), 1)
    hello(a, mid(0), 2)
    a.classify(mid(0), Tag(1, 1, 1, 1))
    assert not a.on_marker(mid(0), MarkerIn(1, 1, 4), 2)  # producer 1 jumped to version 4
    assert a.on_marker(mid(0), MarkerIn(2, 1, 1), 3)
    a.advance()
    assert a.current_version == 2 and not a.aligned  # producer 2 has closed only version 1
    assert a.classify(mid(0), Tag(1, 1, 5, 2)).action is Action.BUFFER  # version 5: after the jump
    assert a.on_marker(mid(0), MarkerIn(2, 1, 6), 4)
    a.advance(limit=3)  # the caller stops below a version with buffered records
    assert a.current_version == 4 and a.aligned
    a.advance()  # one step to the highest version all closed: 4 (producer 1's marker)
    assert a.current_version == 5 and not a.aligned


def test_pass_to_merges_closed_versions_into_one_checkpoint() -> None:
    a = BarrierAligner([S3, S4])
    hello(a, S3, 1)
    hello(a, S4, 2)
    assert a.classify(S3, Tag(1, 1, 1, 1)) == PROCESS_1
    a.on_marker(S3, MarkerIn(1, 1, 1), 2)
    assert a.classify(S3, Tag(1, 1, 2, 2)) == Decision(Action.BUFFER, 2)
    a.on_marker(S3, MarkerIn(1, 1, 2), 4)  # producer 1 closed versions 1 and 2
    assert a.on_marker(S4, MarkerIn(2, 1, 1), 2)
    assert a.closed_through() == 1
    with pytest.raises(AlignmentError, match=r"pass_to\(2\) from version 1: only versions up to 1"):
        a.pass_to(2)  # producer 2 may still send records of version 2
    assert a.classify(S4, Tag(2, 1, 2, 1)) == Decision(Action.BUFFER, 2)
    assert a.on_marker(S4, MarkerIn(2, 1, 2), 3)
    assert a.closed_through() == 2
    a.pass_to(2)  # no checkpoint of version 1: the next one covers 1 and 2
    assert a.current_version == 2 and a.aligned and list(a.aligned_versions) == []
    assert a.to_dict()["current_version"] == 1, "a checkpoint written now would still hold version 0's cut"
    assert a.admit_buffered(S3, Tag(1, 1, 2, 2)) == Decision(Action.PROCESS, 2)
    assert a.admit_buffered(S4, Tag(2, 1, 2, 1)) == Decision(Action.PROCESS, 2)
    assert a.advance() == {}
    assert list(a.aligned_versions) == [2] and a.current_version == 3
    assert a.to_dict()["current_version"] == 3
