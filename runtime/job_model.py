"""The job model: input partitions grouped into tasks, and tasks balanced across containers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from samsa.runtime.exceptions import JobModelError
from samsa.streams import SystemStream, SystemStreamPartition

_FORMAT_VERSION = 1


@dataclass(frozen=True)
class TaskModel:
    """A task: its name and the input partitions it consumes."""

    name: str
    partitions: tuple[SystemStreamPartition, ...]


@dataclass(frozen=True)
class ContainerModel:
    """A container: its id and the tasks it runs."""

    id: str
    tasks: tuple[TaskModel, ...]
    #: Partition count of every input of the whole job model (`JobModel.partition_counts`; the job model
    #: holding the container fills it in, empty when unknown): keyed state is placed by these counts, and
    #: a container sees only its own tasks. Not part of the model's identity (derived from all tasks).
    input_counts: Mapping[SystemStream, int] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class JobIdentity:
    """A job's exact `job.name` and `job.id` (its internal topics' names blur '_' into '-')."""

    name: str
    id: str

    def __str__(self) -> str:
        return f"job.name={self.name!r}, job.id={self.id!r}"


@dataclass(frozen=True)
class JobModel:
    """All containers of a job, plus what the model was built from (to tell when it is stale)."""

    fingerprint: str
    containers: tuple[ContainerModel, ...]
    #: The job that published the model; None in a model of an older Samsa, which did not record it. Not
    #: part of the model's identity: the same tasks in the same containers are the same model.
    job: JobIdentity | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # Every container carries the counts of the whole model: its state is placed by them.
        counts = self.partition_counts()
        containers = tuple(replace(c, input_counts=counts) for c in self.containers)
        object.__setattr__(self, "containers", containers)

    def container(self, container_id: str) -> ContainerModel:
        for c in self.containers:
            if c.id == container_id:
                return c
        ids = ", ".join(c.id for c in self.containers)
        raise JobModelError(f"container {container_id!r} is not in the job model (containers: {ids})")

    @property
    def tasks(self) -> list[TaskModel]:
        return [t for c in self.containers for t in c.tasks]

    def partition_counts(self) -> dict[SystemStream, int]:
        """Partition count of every input the model was built from (each of its partitions is in a task,
        grouped or broadcast)."""
        return input_counts(self.tasks)

    def to_json(self) -> bytes:
        data = {
            "version": _FORMAT_VERSION,
            "fingerprint": self.fingerprint,
            "containers": [
                {
                    "id": c.id,
                    "tasks": [
                        {"name": t.name, "partitions": [list(p) for p in t.partitions]} for t in c.tasks
                    ],
                }
                for c in self.containers
            ],
        }
        if self.job is not None:
            # A new key, not a new format version: older readers ignore it.
            data["job"] = {"name": self.job.name, "id": self.job.id}
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> JobModel:
        try:
            data = json.loads(raw)
            if data.get("version") != _FORMAT_VERSION:
                raise JobModelError(f"job model version {data.get('version')} is not {_FORMAT_VERSION}")
            containers = tuple(
                ContainerModel(
                    c["id"],
                    tuple(
                        TaskModel(
                            t["name"],
                            tuple(SystemStreamPartition(s, n, int(p)) for s, n, p in t["partitions"]),
                        )
                        for t in c["tasks"]
                    ),
                )
                for c in data["containers"]
            )
            job = data.get("job")
            identity = None if job is None else JobIdentity(str(job["name"]), str(job["id"]))
            return cls(data["fingerprint"], containers, identity)
        except (ValueError, KeyError, TypeError) as e:
            raise JobModelError(
                f"the stored job model is unreadable ({e}); restart the job to rewrite it"
            ) from e


def input_counts(tasks: Iterable[TaskModel]) -> dict[SystemStream, int]:
    """Partition count of every input of `tasks`, all the tasks of a job model."""
    counts: dict[SystemStream, int] = {}
    for task in tasks:
        for ssp in task.partitions:
            counts[ssp.system_stream] = max(counts.get(ssp.system_stream, 0), ssp.partition + 1)
    return counts


def grouped_counts(
    counts: Mapping[SystemStream, int], broadcast: Collection[SystemStreamPartition]
) -> dict[SystemStream, int]:
    """The `counts` of the inputs grouped into tasks: those with a partition not in `broadcast` (every task
    reads a broadcast partition: none of its keys belongs to one task)."""
    skip = set(broadcast)
    return {
        ss: n for ss, n in counts.items() if any(SystemStreamPartition(*ss, p) not in skip for p in range(n))
    }


def task_name(partition: int) -> str:
    """Samza's GroupByPartition task name."""
    return f"Partition {partition}"


def group_by_partition(
    partition_counts: Mapping[SystemStream, int], excluded: Collection[SystemStreamPartition] = ()
) -> list[TaskModel]:
    """One task per partition number across all inputs, less the `excluded` partitions (Samza's
    GroupByPartition, which leaves the broadcast partitions out); a number none but excluded partitions
    have gets no task."""
    if not partition_counts:
        raise JobModelError("the job has no inputs; set task.inputs")
    skip = set(excluded)
    streams = sorted(partition_counts)
    tasks = []
    for n in range(max(partition_counts.values())):
        ssps = (SystemStreamPartition(*ss, n) for ss in streams if n < partition_counts[ss])
        grouped = tuple(ssp for ssp in ssps if ssp not in skip)
        if grouped:
            tasks.append(TaskModel(task_name(n), grouped))
    if not tasks:
        raise JobModelError(
            "every input partition is in task.broadcast.inputs: the job has no task to broadcast them to; "
            "add a stream to task.inputs, or leave a partition out of task.broadcast.inputs"
        )
    return tasks


def balance(tasks: Sequence[TaskModel], container_count: int) -> tuple[ContainerModel, ...]:
    """Deals tasks (in partition order) round-robin to containers: the same input gives the same model."""
    if container_count > len(tasks):
        raise JobModelError(
            f"job.container.count={container_count} is more than the job's {len(tasks)} tasks; "
            f"lower job.container.count or add input partitions"
        )
    return tuple(
        ContainerModel(str(i), tuple(tasks[j] for j in range(i, len(tasks), container_count)))
        for i in range(container_count)
    )


def fingerprint(
    partition_counts: Mapping[SystemStream, int],
    container_count: int,
    broadcast: Sequence[SystemStreamPartition] = (),
) -> str:
    """What the model depends on: a changed fingerprint means the model must be rebuilt."""
    inputs: dict[str, object] = {
        "containers": container_count,
        "inputs": sorted([str(k), v] for k, v in partition_counts.items()),
    }
    if broadcast:
        inputs["broadcast"] = sorted(list(p) for p in broadcast)
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:16]


def build_job_model(
    partition_counts: Mapping[SystemStream, int],
    container_count: int,
    broadcast: Sequence[SystemStreamPartition] = (),
) -> JobModel:
    """The job model for these inputs and this many containers: every task also gets the `broadcast`
    partitions, which are left out of the grouping; the other partitions of a broadcast stream are grouped
    into tasks like any input's (as Samza does)."""
    for ssp in broadcast:
        count = partition_counts.get(ssp.system_stream, 0)
        if ssp.partition >= count:
            raise JobModelError(
                f"task.broadcast.inputs: {ssp.system}.{ssp.stream}#{ssp.partition} does not exist (the "
                f"stream has {count} partitions)"
            )
    broadcast = sorted(set(broadcast))  # canonical: the same model whatever the order the config lists them
    tasks = [
        TaskModel(t.name, (*t.partitions, *broadcast))
        for t in group_by_partition(partition_counts, broadcast)
    ]
    containers = balance(tasks, container_count)
    return JobModel(fingerprint(partition_counts, container_count, broadcast), containers)
