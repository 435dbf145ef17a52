"""Barrier alignment of one task's intermediate inputs: process, buffer or drop each record, cut versions.

Pure state machine (no I/O, no threads, clock injected); the run loop feeds it what it reads and acts on
what it answers. Terms (the seed's, SEP-10 solution 3):

- A *channel* is (input partition, producer): many producers may share one partition. Each producer
  cuts its own versions: its record of version V lies between its markers V-1 and V on that partition.
- The task builds its own *current version* C (the one it checkpoints next; a fresh task builds 1).
  A channel maps producer versions onto task versions by a fixed `offset` (producer version = task
  version + offset) chosen when the channel is first seen: its next version maps to C ("join now").
  Producers that start together (their restore command R=0 first on every partition, the seed's start
  step 4) all get offset 0, so versions are global as in the seed; a producer that appears later (an
  upstream task added, a producer first seen late) joins at the task's current version instead of
  landing in an already committed one. Offsets never change afterwards: a checkpoint holds them.
- A marker V closes every version up to V on its channel (a producer whose clock-cut versions jumped
  ahead after an idle or down time sends one marker for the span).
- The task is *aligned* for C when every expected channel has closed its version C + offset (marker,
  or a restore command's version) and at least one channel has reached C. Expected channels: every
  producer seen on any partition of a stream is expected on every input partition of that stream (the
  protocol sends markers to every partition), and a stream whose markers state `tasks` = N producers
  of a job waits until N of them were seen. `waiting_for()` names what is missing.
- The *cut* of a channel is the producer version the last committed task version covers. A record
  at or below its channel's cut is a duplicate; one in the current version is processed; one above is
  buffered for its task version; a record of generation g whose producer restored version R in a later
  generation is stale when its version is above R (restore fences are global to the producer, so old
  records still in flight on partitions the restore command has not reached yet are dropped too).
  Sequences: a record whose sequence is at most the last one seen from its producer *and generation*
  on that partition is a duplicate (a restarted producer reuses the sequences after its checkpoint).

Checkpoints and re-reading (matches `EosBuffer`'s crash rule): the state `to_dict()` returns is the
committed cut, nothing above it. After a restart or a `Rewind` the run loop resumes its inputs at the
checkpointed offsets, and everything above the cut is read again: buffered records (the buffer's
`first_offset` caps the checkpointed offset) and the markers and restore commands above the cut
(`advance()` returns their lowest offsets: the checkpointed offset must not pass them either).

Recovery (issue item 6): `on_restore` records the fence; when the task has already processed, in its
uncommitted version, a record the fence makes stale, it resets itself to its last checkpoint and
returns `Rewind`: the run loop then discards the store overlay, aborts its uncommitted changelog and
sink writes, resets the buffer (`EosBuffer.reset_to_checkpoint`), seeks every input to the checkpointed
offsets, bumps its own generation and sends its own restore command (its last checkpointed version)
to every output partition, then drains the buffer of its current version again. A restore whose
version is below a marker already seen from that producer means the upstream lost committed state:
`AlignmentError`.

Upstream resizing: a producer seen for the first time joins (above); a job with more distinct producers
than it states is an `AlignmentError` naming the stream. A restore command (sent only by a new
incarnation) stating fewer tasks for its job than stated before, not made up for by retired producers of
that job, is a notice (`take_notices()`, logged): the removed tasks are still awaited until they are
retired (below), which their retired records may say before or after that restart. A producer that
stops sending markers (removed, dead or slow) stalls alignment: `waiting_for()`, `alignment_wait()` and
the run loop's `task.eos.barrier.timeout.ms` log name it; when it is known to be gone for good,
`retire(producer, final_version)` stops waiting for it once its markers reach `final_version` and drops
its later records as stale.

Retiring in band: `samsa eos retire` writes a *retired record* (producer, its last generation, its last
committed version V) to every partition of the gone job's intermediate streams, after the producer
stopped: everything it sent to a partition precedes the record there. `on_retired` takes it at its
position like a restore command: it retires the producer (its last generation G and V, kept through
rewinds and in the checkpoint), closes V on that partition (so the channel is done there; on a partition
whose record is not read yet, the channel is done once its markers reached V), drops the producer's later
records as stale and, when the open version already processed records of it above V (its uncommitted last
version, never to be committed), rewinds. A retired record closing V above the cut caps the checkpointed
offset like a marker, so a restart before the cut passes it reads it again. A retired producer counts
among its job's producers: a restart of that job stating fewer tasks raises no notice when the retired
ones make up the difference, and a job's new producers are counted against its stated task count without
the retired ones. A restore command of a generation newer than G says the retired producer is running
again: `AlignmentError`. One of G or older was written before the retired record (a start makes its
generation durable before it sends its restore commands, and the retirement reads that), so reading it
after the record (on a partition read later, or again after a rewind) is no sign of life: it is a fence
as usual.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple

from samsa.exactly_once.exceptions import AlignmentError
from samsa.exactly_once.protocol import RecordTag
from samsa.streams import SystemStream, SystemStreamPartition

SNAPSHOT_FORMAT = 1
#: How many aligned versions `aligned_versions` remembers (a metric window, not state).
ALIGNED_HISTORY = 1024


# -- what the aligner is fed (the integration maps the protocol's types onto these) ------------------


@dataclass(frozen=True, slots=True)
class Tag:
    """A data record's exactly-once tag."""

    producer: int
    generation: int
    version: int
    sequence: int


@dataclass(frozen=True, slots=True)
class MarkerIn:
    """Checkpoint marker: `producer` sent every record of `version` or older to this partition before it.

    `job` and `tasks` (0: not stated) say how many producers of that job to expect on the stream."""

    producer: int
    generation: int
    version: int
    job: int = 0
    tasks: int = 0


@dataclass(frozen=True, slots=True)
class RestoreIn:
    """`producer` restarted as `generation` from its checkpoint `version`."""

    producer: int
    generation: int
    version: int
    job: int = 0
    tasks: int = 0


@dataclass(frozen=True, slots=True)
class RetiredIn:
    """`producer` (of `job`) is gone for good: its last generation was `generation`, its last committed
    version `version`."""

    producer: int
    generation: int
    version: int
    job: int = 0


# -- what it answers ------------------------------------------------------------------------------


class Action(Enum):
    PROCESS = "process"
    BUFFER = "buffer"
    DROP_DUPLICATE = "drop-duplicate"
    DROP_STALE = "drop-stale"


class Decision(NamedTuple):
    """What to do with a record; `version` is the task version it belongs to (PROCESS, BUFFER)."""

    action: Action
    version: int | None = None


DUPLICATE = Decision(Action.DROP_DUPLICATE)
STALE = Decision(Action.DROP_STALE)


@dataclass(frozen=True, slots=True)
class Rewind:
    """Go back to checkpoint `to_version` (the task's last committed version); see the module docstring.

    Caused by `producer` restoring `restored_version` as `generation`, seen on `partition` (`retired`: by
    its retired record, `restored_version` being its last committed version)."""

    to_version: int
    partition: SystemStreamPartition
    producer: int
    generation: int
    restored_version: int
    retired: bool = False


@dataclass(frozen=True, slots=True)
class Join:
    """A channel seen for the first time at task version `at_version`: producer version = task + offset."""

    partition: SystemStreamPartition
    producer: int
    offset: int
    at_version: int


@dataclass(slots=True)
class _Channel:
    offset: int
    generation: int  # highest generation announced on this partition (only checked leniently)
    marker: int  # highest producer version closed on this partition
    # Not checkpointed: last sequence per generation, and (version, offset) of control records that
    # closed a version above the cut (their offsets cap the next checkpoint's input offsets).
    sequences: dict[int, int] = field(default_factory=dict)
    above: list[tuple[int, int]] = field(default_factory=list)

    def cut_copy(self, cut: int) -> _Channel:
        return _Channel(self.offset, self.generation, min(self.marker, cut))


class _Committed(NamedTuple):
    """The state as of the last committed version: what a checkpoint holds and a rewind goes back to."""

    version: int
    channels: dict[tuple[SystemStreamPartition, int], _Channel]
    producers: dict[SystemStream, set[int]]
    jobs: dict[int, int]
    tasks: dict[tuple[SystemStream, int], int]


def fenced(fences: list[tuple[int, int]], generation: int, version: int) -> bool:
    """Whether a producer's record of (`generation`, `version`) is void: a later generation of it restored a
    version below. `fences`: its (generation, restored version) pairs, sorted."""
    if generation >= fences[-1][0]:
        return False
    # Restored versions never decrease with generations: the first later fence is the tightest.
    for fence_generation, restored in fences:
        if fence_generation > generation:
            return version > restored
    return False


class BarrierAligner:
    """One task's alignment state over its intermediate input partitions (module docstring)."""

    def __init__(
        self,
        partitions: Iterable[SystemStreamPartition],
        *,
        clock: Callable[[], float] = time.monotonic,
        current_version: int = 1,
    ) -> None:
        self._partitions = tuple(sorted(set(partitions)))
        self._inputs = frozenset(self._partitions)
        self._clock = clock
        self._version = current_version
        self._channels: dict[tuple[SystemStreamPartition, int], _Channel] = {}
        self._producers: dict[SystemStream, set[int]] = {}  # seen per stream: expected on all its inputs
        self._jobs: dict[int, int] = {}  # producer -> job, from control records
        self._tasks: dict[tuple[SystemStream, int], int] = {}  # (stream, job) -> stated task count
        # Facts about upstreams, kept through rewinds: producer -> [(generation, restored version)].
        self._fences: dict[int, list[tuple[int, int]]] = {}
        # producer -> (its last generation, final version). A restore command of that generation or older
        # may be read after the retired record (on another partition, or again after a rewind): no restart.
        self._retired: dict[int, tuple[int, int]] = {}
        # Uncommitted work: (producer, generation) -> highest producer version processed.
        self._processed: dict[tuple[int, int], int] = {}
        self._joins: list[Join] = []
        # Upstream shrinks noticed, (stream, job, stated tasks), and the log lines not taken yet.
        self._shrinks: set[tuple[SystemStream, int, int]] = set()
        self._notices: list[str] = []
        self._committed = self._snapshot()
        self._started_at: float | None = None
        self.version_started_at = clock()
        self.aligned_versions: deque[int] = deque(maxlen=ALIGNED_HISTORY)
        self.last_alignment_wait = 0.0
        self.total_alignment_wait = 0.0
        self.duplicates_dropped = 0
        self.stale_dropped = 0
        self.duplicate_control_records = 0
        self.rewinds = 0

    # -- reading --------------------------------------------------------------------------------------

    @property
    def current_version(self) -> int:
        """The version being built: the next one to checkpoint."""
        return self._version

    @property
    def last_committed_version(self) -> int:
        return self._version - 1

    def classify(self, partition: SystemStreamPartition, tag: Tag | RecordTag) -> Decision:
        """What to do with a data record read from `partition` (not from the buffer: `admit_buffered`)."""
        producer, generation, version = tag.producer, tag.generation, tag.version
        channel = self._channels.get((partition, producer))
        if channel is None:
            self._check_input(partition)
            if self._is_stale(producer, generation, version):
                self.stale_dropped += 1
                return STALE
            channel = self._join(partition, producer, generation, version - 1)
        elif generation > channel.generation:
            raise AlignmentError(
                f"{partition}: a record of producer {producer} generation {generation} came before that "
                f"generation's restore command (last generation announced: {channel.generation}); two "
                "tasks may share this producer id, or the producer skipped its restore command"
            )
        if self._is_stale(producer, generation, version):
            self.stale_dropped += 1
            return STALE
        task_version = version - channel.offset
        if task_version < self._version:
            self.duplicates_dropped += 1
            return DUPLICATE
        last = channel.sequences.get(generation)
        if last is not None and tag.sequence <= last:
            self.duplicates_dropped += 1
            return DUPLICATE
        if version > channel.marker + 1:
            raise AlignmentError(
                f"{partition}: producer {producer} sent a record of version {version} but its last marker "
                f"here closed version {channel.marker}: markers {channel.marker + 1}..{version - 1} are "
                "missing (a record out of order, or two tasks sharing this producer id)"
            )
        channel.sequences[generation] = tag.sequence
        if task_version == self._version:
            self._note_processed(producer, generation, version)
            return Decision(Action.PROCESS, task_version)
        return Decision(Action.BUFFER, task_version)

    def admit_buffered(self, partition: SystemStreamPartition, tag: Tag | RecordTag) -> Decision:
        """PROCESS or DROP_STALE for a record drained from the buffer of the current version.

        Buffered records were checked when read; only a restore command seen since can void them."""
        channel = self._channels.get((partition, tag.producer))
        if channel is None or tag.version - channel.offset != self._version:
            raise AlignmentError(
                f"{partition}: a buffered record of producer {tag.producer} version {tag.version} is not "
                f"of the task's current version {self._version}: drain only the current version's buffer, "
                "and reset the buffer on a rewind"
            )
        if self._is_stale(tag.producer, tag.generation, tag.version):
            self.stale_dropped += 1
            return STALE
        self._note_processed(tag.producer, tag.generation, tag.version)
        return Decision(Action.PROCESS, self._version)

    def on_marker(self, partition: SystemStreamPartition, marker: MarkerIn, offset: int) -> bool:
        """Takes a marker read at `offset` of `partition`; returns `aligned`."""
        producer, version = marker.producer, marker.version
        self._check_input(partition)
        self._learn_job(partition, producer, marker.job, marker.tasks, restore=False)
        channel = self._channels.get((partition, producer))
        if channel is None:
            if not self._is_stale(producer, marker.generation, version):
                self._join(partition, producer, marker.generation, version)
            return self.aligned
        if self._is_stale(producer, marker.generation, version):
            self.stale_dropped += 1  # a fenced incarnation still running: its versions are void
        elif version <= channel.marker:
            self.duplicate_control_records += 1
        else:
            # A marker may close several versions at once: a source task cuts its versions by the clock
            # (the same numbering for all producers), so after an idle or down time it jumps ahead. The
            # versions in between hold no record of it (its records carry the open version).
            self._close(channel, version, offset)
        return self.aligned

    def on_restore(self, partition: SystemStreamPartition, command: RestoreIn, offset: int) -> Rewind | None:
        """Takes a restore command read at `offset`; a `Rewind` when uncommitted work used voided records.

        Check `aligned` afterwards too: a restore closes the restored version on its partition."""
        producer, generation, restored = command.producer, command.generation, command.version
        self._check_input(partition)
        retired = self._retired.get(producer)
        if retired is not None and generation > retired[0]:
            raise AlignmentError(
                f"{partition}: producer {producer} was retired at version {retired[1]} as of generation "
                f"{retired[0]} but sent a restore command of generation {generation}: it is running again; "
                "do not retire live producers"
            )
        self._add_fence(partition, producer, generation, restored)
        channel = self._channels.get((partition, producer))
        if channel is None:
            self._learn_job(partition, producer, command.job, command.tasks, restore=True)
            self._join(partition, producer, generation, restored)
        else:
            if generation > channel.generation:
                self._learn_job(partition, producer, command.job, command.tasks, restore=True)
                if restored < channel.marker:
                    raise self._lost_state(partition, producer, generation, restored, channel.marker)
                channel.generation = generation
            else:
                self.duplicate_control_records += 1
            if restored > channel.marker:  # committed, but its marker was never sent (crash in between)
                self._close(channel, restored, offset)
        voided = any(
            p == producer and g < generation and v > restored for (p, g), v in self._processed.items()
        )
        if not voided:
            return None
        self._reset_to_committed()
        return Rewind(self._version - 1, partition, producer, generation, restored)

    def on_retired(self, partition: SystemStreamPartition, record: RetiredIn, offset: int) -> Rewind | None:
        """Takes a retired record read at `offset` (module docstring); a `Rewind` when the open version used
        records of the producer above its final version. Check `aligned` afterwards too."""
        producer, final = record.producer, record.version
        self._check_input(partition)
        known = self._retired.get(producer)
        if known is not None and known[1] != final:
            raise AlignmentError(
                f"{partition}: producer {producer} was retired at version {known[1]} and again at version "
                f"{final}: two retirements disagree (an older checkpoint read, or a producer id shared); "
                "exactly-once cannot continue - reprocess the pipeline from its sources"
            )
        channel = self._channels.get((partition, producer))
        if channel is not None:
            if channel.generation > record.generation:
                raise AlignmentError(
                    f"{partition}: producer {producer} was retired as of generation {record.generation}, but "
                    f"generation {channel.generation} of it was seen: it restarted after the checkpoint the "
                    "retirement was read from; do not retire live producers"
                )
            if channel.marker > final:
                raise AlignmentError(
                    f"{partition}: producer {producer} was retired at version {final}, but its marker of "
                    f"version {channel.marker} was already seen: the retirement read an older checkpoint "
                    "than its last; exactly-once cannot continue - reprocess the pipeline from its sources"
                )
        if record.job:
            self._jobs[producer] = record.job
        # Two retirements of the same final version differ in generation only when a start in between
        # re-committed that version: the later one's generation is the producer's last.
        generation = record.generation if known is None else max(known[0], record.generation)
        self._retired[producer] = (generation, final)
        if channel is None:
            # Everything it sent here precedes this record: a producer first seen now is done at once.
            self._join(partition, producer, record.generation, final)
        elif final > channel.marker:  # committed, but its marker never reached this partition
            self._close(channel, final, offset)
        elif known is not None:
            self.duplicate_control_records += 1
        if not any(p == producer and v > final for (p, _), v in self._processed.items()):
            return None
        self._reset_to_committed()
        return Rewind(self._version - 1, partition, producer, record.generation, final, retired=True)

    # -- versions -------------------------------------------------------------------------------------

    @property
    def aligned(self) -> bool:
        """Every expected channel closed the current version, and at least one reached it."""
        missing, reached = self._scan()
        return reached and not missing

    def waiting_for(self) -> list[tuple[SystemStreamPartition, int | None]]:
        """(partition, producer) still missing for the current version; producer None: a producer its
        job's markers announce that was not seen yet."""
        return self._scan()[0]

    @property
    def alignment_started_at(self) -> float | None:
        """When the first channel closed the current version (the barrier's start), by the clock."""
        return self._started_at

    def alignment_wait(self) -> float:
        """Seconds since the barrier of the current version started; 0 when none did."""
        return 0.0 if self._started_at is None else self._clock() - self._started_at

    def advance(self, limit: int | None = None) -> dict[SystemStreamPartition, int]:
        """Moves past the current version once it is aligned and its checkpoint is written: to the highest
        version every expected channel has closed (producers that number versions by the clock jump), but
        not past `limit` (the caller's: below the next version with buffered records, to drain them first).

        Returns, per partition, the lowest offset of a marker or restore command above the new cut: the
        offsets checkpointed for this version must not pass them (as they must not pass a buffered record).
        Then write `to_dict()` with the checkpoint, and drain the buffer of the new current version."""
        missing, reached = self._scan()
        if missing or not reached:
            raise AlignmentError(
                f"advance() called before version {self._version} is aligned; still waiting for {missing}"
            )
        now = self._clock()
        wait = 0.0 if self._started_at is None else now - self._started_at
        self.last_alignment_wait = wait
        self.total_alignment_wait += wait
        reach = self._reach()
        if limit is not None:
            reach = min(reach, limit)
        self._version = max(self._version, reach)
        self.aligned_versions.append(self._version)
        self._version += 1
        self._processed.clear()
        caps: dict[SystemStreamPartition, int] = {}
        for (partition, _), channel in self._channels.items():
            cut = self._version - 1 + channel.offset
            channel.above = [(v, o) for v, o in channel.above if v > cut]
            for _, o in channel.above:
                if o < caps.get(partition, o + 1):
                    caps[partition] = o
        self._committed = self._snapshot()
        self.version_started_at = now
        self._started_at = now if self._scan()[1] else None
        return caps

    def closed_through(self) -> int:
        """The highest task version every expected channel has closed (call when aligned)."""
        return self._reach()

    def pass_to(self, version: int) -> None:
        """Moves the open version on to `version` without a checkpoint, the versions before it being
        closed on every channel (`closed_through`): the next checkpoint covers them all. A task catching
        up merges versions this way. `version` itself is closed too, so the task is aligned again."""
        reach = self._reach()
        if not self.aligned or not self._version < version <= reach:
            raise AlignmentError(
                f"pass_to({version}) from version {self._version}: only versions up to {reach} are closed "
                f"on every channel (aligned: {self.aligned})"
            )
        self._version = version
        self.version_started_at = now = self._clock()
        self._started_at = now if self._scan()[1] else None

    def retire(self, producer: int, final_version: int, generation: int | None = None) -> None:
        """`producer` is gone for good after its version `final_version` (its last generation `generation`;
        None: the highest seen): stop waiting for it once its markers reach that version, and drop its
        records above it as stale."""
        last = self._known_generation(producer) if generation is None else generation
        self._retired[producer] = (last, final_version)

    def offset(self, partition: SystemStreamPartition, producer: int) -> int | None:
        """Producer version minus task version on that channel; None while it was never seen."""
        channel = self._channels.get((partition, producer))
        return None if channel is None else channel.offset

    def take_joins(self) -> list[Join]:
        """Channels seen for the first time since the last call (for a log line)."""
        joins, self._joins = self._joins, []
        return joins

    def take_notices(self) -> list[str]:
        """What the upstream did that stalls this task until someone acts (a shrink), since the last call."""
        notices, self._notices = self._notices, []
        return notices

    # -- snapshot -------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The state as of the last committed version, JSON-ready, for that version's checkpoint."""
        version, channels, producers, jobs, tasks = self._committed
        return {
            "format": SNAPSHOT_FORMAT,
            "current_version": version,
            "channels": [
                [p.system, p.stream, p.partition, producer, c.offset, c.generation, c.marker]
                for (p, producer), c in sorted(channels.items(), key=lambda item: (item[0][0], item[0][1]))
            ],
            "producers": [[s.system, s.stream, sorted(ids)] for s, ids in sorted(producers.items()) if ids],
            "jobs": sorted([producer, job] for producer, job in jobs.items()),
            "tasks": sorted([s.system, s.stream, job, n] for (s, job), n in tasks.items()),
            "fences": sorted([p, g, v] for p, fences in self._fences.items() for g, v in fences),
            "retired": sorted([p, v] for p, (_, v) in self._retired.items()),
            # A key of its own: a Samsa without it reads this state as before (generation-blind).
            "retired_generations": sorted([p, g] for p, (g, _) in self._retired.items()),
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        partitions: Iterable[SystemStreamPartition],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> BarrierAligner:
        """The aligner of a task restarting from the checkpoint that stored `data`."""
        if data.get("format") != SNAPSHOT_FORMAT:
            raise AlignmentError(
                f"alignment state has format {data.get('format')!r}, this Samsa reads {SNAPSHOT_FORMAT}: "
                "restore with the Samsa version that wrote the checkpoint"
            )
        aligner = cls(partitions, clock=clock, current_version=int(data["current_version"]))
        for system, stream, number, producer, off, generation, marker in data["channels"]:
            partition = SystemStreamPartition(system, stream, number)
            aligner._check_input(partition)
            aligner._channels[(partition, producer)] = _Channel(off, generation, marker)
        for system, stream, ids in data["producers"]:
            aligner._producers[SystemStream(system, stream)] = set(ids)
        aligner._jobs = {producer: job for producer, job in data["jobs"]}
        aligner._tasks = {(SystemStream(system, stream), job): n for system, stream, job, n in data["tasks"]}
        for producer, generation, version in data["fences"]:
            aligner._fences.setdefault(producer, []).append((generation, version))
        generations = {producer: generation for producer, generation in data.get("retired_generations", ())}
        # A state saved before retirements kept their generation: take the highest generation of the
        # producer it knows. Its last generation's restore command precedes the retired record on the
        # partition that record was read from, so its fence is in the state, unless that start died
        # part-way through its restore commands: then one read later still fails as "running again", as
        # every one did when the state was saved (never laxer than that).
        aligner._retired = {
            producer: (generations.get(producer, aligner._known_generation(producer)), version)
            for producer, version in data["retired"]
        }
        aligner._committed = aligner._snapshot()
        return aligner

    # -- internals ------------------------------------------------------------------------------------

    def _check_input(self, partition: SystemStreamPartition) -> None:
        if partition not in self._inputs:
            raise AlignmentError(
                f"{partition} is not an intermediate input of this task (inputs: "
                f"{', '.join(map(str, self._partitions)) or 'none'})"
            )

    def _join(
        self, partition: SystemStreamPartition, producer: int, generation: int, closed: int
    ) -> _Channel:
        offset = closed + 1 - self._version
        channel = self._channels[(partition, producer)] = _Channel(offset, generation, closed)
        self._producers.setdefault(partition.system_stream, set()).add(producer)
        self._joins.append(Join(partition, producer, offset, self._version))
        return channel

    def _close(self, channel: _Channel, version: int, offset: int) -> None:
        channel.marker = version
        channel.above.append((version, offset))
        if self._started_at is None and version - channel.offset >= self._version:
            self._started_at = self._clock()

    def _known_generation(self, producer: int) -> int:
        """The highest generation of `producer` seen (its restore commands and channels); 0: none."""
        seen = [g for g, _ in self._fences.get(producer, ())]
        seen += [c.generation for (_, p), c in self._channels.items() if p == producer]
        return max(seen, default=0)

    def _is_stale(self, producer: int, generation: int, version: int) -> bool:
        fences = self._fences.get(producer)
        if fences is not None and fenced(fences, generation, version):
            return True
        # Whatever the generation: one newer than the retired one is preceded by its restore command
        # (refused), so only records of the retired incarnations get here, and above the final version
        # they are its uncommitted last version.
        retired = self._retired.get(producer)
        return retired is not None and version > retired[1]

    def _note_processed(self, producer: int, generation: int, version: int) -> None:
        key = (producer, generation)
        if version > self._processed.get(key, version - 1):
            self._processed[key] = version

    def _add_fence(
        self, partition: SystemStreamPartition, producer: int, generation: int, restored: int
    ) -> None:
        fences = self._fences.setdefault(producer, [])
        for fence_generation, fence_version in fences:
            if fence_generation == generation:
                if fence_version != restored:
                    raise AlignmentError(
                        f"{partition}: producer {producer} generation {generation} restored version "
                        f"{restored}, but restored {fence_version} on another partition: two tasks share "
                        "this producer id"
                    )
                return
            if (fence_generation < generation and fence_version > restored) or (
                fence_generation > generation and fence_version < restored
            ):
                raise self._lost_state(partition, producer, generation, restored, fence_version)
        for (p, producer_id), channel in self._channels.items():
            if producer_id == producer and channel.generation < generation and channel.marker > restored:
                raise self._lost_state(p, producer, generation, restored, channel.marker)
        fences.append((generation, restored))
        fences.sort()

    @staticmethod
    def _lost_state(
        partition: SystemStreamPartition, producer: int, generation: int, restored: int, seen: int
    ) -> AlignmentError:
        return AlignmentError(
            f"{partition}: producer {producer} restarted (generation {generation}) from version {restored}, "
            f"but version {seen} of it was already committed (marked): the upstream task lost committed "
            "state (checkpoint deleted or rolled back?); exactly-once cannot continue - reprocess the "
            "pipeline from its sources"
        )

    def _learn_job(
        self, partition: SystemStreamPartition, producer: int, job: int, tasks: int, *, restore: bool
    ) -> None:
        if not job:
            return
        stream = partition.system_stream
        self._jobs[producer] = job
        if tasks:
            key = (stream, job)
            known = self._tasks.get(key, 0)
            if tasks > known:
                self._tasks[key] = tasks
            elif tasks < known and restore and (stream, job, tasks) not in self._shrinks:
                retired = self._retired_of(stream, job)
                if tasks < known - retired:
                    # Not an error: the removed tasks' retired records may come after this restart in the
                    # log, and reading them (in band) ends the wait.
                    self._shrinks.add((stream, job, tasks))
                    self._notices.append(
                        f"stream {stream}: producer {producer} restarted stating {tasks} tasks for its job, "
                        f"which had {known} ({retired} retired): the upstream job shrank, and this task "
                        "waits for the markers of its removed tasks until they are retired: run samsa eos "
                        "retire --task <removed task> with the upstream job's config"
                    )
        # Retired producers are gone: a job's new producers are counted without them.
        known_ids = [
            p for p in self._producers.get(stream, ()) if self._jobs.get(p) == job and p not in self._retired
        ]
        limit = self._tasks.get((stream, job), 0)
        # A retired producer's own control records (read late on a partition) are none of a new producer's.
        if limit and producer not in known_ids and producer not in self._retired and len(known_ids) >= limit:
            raise AlignmentError(
                f"stream {stream}: producer {producer} is producer number {len(known_ids) + 1} of a job "
                f"stating {limit} tasks: the upstream job grew without saying so, or two jobs share "
                "job name and id"
            )

    def _retired_of(self, stream: SystemStream, job: int) -> int:
        """How many producers of `job` seen on `stream` are retired."""
        return sum(
            1 for p in self._producers.get(stream, ()) if p in self._retired and self._jobs.get(p) == job
        )

    def _scan(self) -> tuple[list[tuple[SystemStreamPartition, int | None]], bool]:
        version = self._version
        missing: list[tuple[SystemStreamPartition, int | None]] = []
        reached = False
        channels, retired = self._channels, self._retired
        for partition in self._partitions:
            stream = partition.system_stream
            producers = self._producers.get(stream, ())
            for producer in sorted(producers):
                channel = channels.get((partition, producer))
                final = retired[producer][1] if producer in retired else None
                if channel is None:
                    if final is None:
                        missing.append((partition, producer))
                elif channel.marker - channel.offset >= version:
                    reached = True
                elif final is None or channel.marker < final:
                    missing.append((partition, producer))
            for (s, job), stated in self._tasks.items():
                if s == stream:
                    seen = sum(1 for p in producers if self._jobs.get(p) == job)
                    missing.extend((partition, None) for _ in range(stated - seen))
        return missing, reached

    def _reach(self) -> int:
        """The highest task version every expected channel has closed (call when aligned)."""
        low: int | None = None
        for partition in self._partitions:
            for producer in self._producers.get(partition.system_stream, ()):
                channel = self._channels.get((partition, producer))
                if channel is None:
                    continue
                retired = self._retired.get(producer)
                if retired is not None and channel.marker >= retired[1]:
                    continue  # gone for good, and done: it holds back no version
                closed = channel.marker - channel.offset
                low = closed if low is None else min(low, closed)
        return self._version if low is None else low

    def _snapshot(self) -> _Committed:
        cut = self._version - 1
        return _Committed(
            self._version,
            {key: c.cut_copy(cut + c.offset) for key, c in self._channels.items()},
            {s: set(ids) for s, ids in self._producers.items()},
            dict(self._jobs),
            dict(self._tasks),
        )

    def _reset_to_committed(self) -> None:
        version, channels, producers, jobs, tasks = self._committed
        self._version = version
        self._channels = {key: c.cut_copy(c.marker) for key, c in channels.items()}
        self._producers = {s: set(ids) for s, ids in producers.items()}
        self._jobs, self._tasks = dict(jobs), dict(tasks)
        self._processed.clear()
        self._started_at = None
        self.version_started_at = self._clock()
        self.rewinds += 1
