"""Tells a job's first start ("no checkpoint yet") from a start whose checkpoints are gone (its checkpoint
topic deleted or emptied), and refuses the latter when the job holds durable state: restored state plus
inputs read again from `samza.offset.default` would count every input twice."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from samsa.checkpoint.compacted_log import read_latest
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.starts import START_KEY_TYPE
from samsa.exactly_once.changelog import CONTROL_KEY, ChangelogReader
from samsa.kafka import KafkaAdmin, KafkaConsumer, KafkaSystemError
from samsa.kafka.message import RawMessage, TopicPartition
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_system, client_config, coordinator_topic
from samsa.runtime.exceptions import ConfigError
from samsa.stores.factory import store_specs
from samsa.streams import SystemStream

log = logging.getLogger(__name__)

# Deciding whether a changelog holds state reads it from its low watermark to the first data record: one
# fetch of a changelog with state, a few of one with control records only. Past this bound (a broker not
# answering, a transaction left open on the changelog hiding what follows it) the start is refused
# rather than held up.
_DECIDE_S = 30.0
# Records asked of the consumer per call, and the longest wait for them.
_BATCH = 1000
_POLL_S = 0.5


class CheckpointsLostError(ConfigError):
    """The job's containers started before, its checkpoint topic holds no checkpoint, and its stores hold
    state: a start would restore that state and process the inputs again on top of it."""


def started_containers(job: JobConfig) -> list[str]:
    """Ids of the job's containers that have a start record in its coordinator topic (they started)."""
    config = {**client_config(job, checkpoint_system(job)), "isolation.level": "read_uncommitted"}
    admin = KafkaAdmin(client_config(job, checkpoint_system(job)))
    try:
        if not admin.partition_counts([coordinator_topic(job)]).get(coordinator_topic(job)):
            return []  # the job never ran (or job.name / job.id names another)
    finally:
        admin.close()
    started = []
    for record in read_latest(config, coordinator_topic(job)):
        try:
            key = json.loads(record.key)
        except ValueError:
            continue
        if isinstance(key, dict) and key.get("type") == START_KEY_TYPE and record.value is not None:
            started.append(str(key.get("container")))
    return sorted(started)


@dataclass(frozen=True, slots=True)
class ChangelogState:
    """A store's changelog holding committed data records: what a restore would apply."""

    changelog: SystemStream
    #: Where its first data record lies ("holds data records (partition p, offset o)"), or why it counts as
    #: state unread ("could not be read ... within 30 s").
    where: str
    #: Offsets across its partitions, low to high watermark: records, plus transaction markers and aborted
    #: writes (compaction leaves gaps, so an upper bound of its records).
    offsets: int
    #: Its partitions holding records.
    partitions: int


def stores_with_state(job: JobConfig, changelog_partitions: int) -> dict[str, str]:
    """Store -> where its durable state lies: a changelog holding a committed data record, one a restore
    would apply. A store backed up to the blob store only has no state without a checkpoint (its snapshots
    are named by checkpoints; its restore starts it empty), and its local directories also remain after a
    first start whose start-up commit failed."""
    return {
        store: f"changelog {held.changelog} {held.where}"
        for store, held in changelog_states(job, changelog_partitions).items()
    }


def changelog_states(job: JobConfig, changelog_partitions: int) -> dict[str, ChangelogState]:
    """Store -> what its changelog holds, for the stores whose changelog holds a committed data record
    (`stores_with_state`). Asks the watermarks first: a changelog's records are read only when it has some,
    up to its first data record."""
    # state builds on the coordinator, as this module does
    from samsa.runtime.state import changelogs

    specs = store_specs(job.config)
    held: dict[str, ChangelogState] = {}
    consumers: dict[str, KafkaConsumer] = {}
    try:
        for store, stream in changelogs(job, specs).items():
            if stream.system not in consumers:
                # Aborted writes and transaction markers count in the watermarks, never in a restore.
                config = {**client_config(job, stream.system), "isolation.level": "read_committed"}
                consumers[stream.system] = KafkaConsumer(config)
            consumer = consumers[stream.system]
            ranges: dict[TopicPartition, tuple[int, int]] = {}
            for partition in range(changelog_partitions):
                tp = (stream.stream, partition)
                try:
                    low, high = consumer.watermarks(tp)
                except KafkaSystemError:  # a changelog not created yet (or smaller) holds nothing there
                    break
                if high > low:
                    ranges[tp] = (low, high)
            where = _first_data_record(consumer, ranges, job.exactly_once) if ranges else None
            if where is not None:
                offsets = sum(high - low for low, high in ranges.values())
                held[store] = ChangelogState(stream, where, offsets, len(ranges))
    finally:
        for consumer in consumers.values():
            consumer.close()
    return held


def _first_data_record(
    consumer: KafkaConsumer, ranges: Mapping[TopicPartition, tuple[int, int]], exactly_once: bool
) -> str | None:
    """Where the first data record of these partitions ((low, high) each) lies, None when they hold none:
    only exactly-once control records (abort and commit records), transaction markers and aborted writes.
    Reads from the low watermarks and stops at the first data record, so a large changelog costs one fetch;
    one not read to a decision within `_DECIDE_S` counts as state (the safe side: the start is refused)."""
    readers = {tp: ChangelogReader() for tp in ranges} if exactly_once else {}
    left = dict(ranges)
    deadline = time.monotonic() + _DECIDE_S
    consumer.assign({tp: low for tp, (low, _) in ranges.items()})
    try:
        while left:
            if time.monotonic() >= deadline:
                tps = ", ".join(f"partition {p} from offset {ranges[(t, p)][0]}" for t, p in sorted(left))
                return f"could not be read to its first data record within {_DECIDE_S:.0f} s ({tps})"
            msgs = consumer.consume(_BATCH, _POLL_S)
            for tp, batch in _by_partition(msgs).items():
                if tp not in left:
                    continue
                reader = readers.get(tp)
                # An exactly-once restore skips control records and drops the writes an abort record
                # voided; an at-least-once one applies every record, but control records left by an
                # exactly-once start before it are no state either (their reserved key says so).
                kept = reader.select(batch)[0] if reader is not None else batch
                for m in kept:
                    key = m.key()
                    if key is None or not key.startswith(CONTROL_KEY):
                        return f"holds data records (partition {tp[1]}, offset {m.offset()})"
                if batch[-1].offset() >= left[tp][1] - 1:
                    del left[tp]
            if not msgs and left:
                # Transaction markers and aborted writes at the end are skipped: the position says.
                positions = consumer.position(list(left))
                for tp in [tp for tp, pos in positions.items() if pos >= left[tp][1]]:
                    del left[tp]
        return None
    finally:
        consumer.unassign()


def _by_partition(msgs: Sequence[RawMessage]) -> dict[TopicPartition, list[RawMessage]]:
    out: dict[TopicPartition, list[RawMessage]] = {}
    for m in msgs:
        out.setdefault((m.topic(), m.partition()), []).append(m)
    return out


def check_checkpoints_kept(
    job: JobConfig, manager: KafkaCheckpointManager, changelog_partitions: int
) -> bool:
    """Refuses the start of a job that started before, has no checkpoint of any task, and holds durable
    state. Every start runs a start-up commit right after its restore, so started containers without any
    checkpoint mean the checkpoints were lost; state seeded before a first start (`samsa state bootstrap`)
    comes with checkpoints, and a genuine first start has no start records. Returns whether the job never
    started (no checkpoint, no start record): what its changelogs hold is not its own
    (`inherited_state.check_inherited_state`)."""
    if manager.topic_exists() and manager.read_records((1, 2)):
        return False
    started = started_containers(job)
    if not started:
        return True  # no checkpoint *yet*: a first start
    held = stores_with_state(job, changelog_partitions)
    if not held:
        return False
    stores = "; ".join(f"store {s!r}: {where}" for s, where in sorted(held.items()))
    raise CheckpointsLostError(
        f"job {job.job_key} has started before (containers {', '.join(started)} in "
        f"{coordinator_topic(job)}) but its checkpoint topic {manager.topic} holds no checkpoint (deleted or "
        f"emptied), while its stores hold state ({stores}): starting would restore that state and read the "
        f"inputs again from samza.offset.default, counting them twice. Nothing was restored or read. Ways "
        f"on: restore the checkpoint topic {manager.topic}; or, to reprocess on purpose, start the state "
        f"over (delete the stores' changelog topics, their local directories under "
        f"{job.logged_store_dir} and their blob snapshots; see docs/state.md); or write fresh checkpoints "
        f"with `samsa checkpoint reset --to earliest|latest|<time>` (the state is kept) and start again"
    )
