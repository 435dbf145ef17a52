"""Errors raised by the runtime: configuration, tasks, containers and the job model."""

from collections.abc import Collection, Mapping

from samsa.exceptions import InvalidConfigError, SamsaError


class RuntimeSamsaError(SamsaError):
    """Base class of the runtime package's errors."""


class ConfigError(RuntimeSamsaError, InvalidConfigError):
    """A job configuration key is missing, unknown, malformed or not supported yet."""


class TaskError(RuntimeSamsaError):
    """A task failed while processing, windowing, committing or closing."""


class UndeclaredOutputError(TaskError, InvalidConfigError):
    """An exactly-once task sent to a stream `task.outputs` does not list: every restart sends there again
    (a config fix, not a restart, mends it)."""


class UserCodeError(TaskError):
    """The job's own code raised: the task's methods (`init`, `process`, `window`, `close`, a scheduler
    callback), or a serde, store engine or extractor calling sys.exit() (`user_errors.escaped`); `__cause__`
    is what it raised, whose traceback the CLI shows."""


class MessageDeserializationError(RuntimeSamsaError):
    """An input record the task cannot take under the `fail` bad-message policy (it does not decode, an
    adjunct stream's record yields nothing to store, an intermediate stream's record lacks the exactly-once
    header): its offset is not checkpointed, so a restart meets it again."""


class JobModelError(RuntimeSamsaError):
    """The job model cannot be built or read (e.g. more containers than tasks)."""


class ContainerError(RuntimeSamsaError):
    """A container could not start or stopped abnormally."""


class ContainerAlreadyRunningError(ContainerError):
    """Another process on this machine holds the container's lock: a restart here is refused the same way
    for as long as that one runs, so a supervisor ends the job instead of restarting it in a loop."""


class StateKeysMovedError(RuntimeSamsaError, InvalidConfigError):
    """An input grouped into tasks has another partition count than in the job model published before, while
    a store keeps per-task state across starts in a changelog holding data: the new count moved keys to
    other tasks, away from their state. A restart meets it again: a config-like error, not restarted."""

    def __init__(
        self,
        job: str,
        changes: Mapping[str, tuple[int, int]],
        changelogs: Mapping[str, str],
        blob_backed: Collection[str],
        store_dirs: str,
    ) -> None:
        self.job = job
        #: `system.stream` -> (its partition count in the published job model, its count now).
        self.changes = dict(changes)
        #: store -> its changelog (`system.stream`), each holding data.
        self.changelogs = dict(changelogs)
        listed = ", ".join(f"{ss}: {was} -> {now} partitions" for ss, (was, now) in self.changes.items())
        stores = ", ".join(f"store {s!r} (changelog {log})" for s, log in self.changelogs.items())
        topics = ", ".join(log.split(".", 1)[1] for log in self.changelogs.values())
        forget = " ".join(f"--store {s}" for s in self.changelogs)
        blob = sorted(blob_backed)
        also_blob = (
            f"; store(s) {', '.join(repr(s) for s in blob)} are backed up to the blob store too, whose "
            "checkpoints name snapshots of the old counts: start those over under a new job.id as well "
            "(no checkpoints, no state; inputs start at samza.offset.default)"
            if blob
            else ""
        )
        super().__init__(
            f"job {job}: input partition counts changed since its job model was published ({listed}, "
            f"model -> now), and {stores} keep(s) state per task. A key's task follows from the partition "
            "counts, so keys moved to other tasks, and the state of each would stay in a task its messages "
            "no longer reach (its state split across tasks): the start is refused; nothing was published, "
            "restored or committed. To go on, either keep the inputs' partition counts (a new topic with the "
            "old count, producers moved to it, task.inputs pointed at it), or start the state over for the "
            f"new count (the state is lost): delete changelog topic(s) {topics} and the stores' local "
            f"directories ({store_dirs}, on every host that ran the job), drop their positions from the "
            f"checkpoints (`samsa checkpoint forget-changelog <job config> {forget}`: else the start is "
            f"refused as a lost changelog){also_blob}, then start the job and "
            "rebuild the state from its source (docs/state-bootstrap.md). See docs/running.md (input "
            "partitions added)"
        )


class TopicsOfAnotherJobError(ConfigError):
    """The job's coordinator or checkpoint topic holds another job's job model or checkpoints: their job.name
    and job.id differ only by '_' vs '-', which the topic names blur. A restart meets it again."""

    def __init__(self, job: str, owner: str, topic: str, topics: str) -> None:
        #: This job and the job the topic belongs to, each as `job.name=..., job.id=...`.
        self.job, self.owner, self.topic = job, owner, topic
        super().__init__(
            f"{job}: topic {topic} belongs to another job, {owner}: the internal topics of a job are named "
            "after its job.name and job.id with each '_' turned into '-', so both jobs get the same ones "
            f"({topics}). Starting would read and overwrite the other job's job model and checkpoints (each "
            "job resuming from the other's offsets and state): the start is refused; nothing was written. "
            "Give one of the two jobs another job.name or job.id, one that differs by more than '_' vs '-' "
            "(a job that has run starts over under new names: no checkpoints, no state; rename the one that "
            f"has not). If this job is the other one renamed, set its names back: {owner}"
        )
