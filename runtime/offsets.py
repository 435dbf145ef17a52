"""Offsets of a job's input partitions: where a task starts one, and where a reset target (earliest,
latest, the first at a time) is."""

from __future__ import annotations

import logging

from samsa.kafka import KafkaConsumer
from samsa.kafka.record_marks import RecordMark, differs
from samsa.runtime.config.job import JobConfig, StreamSettings
from samsa.runtime.coordinator import client_config
from samsa.streams import SystemStreamPartition

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


def start_offset(
    ssp: SystemStreamPartition,
    settings: StreamSettings,
    saved: int | None,
    watermarks: tuple[int, int],
    added_since: bool,
    recreated: str | None = None,
) -> int:
    """Where a task starts reading `ssp`: at its checkpointed offset `saved` (ignored with
    `samza.reset.offset`) kept within the partition's `watermarks`; without one, at the oldest offset when
    no task of the job checkpointed the partition but the job checkpointed other partitions of its stream
    (`added_since`: it was added since), else at `samza.offset.default`. `recreated` says why the topic was
    deleted and recreated since the checkpoint (`recreated_since`): the partition starts at its oldest
    offset."""
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
        # The job checkpointed the stream's other partitions, never this one: it was added since the job
        # last ran (or while it ran), so all it holds is new to the job; `upcoming` would skip it unread.
        log.log(
            logging.WARNING if default != low else logging.INFO,
            "%s: no checkpoint for this partition while the job has checkpoints of the stream's other "
            "partitions: it was added since; starting at its oldest offset %d, not at "
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
