"""Unit tests of the job model: GroupByPartition tasks, round-robin containers, JSON and fingerprint."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.runtime.exceptions import JobModelError
from samsa.runtime.job_model import (
    ContainerModel,
    JobModel,
    TaskModel,
    balance,
    build_job_model,
    fingerprint,
    group_by_partition,
    task_name,
)
from samsa.streams import SystemStream, SystemStreamPartition

CLICKS = SystemStream("kafka", "clicks")
VIEWS = SystemStream("kafka", "page.views")
OTHER = SystemStream("other", "clicks")


def names(tasks: tuple[TaskModel, ...] | list[TaskModel]) -> list[str]:
    return [t.name for t in tasks]


def test_task_name_is_samzas() -> None:
    assert task_name(3) == "Partition 3"


def test_one_task_per_partition_number_across_inputs() -> None:
    tasks = group_by_partition({CLICKS: 2, VIEWS: 2, OTHER: 2})
    assert names(tasks) == ["Partition 0", "Partition 1"]
    for n, task in enumerate(tasks):
        assert set(task.partitions) == {
            SystemStreamPartition("kafka", "clicks", n),
            SystemStreamPartition("kafka", "page.views", n),
            SystemStreamPartition("other", "clicks", n),
        }


def test_unequal_partition_counts() -> None:
    tasks = group_by_partition({CLICKS: 4, VIEWS: 2})
    assert names(tasks) == [f"Partition {n}" for n in range(4)]
    assert tasks[1].partitions == (
        SystemStreamPartition("kafka", "clicks", 1),
        SystemStreamPartition("kafka", "page.views", 1),
    )
    # Partitions 2 and 3 exist only in clicks: their tasks hold only clicks.
    assert tasks[2].partitions == (SystemStreamPartition("kafka", "clicks", 2),)
    assert tasks[3].partitions == (SystemStreamPartition("kafka", "clicks", 3),)


def test_no_inputs_is_an_error() -> None:
    with pytest.raises(JobModelError, match=r"task\.inputs"):
        group_by_partition({})


def test_model_is_deterministic_whatever_the_input_order() -> None:
    a = build_job_model({CLICKS: 5, VIEWS: 3, OTHER: 1}, 2)
    b = build_job_model({OTHER: 1, VIEWS: 3, CLICKS: 5}, 2)
    assert a == b
    assert a.to_json() == b.to_json()
    assert a.fingerprint == b.fingerprint


def test_tasks_are_dealt_round_robin() -> None:
    model = build_job_model({CLICKS: 5}, 2)
    assert [c.id for c in model.containers] == ["0", "1"]
    assert names(model.container("0").tasks) == ["Partition 0", "Partition 2", "Partition 4"]
    assert names(model.container("1").tasks) == ["Partition 1", "Partition 3"]


def test_round_robin_follows_partition_number_not_text_order() -> None:
    # 12 tasks: "Partition 10" must not sort before "Partition 2".
    model = build_job_model({CLICKS: 12}, 3)
    assert names(model.container("0").tasks) == ["Partition 0", "Partition 3", "Partition 6", "Partition 9"]
    assert names(model.container("1").tasks) == ["Partition 1", "Partition 4", "Partition 7", "Partition 10"]
    assert names(model.container("2").tasks) == ["Partition 2", "Partition 5", "Partition 8", "Partition 11"]


@pytest.mark.parametrize(("tasks", "containers"), [(7, 3), (8, 4), (10, 1), (3, 3), (16, 5)])
def test_balance_is_even(tasks: int, containers: int) -> None:
    model = build_job_model({CLICKS: tasks}, containers)
    sizes = [len(c.tasks) for c in model.containers]
    assert len(sizes) == containers
    assert sum(sizes) == tasks
    assert max(sizes) - min(sizes) <= 1


def test_more_containers_than_tasks_names_job_container_count() -> None:
    with pytest.raises(JobModelError) as info:
        build_job_model({CLICKS: 2, VIEWS: 1}, 3)
    assert "job.container.count=3" in str(info.value)
    assert "2 tasks" in str(info.value)


def test_unknown_container_is_named() -> None:
    model = build_job_model({CLICKS: 2}, 2)
    with pytest.raises(JobModelError, match=r"container '7' is not in the job model \(containers: 0, 1\)"):
        model.container("7")


def test_json_round_trip() -> None:
    model = build_job_model({CLICKS: 5, VIEWS: 3, OTHER: 2}, 2)
    raw = model.to_json()
    assert JobModel.from_json(raw) == model
    data = json.loads(raw)
    assert data["version"] == 1
    assert data["fingerprint"] == model.fingerprint


def test_json_round_trip_keeps_stream_names_with_dots_and_hashes() -> None:
    ssp = SystemStreamPartition("kafka", "a.b#c", 0)
    model = JobModel("fp", (ContainerModel("0", (TaskModel("Partition 0", (ssp,)),)),))
    assert JobModel.from_json(model.to_json()) == model


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"{}",
        b'{"version": 2, "fingerprint": "x", "containers": []}',
        b'{"version": 1, "containers": []}',
        b'{"version": 1, "fingerprint": "x", "containers": [{"id": "0"}]}',
        b'{"version": 1, "fingerprint": "x", "containers": [{"id": "0", "tasks": '
        b'[{"name": "P", "partitions": [["kafka", "t", "zero"]]}]}]}',
    ],
)
def test_unreadable_model_raises_job_model_error(raw: bytes) -> None:
    with pytest.raises(JobModelError):
        JobModel.from_json(raw)


def test_fingerprint_changes_with_what_the_model_depends_on() -> None:
    base = fingerprint({CLICKS: 4, VIEWS: 2}, 2)
    assert fingerprint({VIEWS: 2, CLICKS: 4}, 2) == base
    assert fingerprint({CLICKS: 4, VIEWS: 3}, 2) != base  # a partition was added
    assert fingerprint({CLICKS: 4}, 2) != base  # an input was removed
    assert fingerprint({CLICKS: 4, OTHER: 2}, 2) != base  # another input
    assert fingerprint({CLICKS: 4, VIEWS: 2}, 1) != base  # container count
    assert build_job_model({CLICKS: 4, VIEWS: 2}, 2).fingerprint == base


def test_balance_rejects_no_tasks() -> None:
    with pytest.raises(JobModelError, match=r"job\.container\.count"):
        balance([], 1)


streams = st.builds(
    SystemStream,
    st.sampled_from(["kafka", "other"]),
    st.text(alphabet="abc.-_", min_size=1, max_size=6),
)


@given(
    counts=st.dictionaries(streams, st.integers(min_value=1, max_value=24), min_size=1, max_size=5),
    data=st.data(),
)
def test_every_partition_in_one_task_and_every_task_in_one_container(
    counts: dict[SystemStream, int], data: st.DataObject
) -> None:
    task_count = max(counts.values())
    containers = data.draw(st.integers(min_value=1, max_value=task_count))
    model = build_job_model(counts, containers)

    expected = {SystemStreamPartition(*ss, n) for ss, count in counts.items() for n in range(count)}
    seen = Counter(p for t in model.tasks for p in t.partitions)
    assert set(seen) == expected
    assert all(n == 1 for n in seen.values())

    task_homes = Counter(t.name for c in model.containers for t in c.tasks)
    assert set(task_homes) == {task_name(n) for n in range(task_count)}
    assert all(n == 1 for n in task_homes.values())

    # Each task holds only partitions of its own number.
    for task in model.tasks:
        assert all(task_name(p.partition) == task.name for p in task.partitions)
    sizes = [len(c.tasks) for c in model.containers]
    assert len(sizes) == containers and max(sizes) - min(sizes) <= 1
    assert JobModel.from_json(model.to_json()) == model
    assert build_job_model(dict(reversed(list(counts.items()))), containers) == model
