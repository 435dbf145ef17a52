"""Offsets of a job's input partitions: where a task starts one, and where a reset target (earliest,
latest, the first at a time) is."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Set

from samsa.checkpoint.model import AnyCheckpoint
from samsa.kafka import KafkaConsumer
from samsa.kafka.record_marks import RecordMark, differs
from samsa.runtime.config.job import JobConfig, StreamSettings
from samsa.runtime.coordinator import client_config
from samsa.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)


def recreated_since(mark: RecordMark | None, first: RecordMark | None) -> str | None:
    """Why a partition was deleted and recreated since the run whose checkpoint marked its first record
    (`mark`), judging by the first record it holds now (`first`, None when empty); None when it was not,
    or when that cannot be told (no mark; the marked record is gone, by retention or compaction)."""
    if mark is None or first is None:
        # Empty now: a checkpoint past the end is caught by the watermarks (`start_offset`).
        return None
    if first.offset < mark.offset:
        # Retention and compaction only remove records: an older first record means a new topic.
        return (
            f"its first record is now at offset {first.offset}, before offset {mark.offset}, the first "
            "one when the checkpointed run started"
        )
    if first.offset > mark.offset:
        return None  # the marked record expired (retention) or was compacted away: nothing to compare
    return differs(
        mark, first, "the first record when the checkpointed run started", "the checkpointed run saw"
    )


def known_partition_counts(checkpoints: Iterable[AnyCheckpoint]) -> dict[SystemStream, int]:
    """Per input stream the job has checkpointed (`checkpoints`: every task's), its partition count when
    the job first checkpointed it: the fewest any task's checkpoint recorded, else (checkpoints of an older
    Samsa, which record none) the lowest partition number no task checkpointed."""
    recorded: dict[SystemStream, int] = {}
    seen: dict[SystemStream, set[int]] = {}
    for checkpoint in checkpoints:
        for stream, count in checkpoint.input_counts.items():
            # The fewest: a sibling that ran on an older job model, before the topic grew, knew fewer.
            recorded[stream] = min(count, recorded.get(stream, count))
        for ssp in checkpoint.offsets:
            seen.setdefault(ssp.system_stream, set()).add(ssp.partition)
    # An older Samsa's rule, kept for its checkpoints: every partition none of them holds was added since
    # (one of a broadcast stream that it left unread, too); recorded, the count carries that on.
    legacy = {stream: min(set(range(len(ns) + 1)) - ns) for stream, ns in seen.items()}
    return {**legacy, **recorded}


def added_since(
    ssp: SystemStreamPartition, known: Mapping[SystemStream, int], checkpointed: Set[SystemStreamPartition]
) -> bool:
    """Whether `ssp` was added to its topic since the job first checkpointed the stream (`known`:
    `known_partition_counts`), while it ran or while it was down, and no task checkpointed it since
    (`checkpointed`: the partitions any task has a checkpointed offset of). A partition numbered below that
    count without a checkpoint was not: its container has not started (or committed) yet on the job's
    first start, or first start since the stream was added to task.inputs; a sibling container's checkpoint
    of the stream's other partitions must not make it skip `samza.offset.default`."""
    count = known.get(ssp.system_stream)
    # One a task checkpointed was read: another task given it (made broadcast) starts at the default.
    return count is not None and ssp.partition >= count and ssp not in checkpointed


def recorded_partition_counts(
    known: Mapping[SystemStream, int], model_counts: Mapping[SystemStream, int]
) -> dict[SystemStream, int]:
    """The partition count of each input stream that a run's checkpoints record: the one the job knew
    (`known_partition_counts`), else, on the job's first checkpoint of the stream, the job model's
    (`model_counts`: the count every container of the model is given, whichever starts first); never more
    than the model's (a topic recreated with fewer partitions: those it gains later are new)."""
    out = dict(model_counts)
    for stream, count in known.items():
        out[stream] = min(count, model_counts.get(stream, count))
    return out


def start_offset(
    ssp: SystemStreamPartition,
    settings: StreamSettings,
    saved: int | None,
    watermarks: tuple[int, int],
    added_since: bool,
    recreated: str | None = None,
    kept: bool = False,
) -> int:
    """Where a task starts reading `ssp`: at its checkpointed offset `saved` (ignored with
    `samza.reset.offset`) kept within the partition's `watermarks`; without one, at the oldest offset when
    the partition was added to the topic since the job first checkpointed the stream (`added_since`, as
    the function of that name judges), else at `samza.offset.default`. `recreated` says why the topic was
    deleted and recreated since the checkpoint (`recreated_since`): the partition starts at its oldest
    offset. `kept`: the checkpoint kept `saved` while the stream was not an input (`checkpoint_inputs`)."""
    low, high = watermarks
    default = low if settings.offset_default == "oldest" else high
    if settings.reset_offset or (saved is None and not added_since):
        return default
    if saved is not None and recreated is not None:
        # Everything the new topic holds was written after the checkpoint: its offset `saved` means
        # nothing there, and starting at it would skip the new records before it unread.
        log.warning(
            "topic %r partition %d was deleted and recreated since the checkpoint (%s): its checkpointed "
            "offset %d is of the old topic; starting at the new topic's oldest offset %d so that none of "
            "its records is skipped (to start elsewhere, use `samsa checkpoint reset`)",
            ssp.stream,
            ssp.partition,
            recreated,
            saved,
            low,
        )
        return low
    if saved is None:
        # The topic gained this partition since the job first checkpointed the stream (while it ran or was
        # down), so all it holds is new to the job; `upcoming` would skip it unread.
        log.log(
            logging.WARNING if default != low else logging.INFO,
            "%s: no checkpoint for this partition, numbered past the partitions the stream had when the job "
            "first checkpointed it: it was added since; starting at its oldest offset %d, not at "
            "samza.offset.default=%s (%d), so that none of its messages is skipped",
            ssp,
            low,
            settings.offset_default,
            default,
        )
        return low
    if saved < low:
        log.warning("%s: checkpointed offset %d was deleted by retention; starting at %d", ssp, saved, low)
        return low
    if saved > high:
        # The topic was recreated or truncated: the checkpoint points past its end.
        log.warning(
            "%s: checkpointed offset %d is past the high watermark %d (topic recreated?); "
            "starting at %d per samza.offset.default=%s",
            ssp,
            saved,
            high,
            default,
            settings.offset_default,
        )
        return default
    if kept:
        # Added back to task.inputs: said, since samza.offset.default does not apply to it.
        log.info(
            "%s: added back to the inputs; resuming at offset %d, from the checkpoint kept while its stream "
            "was not an input (to read it again from samza.offset.default=%s instead, set "
            "systems.%s.streams.%s.samza.reset.offset=true for one start, or use `samsa checkpoint reset`)",
            ssp,
            saved,
            settings.offset_default,
            ssp.system,
            ssp.stream,
        )
    return saved


class InputOffsets:
    """Resolves `checkpoint reset --to` style targets (`earliest`, `latest`, epoch ms) per partition, with
    one consumer per system, closed on exit."""

    def __init__(self, job: JobConfig) -> None:
        self.job = job
        self._consumers: dict[str, KafkaConsumer] = {}

    def consumer(self, system: str) -> KafkaConsumer:
        found = self._consumers.get(system)
        if found is None:
            found = self._consumers[system] = KafkaConsumer(client_config(self.job, system))
        return found

    def at(self, ssp: SystemStreamPartition, target: str | int) -> int:
        """The offset of `ssp` at `target`: its low or high watermark, or the first offset at or after a
        time (the high watermark when none is)."""
        consumer = self.consumer(ssp.system)
        tp = (ssp.stream, ssp.partition)
        low, high = consumer.watermarks(tp)
        if target == "earliest":
            return low
        if target == "latest":
            return high
        assert isinstance(target, int)
        return consumer.offsets_for_times([tp], target)[tp]

    def close(self) -> None:
        consumers, self._consumers = self._consumers, {}
        for consumer in consumers.values():
            consumer.close()

    def __enter__(self) -> InputOffsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
