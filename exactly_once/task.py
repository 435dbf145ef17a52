"""One task's exactly-once state: identity, generation, versions, output tags, markers, aligner and buffer.

The run loop and the container drive it (docs/exactly-once.md, "Checkpoint of version V"):

- A *source* task (no intermediate input) builds version V between two commits; its commit timer cuts
  V. An *aligned* task (some intermediate input) cuts V when its `BarrierAligner` says every upstream
  producer closed V on every intermediate input partition.
- Every record the task sends to an intermediate stream carries its tag (producer, generation, version,
  sequence per output partition); records to other streams (sinks) go in the task's Kafka transaction.
- A cut writes the checkpoint (input offsets capped so that no buffered record, marker or restore command
  above the cut is passed, this state, the store markers) in the task's transaction with the sink records,
  commits it, then sends marker V to every partition of every intermediate output stream.
- A start (generation + 1) and a rewind send a restore command instead, naming the last committed version.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.exactly_once.alignment import BarrierAligner
from samsa.exactly_once.buffer import EosBuffer
from samsa.exactly_once.exceptions import ExactlyOnceError
from samsa.exactly_once.protocol import Marker, Producer, RestoreCommand, headers_for, record_header
from samsa.kafka.partitioner import partition_for
from samsa.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)

STATE_FORMAT = 1

#: Sends one record: (topic, value, key, partition, headers).
Send = Callable[..., None]


@dataclass
class EosState:
    """What a checkpoint holds of an exactly-once task."""

    generation: int = 0
    #: The last version committed (0: none yet).
    committed: int = 0
    #: Last data sequence sent per intermediate output partition (topic, partition).
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)
    #: The aligner's committed state (`BarrierAligner.to_dict`); None for a source task.
    alignment: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "generation": self.generation,
            "committed": self.committed,
            "sequences": sorted([t, p, s] for (t, p), s in self.sequences.items()),
            "alignment": self.alignment,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], task: str) -> EosState:
        if data.get("format") != STATE_FORMAT:
            raise ExactlyOnceError(
                f"task {task}: its checkpoint holds exactly-once state of format {data.get('format')!r}, "
                f"this Samsa reads {STATE_FORMAT}: run the Samsa version that wrote it"
            )
        return cls(
            int(data["generation"]),
            int(data["committed"]),
            {(str(t), int(p)): int(s) for t, p, s in data.get("sequences", [])},
            data.get("alignment"),
        )


class EosTask:
    """A task's exactly-once bookkeeping (module docstring); one per task instance."""

    def __init__(
        self,
        producer: Producer,
        job_tasks: int,
        restored: EosState,
        intermediate_outputs: Mapping[SystemStream, tuple[Send, int]],
        aligner: BarrierAligner | None,
        buffer: EosBuffer | None,
    ) -> None:
        """`restored`: the state of the last checkpoint (a fresh `EosState()` without one); this start is
        its generation + 1. `intermediate_outputs`: stream -> (its producer's send, partition count)."""
        self.producer = producer
        self.job_tasks = job_tasks
        self.generation = restored.generation + 1
        self.committed = restored.committed
        self.sequences = dict(restored.sequences)
        self._committed_sequences = dict(restored.sequences)
        self.outputs = dict(intermediate_outputs)
        self.aligner = aligner
        self.buffer = buffer
        self._round_robin = {s: itertools.count() for s in self.outputs}
        #: Buffer full on a partition the version waits on: partition -> (offset of the first record ahead
        #: left unbuffered, lowest task version left so). The run loop reads it again after the next cut.
        self.reread: dict[SystemStreamPartition, tuple[int, int]] = {}
        #: Partitions being read again -> the offset they had reached: no cut before they reach it again.
        self.rereading: dict[SystemStreamPartition, int] = {}
        #: Input offsets of the last checkpoint (a rewind goes back to them).
        self.committed_offsets: dict[SystemStreamPartition, int] = {}
        self.versions_committed = 0
        self.rewinds = 0
        #: Records left unbuffered over the buffer bound, to read again after a cut.
        self.reread_messages = 0
        #: Aligned versions passed without a checkpoint of their own (merged into the next one).
        self.versions_merged = 0
        #: When the last checkpoint of a version was taken, by the run loop's clock.
        self.cut_at = float("-inf")
        #: Records sent by the task (counted by its collector), to tell an idle version.
        self.sends = 0
        self._sends_at_cut = 0
        self._processed_at_cut: float = 0
        if aligner is not None and aligner.current_version != self.committed + 1:
            raise ExactlyOnceError(
                f"{producer.name}: the checkpoint's alignment state is at version "
                f"{aligner.current_version} but its committed version is {self.committed}: the checkpoint "
                "is inconsistent; reprocess the pipeline from its sources"
            )

    @property
    def version(self) -> int:
        """The version being built."""
        return self.committed + 1

    @property
    def aligned_task(self) -> bool:
        return self.aligner is not None

    # -- the producing side -----------------------------------------------------------------------
    def partition_of(self, stream: SystemStream, key: bytes | None, partition: int | None) -> int:
        """The partition an intermediate record goes to: given, by key (Kafka's murmur2), or round-robin."""
        _, count = self.outputs[stream]
        if partition is not None:
            if not 0 <= partition < count:
                raise ExactlyOnceError(
                    f"send to {stream}: partition {partition} does not exist (the stream has {count})"
                )
            return partition
        if key is not None:
            return partition_for(key, count)
        return next(self._round_robin[stream]) % count

    def tag(self, topic: str, partition: int) -> tuple[str, bytes]:
        """The header of the next data record to (topic, partition)."""
        key = (topic, partition)
        sequence = self.sequences.get(key, 0) + 1
        self.sequences[key] = sequence
        return record_header(self.producer.id, self.generation, self.version, sequence)

    def send_markers(self) -> int:
        """Marker of the last committed version to every partition of every intermediate output."""
        return self._control(
            lambda seq: Marker(
                self.producer.id, self.generation, self.committed, seq, self.producer.job, self.job_tasks
            )
        )

    def send_restore_commands(self) -> int:
        """This generation's restore command (from the last committed version) to every output partition."""
        return self._control(
            lambda seq: RestoreCommand(
                self.producer.id, self.generation, self.committed, seq, self.producer.job, self.job_tasks
            )
        )

    def _control(self, make: Callable[[int], Marker | RestoreCommand]) -> int:
        value = self.producer.control_value()
        sent = 0
        for stream, (send, count) in self.outputs.items():
            for p in range(count):
                send(
                    stream.stream,
                    value,
                    None,
                    p,
                    headers_for(make(self.sequences.get((stream.stream, p), 0))),
                )
                sent += 1
        return sent

    # -- versions ---------------------------------------------------------------------------------
    def idle(self, processed: float) -> bool:
        """Whether nothing was processed (`processed`: the task's count) or sent since the last cut."""
        return processed == self._processed_at_cut and self.sends == self._sends_at_cut

    def cut(
        self, offsets: Mapping[SystemStreamPartition, int], target: int = 0, processed: float = 0
    ) -> tuple[dict[SystemStreamPartition, int], EosState]:
        """Ends the open version: the input offsets its checkpoint may hold and the state to store.

        A source task's new committed version is `target` (its clock's version: the same numbering for
        every source task without a coordinator) or one more than the last, whichever is higher. An aligned
        task must be aligned; its aligner moves on here, over every further version that is aligned too,
        up to the next one with buffered records (one checkpoint for the span)."""
        caps: dict[SystemStreamPartition, int] = {}
        if self.aligner is not None:
            ahead = self.buffer.versions() if self.buffer is not None else []
            ahead += [version for _, version in self.reread.values()]
            current = self.aligner.current_version
            later = [v for v in ahead if v > current]
            caps = self.aligner.advance(min(later) - 1 if later else None)
            self.committed = self.aligner.current_version - 1
        else:
            self.committed = max(self.committed + 1, target)
        capped = dict(offsets)
        for ssp, cap in caps.items():
            if ssp in capped and cap < capped[ssp]:
                capped[ssp] = cap
        firsts = dict(self.buffer.first_offsets()) if self.buffer is not None else {}
        for ssp, (offset, _) in self.reread.items():
            firsts[ssp] = min(offset, firsts.get(ssp, offset))
        for ssp, first in firsts.items():
            if ssp in capped and first < capped[ssp]:
                capped[ssp] = first
        self.versions_committed += 1
        self._committed_sequences = dict(self.sequences)
        self._processed_at_cut, self._sends_at_cut = processed, self.sends
        return capped, self.state()

    def next_to_merge(self, now: float, interval: float | None) -> int | None:
        """The version to move on to without a checkpoint, or None to checkpoint the aligned one now.

        Catching up, the versions after the aligned one are often closed on every channel already, their
        records waiting in the buffer: a checkpoint (a transaction commit) for each would bound the
        catch-up by commit latency. So the open version moves on to the next buffered version when that
        one is closed too, unless a checkpoint is due (its commit `interval` since the last one); the next
        checkpoint covers them all. It never moves into a version still open upstream: a task whose
        upstream stops keeps nothing uncommitted that it could have committed."""
        aligner, buffer = self.aligner, self.buffer
        if aligner is None or buffer is None or self.reread or not interval or now - self.cut_at >= interval:
            return None
        current = aligner.current_version
        later = [v for v in buffer.versions() if v > current]
        if not later or min(later) > aligner.closed_through():
            return None
        return min(later)

    def state(self) -> EosState:
        """The state a checkpoint of the last committed version holds."""
        return EosState(
            self.generation,
            self.committed,
            dict(self.sequences),
            None if self.aligner is None else self.aligner.to_dict(),
        )

    def rewound(self) -> None:
        """After a rewind to the last checkpoint: a new generation from the checkpoint's sequences."""
        self.generation += 1
        self.sequences = dict(self._committed_sequences)
        self.rewinds += 1
