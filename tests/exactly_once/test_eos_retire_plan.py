"""What `samsa eos retire` retires and when it refuses: producers and final versions from the checkpoints,
signs of a live job, and the retired records (one per producer and output partition)."""

from __future__ import annotations

import pytest

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.model import Checkpoint, CheckpointV2
from samsa.checkpoint.starts import ContainerStart
from samsa.exactly_once.exceptions import RetireError
from samsa.exactly_once.protocol import Producer, Retired, classify
from samsa.exactly_once.retire import Activity, check_stopped, default_quiet_ms, retired_records, retirees
from samsa.exactly_once.task import EosState
from samsa.streams import SystemStream

NOW = 1_000_000_000
MID = SystemStream("kafka", "mid")


def checkpoint(committed: int, generation: int = 3, aligned: bool = False) -> CheckpointV2:
    state = EosState(
        generation, committed, {("mid", 0): 7, ("mid", 1): 9}, {"format": 1} if aligned else None
    )
    return CheckpointV2(CheckpointId.create(), exactly_once=state.to_dict())


def activity(**changes: object) -> Activity:
    base: dict[str, object] = {
        "now_ms": NOW,
        "quiet_ms": 60_000,
        "live_here": {},
        "starts": [],
        "model": {"0": frozenset({"Partition 0"}), "1": frozenset({"Partition 1"})},
    }
    return Activity(**{**base, **changes})  # type: ignore[arg-type]


def test_each_task_checkpoint_names_its_producer_and_final_version() -> None:
    found = retirees(
        "split", "1", {"Partition 1": (checkpoint(12), NOW - 1), "Partition 0": (checkpoint(11, 2), None)}
    )
    assert [(r.task, r.producer, r.generation, r.version) for r in found] == [
        ("Partition 0", Producer.of("split", "1", "Partition 0"), 2, 11),
        ("Partition 1", Producer.of("split", "1", "Partition 1"), 3, 12),
    ]
    only = retirees(
        "split",
        "1",
        {"Partition 0": (checkpoint(11), 5), "Partition 1": (checkpoint(12), 5)},
        ["Partition 1"],
    )
    assert [r.task for r in only] == ["Partition 1"]
    with pytest.raises(
        RetireError, match=r"--task Partition 7: job split-1 has no checkpoint of such a task"
    ):
        retirees("split", "1", {"Partition 0": (checkpoint(11), 5)}, ["Partition 7"])
    with pytest.raises(RetireError, match=r"task Partition 0 of job split-1: .* no exactly-once state"):
        retirees("split", "1", {"Partition 0": (Checkpoint(), 5)})


def test_a_job_that_checkpointed_or_started_lately_or_runs_here_is_refused_without_force() -> None:
    chosen = retirees("split", "1", {"Partition 0": (checkpoint(11), NOW - 2_000)})
    with pytest.raises(
        RetireError, match=r"job split-1 looks alive: task Partition 0 checkpointed 2\.0 s ago.*--force"
    ):
        check_stopped("split-1", chosen, activity(), force=False)
    assert check_stopped("split-1", chosen, activity(), force=True) == [
        "task Partition 0 checkpointed 2.0 s ago"
    ]
    quiet = retirees("split", "1", {"Partition 0": (checkpoint(11), NOW - 120_000)})
    assert check_stopped("split-1", quiet, activity(), force=False) == []
    with pytest.raises(RetireError, match=r"container-0 \(pid 4\) has a live process on this machine"):
        check_stopped("split-1", quiet, activity(live_here={"0": "container-0 (pid 4)"}), force=False)
    start = ContainerStart("split-1", "0", 1, "host-a", 4, NOW - 5_000)
    with pytest.raises(RetireError, match=r"container 0 started 5\.0 s ago"):
        check_stopped("split-1", quiet, activity(starts=[start]), force=False)
    # A shrunk job started again without the tasks to retire: its container is no sign that they run.
    shrunk = activity(starts=[start], live_here={"0": "container-0 (pid 4)"}, model={"0": frozenset({"P 1"})})
    assert check_stopped("split-1", quiet, shrunk, force=False) == []


def test_a_job_of_aligned_tasks_cannot_be_told_stopped_and_needs_force() -> None:
    chosen = retirees("mid", "1", {"Partition 0": (checkpoint(11, aligned=True), NOW - 600_000)})
    with pytest.raises(
        RetireError, match="cannot tell whether job mid-1 is stopped: its tasks read intermediate"
    ):
        check_stopped("mid-1", chosen, activity(), force=False)
    assert len(check_stopped("mid-1", chosen, activity(), force=True)) == 1
    assert default_quiet_ms(50) == 60_000 and default_quiet_ms(30_000) == 300_000


def test_one_retired_record_per_producer_and_output_partition() -> None:
    chosen = retirees("split", "1", {"Partition 0": (checkpoint(11), 5), "Partition 1": (checkpoint(12), 5)})
    records = retired_records(chosen, {MID: 2})
    assert [(s, p) for s, p, _, _ in records] == [(MID, 0), (MID, 1), (MID, 0), (MID, 1)]
    _, _, value, headers = records[1]
    p0 = Producer.of("split", "1", "Partition 0")
    assert value == p0.control_value()
    assert classify(headers) == Retired(p0.id, 3, 11, sequence=9, job=p0.job)
