"""Retiring a gone upstream job's producers (`samsa eos retire`): which producers, whether the job may still
run, and the retired records that tell its downstream jobs (docs/exactly-once.md, "Retiring a gone upstream").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from samsa.checkpoint.model import AnyCheckpoint, CheckpointV2
from samsa.checkpoint.starts import ContainerStart
from samsa.exactly_once.exceptions import RetireError
from samsa.exactly_once.protocol import Producer, Retired, headers_for
from samsa.exactly_once.task import EosState
from samsa.kafka.message import Headers
from samsa.streams import SystemStream

#: Below this a quiet checkpoint topic proves little: a source task checkpoints every `task.commit.ms`
#: while it runs, and a slow commit or a GC pause can hold one back for seconds.
MIN_QUIET_MS = 60_000
#: Commit intervals without a checkpoint before a source task counts as stopped.
QUIET_INTERVALS = 10


def default_quiet_ms(commit_ms: int) -> int:
    """How long the job's checkpoints and starts must be quiet before it counts as stopped."""
    return max(MIN_QUIET_MS, QUIET_INTERVALS * commit_ms)


@dataclass(frozen=True)
class Retiree:
    """A task of the gone job as its last checkpoint left it: the producer to retire, its final version."""

    task: str
    producer: Producer
    generation: int
    version: int
    sequences: Mapping[tuple[str, int], int]
    #: Whether it read no intermediate stream: such a task checkpoints every commit interval while it runs.
    source: bool
    #: Epoch ms of its last checkpoint record (None: the broker gave no time).
    checkpointed_ms: int | None


@dataclass(frozen=True)
class Activity:
    """What tells whether the job still runs: live containers here, its recent starts, its current tasks."""

    now_ms: int
    quiet_ms: int
    #: Container id -> its description, for each container of the job with a live pid file on this machine.
    live_here: Mapping[str, str]
    #: Every container start recorded in the job's coordinator topic (the newest per container).
    starts: Sequence[ContainerStart]
    #: Container id -> its tasks, in the job model last published (None: none published).
    model: Mapping[str, frozenset[str]] | None


def retirees(
    job_name: str,
    job_id: str,
    checkpoints: Mapping[str, tuple[AnyCheckpoint, int | None]],
    only: Sequence[str] = (),
) -> list[Retiree]:
    """The producers to retire: every task with a checkpoint (task -> (last checkpoint, its time)), or those
    named in `only`."""
    job = f"{job_name}-{job_id}"
    names = list(dict.fromkeys(only)) or sorted(checkpoints)
    unknown = [n for n in names if n not in checkpoints]
    if unknown:
        raise RetireError(
            f"--task {', '.join(unknown)}: job {job} has no checkpoint of such a task (tasks with "
            f"checkpoints: {', '.join(sorted(checkpoints)) or 'none'}); check job.name, job.id and the task "
            "names"
        )
    out = []
    for name in names:
        checkpoint, stamp = checkpoints[name]
        if not isinstance(checkpoint, CheckpointV2) or checkpoint.exactly_once is None:
            raise RetireError(
                f"task {name} of job {job}: its last checkpoint holds no exactly-once state (written under "
                "at-least-once, or a V1 checkpoint): its records carry no producer to retire"
            )
        state = EosState.from_dict(checkpoint.exactly_once, name)
        producer = Producer.of(job_name, job_id, name)
        source = state.alignment is None
        out.append(Retiree(name, producer, state.generation, state.committed, state.sequences, source, stamp))
    return out


def liveness(job: str, chosen: Sequence[Retiree], activity: Activity) -> tuple[list[str], list[str]]:
    """(signs that the job, or one of the tasks to retire, still runs; reasons why quiet proves nothing)."""
    now, quiet = activity.now_ms, activity.quiet_ms
    names = {r.task for r in chosen}

    def may_run_them(container: str) -> bool:
        # A container of the current model that runs none of these tasks (a shrunk job running without
        # them) is no sign; one the model does not know may be running anything.
        tasks = None if activity.model is None else activity.model.get(container)
        return tasks is None or bool(tasks & names)

    signs = [
        f"{what} has a live process on this machine"
        for container, what in sorted(activity.live_here.items())
        if may_run_them(container)
    ]
    for r in chosen:
        if r.checkpointed_ms is not None and now - r.checkpointed_ms < quiet:
            signs.append(f"task {r.task} checkpointed {_ago(now - r.checkpointed_ms)} ago")
    for start in activity.starts:
        if now - start.started_ms < quiet and may_run_them(start.container_id):
            signs.append(
                f"container {start.container_id} started {_ago(now - start.started_ms)} ago "
                f"({start.describe()})"
            )
    doubts = []
    if not any(r.source for r in chosen):
        doubts.append(
            "its tasks read intermediate streams, and such a task checkpoints only when its own upstream "
            "sends markers: a quiet checkpoint topic does not show that it stopped"
        )
    if any(r.checkpointed_ms is None for r in chosen):
        doubts.append("the broker gave no time for some of its checkpoint records")
    return signs, doubts


def check_stopped(job: str, chosen: Sequence[Retiree], activity: Activity, force: bool) -> list[str]:
    """Raises unless the job looks stopped for good or `force`; returns what was overridden (to print)."""
    signs, doubts = liveness(job, chosen, activity)
    if force:
        return signs + doubts
    quiet = f"{activity.quiet_ms // 1000} s"
    if signs:
        raise RetireError(
            f"job {job} looks alive: {'; '.join(signs)}. Retire only a job that is gone for good: stop it "
            f"(its checkpoints and starts quiet for {quiet}, --quiet-ms), or pass --force if you know it is "
            "stopped. A retired producer that runs again stops its downstream jobs with an AlignmentError"
        )
    if doubts:
        raise RetireError(
            f"cannot tell whether job {job} is stopped: {'; '.join(doubts)}. Make sure it is gone for good "
            "and pass --force"
        )
    return []


def retired_records(
    chosen: Iterable[Retiree], outputs: Mapping[SystemStream, int]
) -> list[tuple[SystemStream, int, bytes, Headers]]:
    """(stream, partition, value, headers) of each retired record: one per producer and output partition."""
    out: list[tuple[SystemStream, int, bytes, Headers]] = []
    for r in chosen:
        value = r.producer.control_value()
        for stream, count in sorted(outputs.items()):
            for p in range(count):
                sequence = r.sequences.get((stream.stream, p), 0)
                tag = Retired(r.producer.id, r.generation, r.version, sequence, r.producer.job)
                out.append((stream, p, value, headers_for(tag)))
    return out


def _ago(ms: int) -> str:
    return f"{max(ms, 0) / 1000:.1f} s"
