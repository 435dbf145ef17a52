"""Checkpoints kept in one compacted Kafka topic per job, keyed by task name and checkpoint version."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.checkpoint.compacted_log import read_latest
from samsa.checkpoint.exceptions import CheckpointError, CheckpointFencedError
from samsa.checkpoint.model import (
    VERSION_OF_KEY_TYPE,
    AnyCheckpoint,
    Checkpoint,
    CheckpointV2,
    checkpoint_key,
    decode_record,
    encode,
    parse_key,
)
from samsa.checkpoint.starts import ContainerStart, fenced_message
from samsa.checkpoint.versions import DEFAULT_READ_VERSIONS, validate_versions
from samsa.kafka import KafkaAdmin, KafkaProducer, KafkaSystemError, TransactionError

log = logging.getLogger(__name__)

# Header of every checkpoint record written by a fenced (epoch-carrying) container.
EPOCH_HEADER = "samsa.epoch"
# How long a fenced start looks in the starts topic for the newer start's record, to name it.
_NEWER_START_LOOKUP_S = 5.0
_UNNAMED_NEWER_START = "a newer start of it registered the checkpoint producer at the broker"
# Samza's task.live.checkpoint.max.age: a lower-priority record newer by more than this wins.
DEFAULT_LIVE_MAX_AGE_MS = 600_000
# Key of the record naming the job the topic belongs to: shaped like a checkpoint's key (a task name and a
# type), so that every reader, an older Samsa's included, skips it as a version it does not read.
OWNER_KEY = json.dumps({"taskName": "", "type": "job"}, sort_keys=True).encode()


def checkpoint_topic(job_name: str, job_id: str) -> str:
    """Samza's naming, with our prefix: `__samsa_checkpoint_ver_1_for_<name>_<id>`."""
    return f"__samsa_checkpoint_ver_1_for_{job_name.replace('_', '-')}_{job_id.replace('_', '-')}"


@dataclass(frozen=True)
class StoredCheckpoint:
    """A task's last record of one version, with where and when it was appended."""

    checkpoint: AnyCheckpoint
    offset: int
    timestamp: int | None  # epoch ms of the record; None when the broker gave none


def choose(
    records: Sequence[StoredCheckpoint], read_versions: Sequence[int], live_max_age_ms: int
) -> StoredCheckpoint | None:
    """Samza's read rule over one task's records, taken in log order.

    A record replaces the current choice when there is none yet, when its version has the same or a higher
    priority (earlier in `read_versions`), or when it is newer than the current choice by more than
    `live_max_age_ms`: a job that stopped writing V2 thereby falls back to its newer V1 records.
    """
    priority = {v: i for i, v in enumerate(read_versions)}
    current: StoredCheckpoint | None = None
    for record in sorted(records, key=lambda r: r.offset):
        rank = priority.get(record.checkpoint.version)
        if rank is None:
            continue
        if (
            current is None
            or rank <= priority[current.checkpoint.version]
            or _newer_by(record, current) > live_max_age_ms
        ):
            current = record
    return current


@dataclass
class _Queued:
    """A task's commit waiting for a transaction, and how it ended."""

    task_name: str
    versions: Sequence[int]
    v1: Checkpoint | None
    v2: CheckpointV2 | None
    done: bool = False
    error: BaseException | None = None


def passed_over(
    records: Sequence[StoredCheckpoint], chosen: StoredCheckpoint, read_versions: Sequence[int]
) -> StoredCheckpoint | None:
    """A record `choose` passed over that a later commit wrote (after `chosen` in the log, input offsets
    ahead of it, not the other version of one commit): a run that wrote only that version (a
    task.checkpoint.write.versions change) since, whose input the start will process again."""
    for record in records:
        if record.offset <= chosen.offset or record.checkpoint.version not in read_versions:
            continue
        later, earlier = record.checkpoint.offsets, chosen.checkpoint.offsets
        if any(o > earlier.get(ssp, -1) for ssp, o in later.items()):
            return record
    return None


def _warn_passed_over(
    topic: str, task: str, chosen: StoredCheckpoint, ahead: StoredCheckpoint, read_versions: Sequence[int]
) -> None:
    # Samza's read rule (the first version of task.checkpoint.read.versions present wins unless a later one
    # is older by more than the live max age): said, since the inputs in between are processed again.
    gaps = ", ".join(
        f"{ssp} {chosen.checkpoint.offsets.get(ssp, 'none')} -> {o}"
        for ssp, o in sorted(ahead.checkpoint.offsets.items(), key=lambda e: str(e[0]))
        if o > chosen.checkpoint.offsets.get(ssp, -1)
    )
    log.warning(
        "task %s: starting from its version-%d checkpoint (%s offset %d) by "
        "task.checkpoint.read.versions=%s, though a later commit wrote a version-%d checkpoint ahead of it "
        "(offset %d: %s): the inputs between are processed again (their outputs sent twice). A run wrote "
        "only version %d "
        "(task.checkpoint.write.versions); keep writing every version read (the default 1,2), or put %d "
        "first in task.checkpoint.read.versions for a start after such a run",
        task,
        chosen.checkpoint.version,
        topic,
        chosen.offset,
        ",".join(str(v) for v in read_versions),
        ahead.checkpoint.version,
        ahead.offset,
        gaps,
        ahead.checkpoint.version,
        ahead.checkpoint.version,
    )


def _newer_by(record: StoredCheckpoint, current: StoredCheckpoint) -> int:
    if record.timestamp is None or current.timestamp is None:
        return 0  # no times to compare: priority alone decides
    return record.timestamp - current.timestamp


def _fenced_error(e: KafkaSystemError) -> bool:
    """Whether the broker refused the producer as fenced (by a newer one of its transactional.id)."""
    codes = {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_PRODUCER_ID_MAPPING"}
    text = str(e).upper()
    return "FENCED" in text or any(code in text for code in codes)


class KafkaCheckpointManager:
    """Reads every task's last checkpoint at start and appends new ones at commit."""

    def __init__(
        self,
        topic: str,
        client_config: Mapping[str, Any],
        producer: KafkaProducer | None = None,
        *,
        read_versions: Sequence[int] = DEFAULT_READ_VERSIONS,
        live_max_age_ms: int = DEFAULT_LIVE_MAX_AGE_MS,
        epoch: int | None = None,
        starts_topic: str | None = None,
        topic_config: Mapping[str, str] | None = None,
        replication_factor: int = -1,
    ) -> None:
        """`topic_config` and `replication_factor`: the topic's, when `create_resources` creates it."""
        self.topic = topic
        self._topic_config = {"cleanup.policy": "compact", **(topic_config or {})}
        self._replication_factor = replication_factor
        #: Where a container's starts are recorded (`init_fencing`): the job's coordinator topic.
        self.starts_topic = starts_topic
        self._client_config = dict(client_config)
        self._producer = producer
        self.read_versions = validate_versions("task.checkpoint.read.versions", read_versions)
        self.live_max_age_ms = live_max_age_ms
        #: The container start this manager writes for: with one, every write is a transaction of the
        #: producer's transactional.id, and a newer start's `init_fencing` makes this one's writes fail.
        self.epoch = epoch
        self._headers = [(EPOCH_HEADER, str(epoch).encode())] if epoch is not None else None
        #: Told once, from the commit thread that found this start fenced at the broker (the container stops).
        self.on_fenced: Callable[[str], None] | None = None
        self._start: ContainerStart | None = None
        self._fenced: str | None = None
        self._named = threading.Event()  # cleared while a fence found at the broker looks the newer start up
        self._named.set()
        self._transaction = threading.Lock()  # commit threads of several tasks share the producer
        self._queued: list[_Queued] = []  # commits waiting for the next transaction
        self._queue = threading.Lock()

    def create_resources(self) -> None:
        """Creates the compacted single-partition topic, or checks the existing one."""
        admin = KafkaAdmin(self._client_config)
        try:
            admin.ensure_topic(self.topic, 1, self._topic_config, self._replication_factor)
        finally:
            admin.close()

    def topic_exists(self) -> bool:
        """Whether the checkpoint topic exists (it does once the job has started)."""
        admin = KafkaAdmin(self._client_config)
        try:
            return admin.partition_counts([self.topic])[self.topic] is not None
        finally:
            admin.close()

    def read_owner(self) -> tuple[str, str] | None:
        """(job.name, job.id) of the job the topic belongs to; None when the topic does not exist or names
        none (its job ran only under an older Samsa)."""
        if not self.topic_exists():
            return None
        for record in read_latest(self._client_config, self.topic):
            if record.key != OWNER_KEY or record.value is None:
                continue
            try:
                data = json.loads(record.value)
                return str(data["jobName"]), str(data["jobId"])
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(
                    f"the job record at {self.topic}#0@{record.offset} is unreadable ({e}); delete the record"
                ) from e
        return None

    def write_owner(self, producer: KafkaProducer, job_name: str, job_id: str) -> None:
        """Queues the record naming the job the topic belongs to (`read_owner`); durable after a flush."""
        value = json.dumps({"jobId": job_id, "jobName": job_name}, sort_keys=True).encode()
        producer.send(self.topic, value, key=OWNER_KEY, partition=0)

    def read_records(self, versions: Sequence[int] = (1, 2)) -> dict[str, dict[int, StoredCheckpoint]]:
        """Each task's last record of each of `versions`; records of other versions are not even decoded."""
        wanted = set(versions)
        out: dict[str, dict[int, StoredCheckpoint]] = {}
        for record in read_latest(self._client_config, self.topic):
            where = f"{self.topic}#0@{record.offset}"
            try:
                kind, task = parse_key(record.key)
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(
                    f"checkpoint record key at {where} is unreadable ({e}); delete the record"
                ) from e
            version = VERSION_OF_KEY_TYPE.get(kind)
            if version is None or version not in wanted:
                continue  # a version this reader does not read (old readers skip V2 this way)
            if record.value is None:
                out.get(task, {}).pop(version, None)  # a tombstone removes that version's record
                continue
            checkpoint = decode_record(kind, record.value, where)
            out.setdefault(task, {})[version] = StoredCheckpoint(checkpoint, record.offset, record.timestamp)
        return {task: records for task, records in out.items() if records}

    def read_last(
        self, read_versions: Sequence[int] | None = None, live_max_age_ms: int | None = None
    ) -> dict[str, AnyCheckpoint]:
        """The checkpoint each task resumes from: its highest-priority version, unless a lower one is
        newer by more than the live max age. Defaults come from the manager's construction."""
        versions = (
            self.read_versions
            if read_versions is None
            else validate_versions("task.checkpoint.read.versions", read_versions)
        )
        max_age = self.live_max_age_ms if live_max_age_ms is None else live_max_age_ms
        out: dict[str, AnyCheckpoint] = {}
        for task, records in self.read_records(versions).items():
            chosen = choose(list(records.values()), versions, max_age)
            if chosen is not None:
                out[task] = chosen.checkpoint
                ahead = passed_over(list(records.values()), chosen, versions)
                if ahead is not None:
                    _warn_passed_over(self.topic, task, chosen, ahead, versions)
        return out

    def write(self, task_name: str, checkpoint: AnyCheckpoint, producer: KafkaProducer | None = None) -> None:
        """Queues a record of the checkpoint's own version (on `producer`, default the manager's: an
        exactly-once task's goes in its own transaction); durable after `flush()`."""
        producer = producer or self._producer
        if producer is None:
            raise CheckpointError(f"writing to {self.topic} needs a checkpoint manager built with a producer")
        producer.send(
            self.topic,
            encode(checkpoint),
            key=checkpoint_key(task_name, checkpoint.version),
            partition=0,
            headers=self._headers,
        )

    def write_versions(
        self,
        task_name: str,
        versions: Sequence[int],
        v1: Checkpoint | None,
        v2: CheckpointV2 | None,
        producer: KafkaProducer | None = None,
    ) -> None:
        """Queues one record per configured write version, in the configured order (Samza's order)."""
        by_version: dict[int, AnyCheckpoint | None] = {1: v1, 2: v2}
        for version in validate_versions("task.checkpoint.write.versions", versions):
            checkpoint = by_version[version]
            if checkpoint is None:
                raise CheckpointError(
                    f"task {task_name!r}: task.checkpoint.write.versions includes {version} "
                    f"but no version {version} checkpoint was built"
                )
            self.write(task_name, checkpoint, producer)

    def flush(self) -> None:
        if self._producer is None:
            raise CheckpointError(f"writing to {self.topic} needs a checkpoint manager built with a producer")
        self._producer.flush()

    # -- fencing ------------------------------------------------------------------------------------------
    def init_fencing(self, start: ContainerStart | None = None) -> None:
        """Registers this start's transactional producer, which fences every older start's, then records
        `start` (the container's start record: a fenced start reads it to name the newer one). Call before
        reading the checkpoints, so no zombie can write one after they were read."""
        if self._producer is None or self.epoch is None:
            raise CheckpointError("fencing needs a checkpoint manager built with a producer and an epoch")
        try:
            self._producer.init_transactions()
        except TransactionError as e:
            raise CheckpointError(f"cannot register the checkpoint producer on {self.topic}: {e}") from e
        if start is None:
            return
        if self.starts_topic is None:
            raise CheckpointError("recording a start needs a checkpoint manager built with a starts topic")
        self._start = start
        topic = self.starts_topic
        with self._transaction:
            self._in_transaction(
                f"container {start.container_id}'s start record",
                lambda p: p.send(topic, start.encode(), key=start.key, partition=0, headers=self._headers),
            )

    def fence(self, reason: str) -> None:
        """No checkpoint is written from now on: a newer start of this container exists (`reason` says
        which, or who said so)."""
        if self._fenced is None:
            self._fenced = fenced_message(self._start, self.epoch, reason)

    @property
    def fenced(self) -> str | None:
        """Why this start may write no more checkpoints (naming the container, its job and both starts);
        None while it may."""
        return self._fenced

    def commit(
        self, task_name: str, versions: Sequence[int], v1: Checkpoint | None, v2: CheckpointV2 | None
    ) -> None:
        """Writes a task's checkpoint record(s) durably; with an epoch, atomically in one transaction that
        the broker rejects once a newer start of the container registered."""
        if self.epoch is None:
            self.write_versions(task_name, versions, v1, v2)
            self.flush()
            return
        # Group commit: the tasks' commit threads arrive together, and each transaction costs the same
        # round trips whatever it holds; one holds every commit queued while the previous one ran.
        mine = _Queued(task_name, versions, v1, v2)
        with self._queue:
            self._queued.append(mine)
        with self._transaction:
            if not mine.done:
                with self._queue:
                    batch, self._queued = self._queued, []
                self._commit_together(batch)  # raises a failure as is to the commit that runs it
                return
        if mine.error is not None:  # it went in the transaction another task's commit ran
            if isinstance(mine.error, CheckpointFencedError):
                raise CheckpointFencedError(str(mine.error)) from mine.error
            raise CheckpointError(
                f"task {task_name!r}: checkpoint not written: the transaction it shared failed: {mine.error}"
            ) from mine.error

    def _commit_together(self, batch: list[_Queued]) -> None:
        """One transaction of every queued commit (under `self._transaction`): done, or failed, together."""
        what = "task " + ", ".join(repr(q.task_name) for q in batch)

        def write(producer: KafkaProducer) -> None:
            for q in batch:
                self.write_versions(q.task_name, q.versions, q.v1, q.v2, producer)

        try:
            self._in_transaction(what, write)
        except BaseException as e:
            for q in batch:
                q.error = e
            raise
        finally:
            for q in batch:
                q.done = True

    def _in_transaction(self, what: str, write: Callable[[KafkaProducer], None]) -> None:
        """`write` in one transaction of the checkpoint producer (under `self._transaction`)."""
        assert self._producer is not None
        self._raise_if_fenced(what)
        begun = False
        try:
            self._producer.begin_transaction()
            begun = True
            write(self._producer)
            self._producer.commit_transaction()
        except KafkaSystemError as e:
            # A fenced producer fails fatally, in the transaction call or already in the send.
            if _fenced_error(e):
                self._fenced_at_broker()
                self._raise_if_fenced(what)
            if begun and not (isinstance(e, TransactionError) and e.fatal):
                self._abort_quietly()
            raise CheckpointError(f"{what}: checkpoint transaction on {self.topic}: {e}") from e
        except BaseException:
            # Anything else (an encoding error, a full queue): an open transaction would fail every later
            # commit and hold every read_committed reader of the topic at its start.
            if begun:
                self._abort_quietly()
            raise

    def _abort_quietly(self) -> None:
        assert self._producer is not None
        try:
            self._producer.abort_transaction()
        except KafkaSystemError as e:
            log.warning("aborting the checkpoint transaction on %s failed: %s", self.topic, e)

    def _fenced_at_broker(self) -> None:
        """The broker refused this start's producer: a newer start registered it. The container is told at
        once (it stops processing), before the newer start is looked up to name it: that lookup may wait
        seconds for a slow broker."""
        if self._fenced is not None:
            return
        self._named.clear()
        try:
            self.fence(_UNNAMED_NEWER_START)
            if self.on_fenced is not None:
                self.on_fenced(self._fenced or "")
            newer = self._newer_start()
            if newer is not None:
                self._fenced = fenced_message(self._start, self.epoch, newer)
        finally:
            self._named.set()

    def wait_named(self, timeout_s: float) -> None:
        """Waits (up to `timeout_s`) until a fence found at the broker has looked up the newer start, so
        that `fenced` names it."""
        self._named.wait(timeout_s)

    def _newer_start(self) -> str | None:
        """The start that fenced this one, from its start record (best effort: the broker does not say)."""
        newer = None
        if self._start is not None and self.starts_topic is not None:
            try:
                config = {**self._client_config, "isolation.level": "read_uncommitted"}
                records = read_latest(config, self.starts_topic, _NEWER_START_LOOKUP_S)
                found = [r for r in records if r.key == self._start.key and r.value is not None]
                newer = ContainerStart.decode(found[-1].value or b"") if found else None
            except (CheckpointError, KafkaSystemError) as e:
                log.debug("looking up the start that fenced %s: %r", self._start.describe(), e)
        if newer is None or newer == self._start:
            return None
        return f"a newer start of it took over ({newer.describe()})"

    def _raise_if_fenced(self, what: str) -> None:
        if self._fenced is not None:
            raise CheckpointFencedError(f"{what}: checkpoint not written: {self._fenced}")
