"""A container: builds its task instances from the job model, restores positions, runs the loop, commits."""

from __future__ import annotations

import gc
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from samsa.adjunct.bounded import BoundedDatasetEngine
from samsa.adjunct.build import BuildSettings, build_change, build_settings
from samsa.adjunct.exceptions import AdjunctConfigError, ExtractionError
from samsa.adjunct.extractors import extractor_factory_key, extractor_for, extractor_options
from samsa.adjunct.manager import (
    MANAGER_FACTORY_KEY,
    AdjunctManager,
    AdjunctManagerFactory,
    checked,
    manager_factory,
)
from samsa.adjunct.offsets import StoredOffsets, read_offsets, touch_offsets, write_offsets
from samsa.adjunct.recovery import AdjunctStart, adjunct_start
from samsa.adjunct.versioned import POINTER_FILE, built_with, drop_versions
from samsa.adjunct.writer import AdjunctWriter
from samsa.checkpoint.commit import wait_all
from samsa.checkpoint.exceptions import CheckpointFencedError
from samsa.checkpoint.faults import SimulatedCrash
from samsa.checkpoint.model import AnyCheckpoint, CheckpointV2
from samsa.checkpoint.starts import ContainerStart, StartWatch, fenced_message
from samsa.checkpoint.versions import checkpoint_versions
from samsa.exactly_once.exceptions import ProtocolError
from samsa.kafka import KafkaConsumer, KafkaProducer, MessageTooLargeError, RawMessage
from samsa.kafka.inmemory import is_inmemory
from samsa.kafka.record_marks import RecordMark, mark_problem, read_marks
from samsa.runtime import metrics as m
from samsa.runtime import validation
from samsa.runtime.bad_message_log import BadMessageLog
from samsa.runtime.collector import OutputCollector
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager, checkpoint_system, client_config
from samsa.runtime.eos_tasks import ExactlyOnceTasks
from samsa.runtime.exceptions import ContainerError, MessageDeserializationError, UserCodeError
from samsa.runtime.job_model import ContainerModel, TaskModel
from samsa.runtime.offsets import (
    added_since,
    known_partition_counts,
    recorded_partition_counts,
    recreated_since,
    start_offset,
)
from samsa.runtime.prometheus import PrometheusServer
from samsa.runtime.run_lock import RunLock
from samsa.runtime.run_loop import Chooser, PartitionBuffer, RunLoop
from samsa.runtime.state import ContainerState, early_s3_client
from samsa.runtime.takeover import assignment, checkpoint_producer_config
from samsa.runtime.task_instance import TaskContextImpl, TaskInstance, new_task
from samsa.runtime.user_errors import escaped, interrupted
from samsa.runtime.watchdog import StepWatchdog
from samsa.serde.base import explain, raw_passthrough
from samsa.serde.exceptions import SchemaRegistryError, SerdeConfigError
from samsa.serde.registry import SerdeRegistry
from samsa.stores.backend import RestoreProgress
from samsa.stores.blobstore.factory import PendingS3Client
from samsa.stores.changelog.exceptions import RestoreInterrupted
from samsa.stores.exceptions import (
    StoreCorruptError,
    StoreDiskFullError,
    StoreError,
    corruption_cause,
    disk_full_cause,
)
from samsa.stores.factory import ROCKSDB
from samsa.stores.restore_progress import RestoreReporter
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.serialized import SerializedStore
from samsa.stores.storage_manager import TaskStorage
from samsa.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)

# How often the container looks for a newer start of itself: at a commit (before it flushes anything) or
# a fetch, once this long after the last look. A look is one round trip, which cost the loop about 1 ms on
# a busy machine (looking at every commit cost 15% of the throughput with task.commit.ms=20); a newer
# start restores its changelog some tens of ms after it recorded itself, and a commit's flush until then
# is undone by that restore.
_LOOK_EVERY_S = 0.1
# How long closing producers may flush: a normal stop waits for every output; after a failure, briefly.
_FLUSH_ON_STOP_S = 60.0
_FLUSH_AFTER_FAILURE_S = 5.0
# How much of task.shutdown.ms a failing container waits for its commits in flight before it closes their
# stores: the rest of its stop (the tasks' close, the producers' flush, abandoned blob requests) must fit in
# it too, as a supervisor stopping the job kills a container that takes longer.
_SETTLE_SHARE = 0.5
# How long a fenced container waits for the newer start's name for its error (the lookup's own bound is 5 s).
_NAMING_WAIT_S = 6.0
_METRICS_PORT_GRACE_S = 5.0  # a port in use is bound again for this long before it is a config error


def container_lock(job: JobConfig, container_id: str) -> RunLock:
    """The lock a running container holds on this machine (not taken yet)."""
    return RunLock(
        pid_dir(job) / f"container-{container_id}.lock", f"container {container_id} of job {job.job_key}"
    )


def pid_dir(job: JobConfig) -> Path:
    """Where running containers leave their pid files (so `checkpoint reset` can refuse a live job)."""
    return job.non_logged_store_dir / job.job_key


@contextmanager
def _startup_heap_frozen(collect: bool) -> Iterator[None]:
    """Keeps what exists when the loop starts (modules, clients, the job model) out of the collector's
    full passes while it runs: each pass otherwise walks all of it and stalls the loop (measured on the
    word count: 17 ms a pass, 29 ms with a boto3 client loaded; 0.1 ms frozen). Garbage among it waits
    for the unfreeze. `collect`: collect first (a container with Kafka clients)."""
    if collect:
        # Frozen, garbage would outlive the run and then go back to the oldest generation, where full passes
        # are rare. Closed Kafka clients in reference cycles each hold a pthread key of confluent-kafka's
        # until collected (1,024 per process): a process running containers one after the other (a test
        # session) ran out of them. Not for in-memory systems only: ~6 ms, a TestRunner test's sixth.
        gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@dataclass(frozen=True)
class ContainerHooks:
    """What a test driver swaps in to step containers deterministically; the defaults are a normal run."""

    #: Drives the commit and window timers and the commits' max delay.
    clock: Callable[[], float] = time.monotonic
    #: Runs the commits' async phases (default: a pool of commit threads).
    executor: Executor | None = None
    #: Picks the next ready partition in `RunLoop.step` (default: round-robin).
    chooser: Chooser | None = None
    #: Makes the container's producers from their client config (default: `KafkaProducer`).
    producer_factory: Callable[[dict[str, Any]], KafkaProducer] | None = None
    #: Wall time in seconds, the same on every host: numbers exactly-once source tasks' versions, and dates
    #: a start (its epoch, when no driver gives one).
    version_clock: Callable[[], float] = time.time
    #: Called with the tasks once their stores are restored and open, before their `init()` (a test driver
    #: puts a store's initial contents here, so `init()` sees them and the start-up commit keeps them).
    before_init: Callable[[Sequence[TaskInstance]], None] | None = None


class Container:
    """Runs the tasks of one container model until stopped, caught up, or asked to shut down.

    `run()` is `start()`, `loop.run()`, `finish()`; a test driver calls `start()`, steps the loop, then
    `finish()`, or `crash()` to kill the container in place."""

    def __init__(
        self,
        job: JobConfig,
        model: ContainerModel,
        until_caught_up: bool = False,
        epoch: int | None = None,
        hooks: ContainerHooks | None = None,
        lock_wait_s: float = 0.0,
        held_lock: RunLock | None = None,
        s3_client: PendingS3Client | None = None,
    ) -> None:
        """`s3_client`: the blob store's S3 client, being made since the process began (`early_s3_client`);
        the container takes it over (else its start makes one the same way)."""
        self.job = job
        #: How long a start waits for another process of this container on this machine to let go.
        self._lock_wait_s = lock_wait_s
        #: The container's lock, taken by the caller before it touched the job (see `container_lock`).
        self._held_lock = held_lock
        self._hooks = hooks or ContainerHooks()
        self._clock = self._hooks.clock
        self._server: PrometheusServer | None = None
        self._pid_file: Path | None = None
        self._lock: RunLock | None = None
        self.model = model
        self.until_caught_up = until_caught_up
        #: Which start of the container this is: a supervising driver's epoch (Spark: 1, 2, ... per start),
        #: else the start's wall time in epoch ms. Messages and the checkpoint records' `samsa.epoch` header
        #: show it; the fencing itself is the broker's: every start registers the one transactional.id of
        #: the container's checkpoint producer, which fences all older starts (`_checkpoint_client_config`).
        self._started_ms = int(self._hooks.version_clock() * 1000)
        self.epoch = epoch if epoch is not None else self._started_ms
        #: A driver started it and knows of its other starts (Spark): see `_take_lock`.
        self._driven = epoch is not None
        self._phase = "starting"
        self._fenced: str | None = None
        self._start_watch: StartWatch | None = None
        self._next_look = 0.0  # when the loop's fetches next look for a newer start
        self.registry = m.MetricsRegistry()
        self._loop: RunLoop | None = None
        #: Reports a task stuck in process() (task.process.warn.ms), while the loop runs.
        self._watchdog: StepWatchdog | None = None
        self._stop_requested = False
        self._serdes = SerdeRegistry(job.config)
        self._producers: dict[str, KafkaProducer] = {}
        self._consumers: dict[str, KafkaConsumer] = {}
        self._tasks: list[TaskInstance] = []
        self._checkpoints = checkpoint_manager(job)
        self._bad_messages: dict[tuple[str, str], m.Counter] = {}
        self._bad_messages_log = BadMessageLog()
        self._state: ContainerState | None = None
        self._pending_s3 = s3_client
        self._checkpoint_producer: KafkaProducer | None = None
        self._restore_stop = threading.Event()
        #: Progress of the adjunct stores being bootstrapped (shown like a restore's).
        self._bootstrap_progress: list[RestoreProgress] = []
        self._bootstrap_reporter: RestoreReporter | None = None
        #: Adjunct store partitions -> where their stream is read from (None: the checkpoint decides).
        self._adjunct_starts: dict[SystemStreamPartition, int | None] = {}
        #: Input partitions a task starts at an offset its checkpoint does not hold (samza.offset.default,
        #: samza.reset.offset, a stream or partition added, a recreated topic): the start-up commit seals it.
        self._unsaved_starts: list[SystemStreamPartition] = []
        #: Adjunct store partitions -> the mark of the last record their store read (`record_offsets`).
        self._adjunct_marks: dict[SystemStreamPartition, RecordMark] = {}
        #: Adjunct store partitions -> their buffer (its last message is the record to mark).
        self._adjunct_buffers: dict[SystemStreamPartition, PartitionBuffer] = {}
        self._manager_factory: AdjunctManagerFactory | None = None
        #: `job.processing.guarantee=exactly_once`: the tasks' versions, aligners and transactions.
        self._eos: ExactlyOnceTasks | None = None

    def stop(self) -> None:
        """Graceful stop: finish the message in hand, flush, commit, close (signal-handler safe)."""
        self._stop_requested = True
        self._restore_stop.set()
        if self._loop is not None:
            self._loop.stop()
        if self._watchdog is not None:
            self._watchdog.stopping()  # a task stuck in process() is told, with its stack, before a kill

    def fence(self, reason: str) -> None:
        """A newer start of this container exists: stop without writing another checkpoint, and without
        writing anything else (as if killed): `reason` says which start, or who said so."""
        if self._phase == "crashed":
            return  # a crashed container (a test driver's) restarted in this process: nothing to stop
        if self._fenced is None:
            log.warning(
                "container %s (epoch %s) stops without a commit: %s",
                self.model.id,
                self.epoch,
                reason,
            )
        self._fenced = reason
        self._checkpoints.fence(reason)
        self.stop()

    def status(self) -> tuple[str, float | None]:
        """(phase, restore progress 0..1 while restoring): starting, restoring, running or stopping."""
        if self._phase == "restoring" and self._state is not None:
            progress = [p for c in self._state.storage.contexts.values() for p in c.progress.values()]
            totals = [p.total_records for p in progress if p.total_records]
            if totals and len(totals) == len(progress):
                done = sum(min(p.records, p.total_records or 0) for p in progress)
                return self._phase, done / max(1, sum(totals))
            return self._phase, None
        if self._phase == "crashed" or (self._stop_requested and self._phase == "running"):
            return "stopping", None
        return self._phase, None

    def _checkpoint_client_config(self) -> dict[str, Any]:
        return checkpoint_producer_config(self.job, self.model.id)

    # -- start ------------------------------------------------------------------------------------
    def _build_tasks(self, checkpoints: dict[str, AnyCheckpoint], storages: dict[str, TaskStorage]) -> None:
        task_class = validation.task_class(self.job)
        collector = OutputCollector(self.job, self._producers, self._serdes)
        # Of every task of the job: a partition added to an input since has no checkpoint in any task, and
        # its task may be new; its number tells it from one whose container has not committed yet.
        checkpointed = {ssp for cp in checkpoints.values() for ssp in cp.offsets}
        known = known_partition_counts(checkpoints.values())
        assert self._state is not None
        # Every checkpoint of the run carries on the counts known, whichever container committed first.
        self._state.input_counts = recorded_partition_counts(known, self.model.input_counts)
        watermarks, firsts = self._input_firsts()
        for tm in self.model.tasks:
            storage = storages[tm.name]
            context = TaskContextImpl(
                tm.name,
                self.model.id,
                self.job.config,
                frozenset(tm.partitions),
                storage,
                self.registry,
                clock=self._clock,  # the tasks' timers follow the loop's clock (a test's, maybe virtual)
            )
            ti = TaskInstance(
                tm,
                new_task(task_class, self.job.task_class),
                storage,
                context,
                collector,
                self.registry,
                self._commit_ms(tm.name),
                self.job.window_ms,
            )
            self._schedule_timers(ti)
            checkpoint = checkpoints.get(tm.name)
            ti.offsets.update(
                self._start_offsets(tm.partitions, checkpoint, known, checkpointed, watermarks, firsts)
            )
            for ssp in tm.partitions:
                start = self._adjunct_starts.get(ssp)
                if not self._consumes(tm, ssp):
                    del ti.offsets[ssp]
                    continue
                store = self._adjunct_store_of(ssp)
                engine = storage.context.engines.get(store) if store else None
                if isinstance(engine, BoundedDatasetEngine):
                    # The version still being built is read again from its start (or the whole stream).
                    start = self._bounded_resume(tm.name, ssp, engine)
                if start is not None:
                    # An adjunct store's stream starts where its store says, never where the checkpoint
                    # does: a commit would not move a restart's start.
                    ti.offsets[ssp] = start
                    continue
                saved = checkpoint.offsets.get(ssp) if checkpoint is not None else None
                if ti.offsets[ssp] != saved:
                    self._unsaved_starts.append(ssp)
            self._tasks.append(ti)

    def _bootstrapped(self) -> None:
        """The bootstrap streams caught up (or the container stops): the progress display ends."""
        reporter, self._bootstrap_reporter = self._bootstrap_reporter, None
        if reporter is not None:
            for progress in self._bootstrap_progress:
                progress.done = True
            reporter.__exit__(None, None, None)

    def _adjunct_store_of(self, ssp: SystemStreamPartition) -> str | None:
        for store, stream in self.job.adjunct_inputs.items():
            if stream == ssp.system_stream:
                return store
        return None

    def _consumes(self, tm: TaskModel, ssp: SystemStreamPartition) -> bool:
        """Whether the task reads `ssp` (and keeps an offset for it): a broadcast partition of an adjunct
        store is read once per container, by its first task, into the container-level store every task
        reads; any other broadcast partition is read by every task (one consumer fans it out)."""
        return (
            ssp not in self.job.broadcast
            or self._adjunct_store_of(ssp) is None
            or tm.name == self.model.tasks[0].name
        )

    def _read_for(
        self, ti: TaskInstance, first_now: Mapping[SystemStreamPartition, int] | None = None
    ) -> dict[SystemStreamPartition, int]:
        """The offsets the container's first task holds of the broadcast adjunct partitions it reads for
        `ti` too (into the store every task reads): `ti` checkpoints them as its own, so that a stream
        turned back into a broadcast input of `process` resumes where the store had read it in every task
        of the job, not in the first task only (the others at offsets kept from before it fed the store, or
        at samza.offset.default). `first_now`: the first task's offsets captured for the same round of
        commits; without it, those of its last completed commit (a task committed alone must not get ahead
        of what the first task checkpointed: after a crash it would skip what the first reads again)."""
        first = self._tasks[0] if self._tasks else None
        if first is None or first is ti or not (self.job.broadcast and self.job.adjunct_inputs):
            return {}
        if first_now is None:
            assert self._state is not None
            first_now = self._state.commit_managers[first.name].committed_offsets
        return {
            ssp: first_now[ssp]
            for ssp in ti.model.partitions
            if ssp in first_now and not self._consumes(ti.model, ssp)
        }

    def _adjunct_partitions(self, tm: TaskModel) -> dict[str, list[SystemStreamPartition]]:
        """Store -> the adjunct stream partitions the task writes into it."""
        out: dict[str, list[SystemStreamPartition]] = {}
        for ssp in tm.partitions:
            store = self._adjunct_store_of(ssp)
            if store is not None and self._consumes(tm, ssp):
                out.setdefault(store, []).append(ssp)
        return out

    def _prepare_adjunct_stores(self) -> dict[SystemStreamPartition, int | None]:
        """Applies the recovery table to every adjunct store of every task: keeps, or wipes, its directory
        and decides where its stream is read from (before any store is opened)."""
        assert self._state is not None
        starts: dict[SystemStreamPartition, int | None] = {}
        now_ms = time.time() * 1000
        for tm in self.model.tasks:
            for store, ssps in self._adjunct_partitions(tm).items():
                if store in self._state.storage.engine_factories:
                    if len(ssps) > 1:
                        raise _several_partitions(store, tm.name, ssps, self.job.broadcast)
                    self._check_versions_build(tm.name, store, ssps)
                    continue  # a bounded dataset resumes where its unsealed version started
                store_dir = self._state.storage.contexts[tm.name].store_dirs[store]
                persistent = self._state.specs[store].factory == ROCKSDB
                stored = read_offsets(store_dir, ssps) if persistent and store_dir.is_dir() else None
                staleness = self.job.config.value(f"stores.{store}.adstore.max.staleness.ms")
                build = self._adjunct_build(store, ssps)
                rebuilt = (
                    None if stored is None else build_change(stored.build, build, f"{store} of {tm.name}")
                )
                decisions = {
                    ssp: self._adjunct_start(
                        ssp, persistent, store_dir.is_dir(), stored, staleness, now_ms, rebuilt
                    )
                    for ssp in ssps
                }
                wipe = next((d for d in decisions.values() if d.wipe), None)
                if wipe is not None:  # one partition's offset unusable: the whole store is rebuilt
                    log.info("adjunct store %s of %s: %s", store, tm.name, wipe.note)
                    shutil.rmtree(store_dir)
                    decisions = {
                        ssp: self._adjunct_start(ssp, persistent, False, None, staleness, now_ms)
                        for ssp in ssps
                    }
                for ssp, decision in decisions.items():
                    log.info("adjunct store %s of %s (%s): %s", store, tm.name, ssp, decision.note)
                    starts[ssp] = decision.offset
                    if wipe is None and stored is not None and ssp in stored.marks:
                        self._adjunct_marks[ssp] = stored.marks[ssp]  # kept until a record is read
        return starts

    def _check_versions_build(self, task: str, store: str, ssps: list[SystemStreamPartition]) -> None:
        """Drops the versions of a bounded dataset's store (sealed or being built) built with other settings
        than the current ones (`build_change`): as a non-versioned store is wiped, since their rows are
        another extractor's or serde's. Its stream is then read again from the oldest offset, as at a first
        start, and readers see no version until the first one built with the current settings is sealed."""
        assert self._state is not None
        root = self._state.storage.contexts[task].store_dirs[store]
        built = built_with(root) if root.is_dir() else None
        if built is None:
            return
        build = self._adjunct_build(store, ssps)
        change = build_change(
            built.build, build, f"{store} of {task}", f"version pointer {root / POINTER_FILE}"
        )
        if change is None:
            return
        dropped = " and ".join(
            what
            for what, there in (
                (f"version {built.sealed}", built.sealed is not None),
                ("the build in progress", built.building is not None),
            )
            if there
        )
        waits = all(self.job.stream(ssp.system_stream).bootstrap for ssp in ssps)
        log.warning(
            "adjunct store %s of %s: %s: its versions were built with other settings: %s dropped; reading "
            "the dataset again from the oldest offset of %s, %s",
            store,
            task,
            change,
            dropped,
            ", ".join(map(str, ssps)),
            "processing waits for it (samza.bootstrap)"
            if waits
            else "the store serving no version until its first one is sealed (stream not samza.bootstrap)",
        )
        drop_versions(root, build)

    def _adjunct_start(
        self,
        ssp: SystemStreamPartition,
        persistent: bool,
        exists: bool,
        stored: StoredOffsets | None,
        max_staleness_ms: int,
        now_ms: float,
        rebuilt: str | None = None,
    ) -> AdjunctStart:
        """`rebuilt`: what changed in the settings the store's rows were built with (`build_change`)."""
        consumer = self._consumers[ssp.system]
        low, high = consumer.watermarks((ssp.stream, ssp.partition))
        mark = stored.marks.get(ssp) if stored else None
        return adjunct_start(
            persistent=persistent,
            bootstrap=self.job.stream(ssp.system_stream).bootstrap,
            exists=exists,
            stored_offset=stored.offsets[ssp] if stored else None,
            stored_at_ms=stored.written_at * 1000 if stored else None,
            now_ms=now_ms,
            max_staleness_ms=max_staleness_ms,
            low=low,
            high=high,
            changed=lambda: None if mark is None else mark_problem(consumer, ssp, mark),
            build_changed=lambda: rebuilt,
        )

    def _adjunct_build(self, store: str, ssps: list[SystemStreamPartition]) -> BuildSettings:
        """The settings the rows of `store` fed from `ssps` depend on, recorded with its offsets."""
        assert self._state is not None
        spec = self._state.specs[store]
        streams = {ssp: self.job.stream(ssp.system_stream) for ssp in ssps}
        sources = {ssp: (s.key_serde, s.msg_serde) for ssp, s in streams.items()}
        return build_settings(self.job.config, store, spec.key_serde, spec.msg_serde, sources)

    def _bounded_resume(self, task: str, ssp: SystemStreamPartition, engine: BoundedDatasetEngine) -> int:
        """Where a bounded dataset's stream is read from: where its next version starts, unless the record
        before that (the last version's end marker) is not in the topic any more as it was read (the topic
        was deleted and recreated): then from the stream's oldest offset, the sealed version served until
        the new topic's first dataset is sealed. When that start is below the oldest offset, records the
        store had not read are gone (retention deleted the front of the dataset to build): the records up
        to the next end-of-dataset marker are discarded instead of sealed as a partial version. A first
        build has no such start to compare: it builds the first dataset it finds, warned when the oldest
        offset is above 0."""
        versions = engine.versions
        mark = versions.next_mark
        low, high = self._consumers[ssp.system].watermarks((ssp.stream, ssp.partition))
        resume = engine.resume_offset
        problem = None
        if resume is not None and resume > high:
            # The topic holds fewer records than were read (a pointer without a mark: an older Samsa's).
            problem = f"offset {resume} is past the end of the topic (high watermark {high})"
        elif mark is not None:
            problem = mark_problem(self._consumers[ssp.system], ssp, mark)
        if problem is not None:
            log.warning(
                "adjunct store %s of %s (%s): %s: the topic is not the one its version %s was read from "
                "(deleted and recreated?); reading the next version from the oldest offset, version %s "
                "served until it is sealed",
                engine.name,
                task,
                ssp,
                problem,
                versions.sealed_version,
                versions.sealed_version,
            )
            versions.rebuild_next_from_start()
        resume = engine.resume_offset
        where = f"adjunct store {engine.name} of {task}: topic {ssp.stream} partition {ssp.partition}"
        if resume is None:
            if 0 < low < high:
                # Nothing tells whether the record before the oldest one ended a dataset: discarding
                # would throw away the complete dataset a topic rolled or trimmed at its start holds.
                log.warning(
                    "%s: a first build of the store starts at the partition's oldest offset %d, not 0: "
                    "retention (or DeleteRecords) deleted the records before it, and may have deleted the "
                    "front of the first dataset read from there, which is built and sealed as found. To "
                    "make sure a dataset is whole, keep the topic's retention longer than a dataset's "
                    "lifetime (from its first record until the next dataset's marker), or produce a new "
                    "dataset: it replaces this one when its marker is read",
                    where,
                    low,
                )
            return low
        if resume >= low or low >= high:
            # An empty partition holds nothing of a dataset cut short: its next record starts the next one.
            return max(resume, low)
        sealed = versions.sealed_version
        if resume == low - 1 and versions.resume_follows_marker:
            log.warning(
                "%s: the next version starts at offset %d, right after the end-of-dataset marker read, and "
                "the partition's oldest offset is %d: offset %d was either a transaction's commit record "
                "(a transactional producer writes one after the marker; consumers never read it) or the "
                "next dataset's first record, deleted by retention before the store read it. Taken as a "
                "commit record: the records from offset %d on are built into the next version. If the "
                "producer is not transactional, that version lacks its first record: produce the dataset "
                "again, and keep the topic's retention longer than a dataset's lifetime",
                where,
                resume,
                low,
                resume,
                low,
            )
            return low
        log.warning(
            "%s: offsets %d to %d were deleted (retention) before the store read them, the front of the "
            "dataset to build; the records from offset %d on up to the next end-of-dataset marker are "
            "discarded, not sealed as a partial version, and the next complete dataset is built after that "
            "marker (%s)",
            where,
            resume,
            low - 1,
            low,
            "no version served until then" if sealed is None else f"version {sealed} served until then",
        )
        versions.discard_to_next_marker(low)
        return low

    def _adjunct_handler(self, ti: TaskInstance, store: str) -> AdjunctManager:
        """Writes the messages of an adjunct stream into its store instead of `process`, through the
        manager `stores.adstore.manager.factory` makes; a persistent store records its stream's offsets in
        its directory after every flush."""
        assert self._state is not None
        if self._manager_factory is None:
            self._manager_factory = manager_factory(self.job.config.value(MANAGER_FACTORY_KEY))
        spec = self._state.specs[store]
        factory = self.job.config.value(extractor_factory_key(store))
        extractor = extractor_for(
            store, factory, self._serdes.get(spec.key_serde), extractor_options(self.job.config, store)
        )
        labels = {"task": ti.name, "store": store}
        stored = self.registry.counter(m.ADJUNCT_RECORDS, "Records written to adjunct stores", labels)
        ssps = self._adjunct_partitions(ti.model)[store]
        self.registry.gauge_fn(
            m.ADJUNCT_LAG,
            "Messages of the adjunct store's stream not yet in the store",
            labels,
            lambda: sum(self._lag_fn(ti, ssp)() for ssp in ssps),
        )
        progress: RestoreProgress | None = None
        if any(self.job.stream(ssp.system_stream).bootstrap for ssp in ssps):
            progress = RestoreProgress(ti.name, store)
            progress.total_records = sum(
                self._consumers[s.system].watermarks((s.stream, s.partition))[1] - ti.offsets.get(s, 0)
                for s in ssps
            )
            self._bootstrap_progress.append(progress)
        engine = ti.storage.context.engines.get(store)
        bounded = engine if isinstance(engine, BoundedDatasetEngine) else None
        if bounded is not None:
            # Its versions were checked against these settings before it was opened (or dropped).
            bounded.versions.record_build(self._adjunct_build(store, ssps))
            ti.storage.after_flush.append(lambda: self._read_past(bounded, ssps))
        if spec.factory == ROCKSDB and bounded is None:
            store_dir = ti.storage.context.store_dirs[store]
            if isinstance(engine, RocksDbStore):
                # No write-ahead log: after a crash the store resumes from its offsets file, written only
                # after a flush made everything before it durable, and reads the rest again.
                engine.begin_bulk_load()

            build = self._adjunct_build(store, ssps)

            def record_offsets() -> None:
                # After the store's flush: the file never claims more than the store holds.
                if all(ssp in ti.offsets for ssp in ssps):
                    offsets = {ssp: ti.offsets[ssp] for ssp in ssps}
                    write_offsets(store_dir, offsets, self._marks(offsets), build)

            ti.storage.after_flush.append(record_offsets)
        writer = ti.storage.writers[store]
        manager = self._manager_factory(store, ti.name, writer, extractor, stored, progress, bounded)
        if isinstance(manager, AdjunctWriter) and isinstance(writer, SerializedStore):
            streams = {(s.key_serde, s.msg_serde) for s in (self.job.stream(x.system_stream) for x in ssps)}
            if streams == {(spec.key_serde, spec.msg_serde)} and raw_passthrough(
                spec.key_serde, spec.msg_serde
            ):
                # The stream's bytes are the store's bytes: decoding and encoding them again changes nothing.
                manager.write_raw_to(writer.inner)
        return checked(manager, self.job.config.value(MANAGER_FACTORY_KEY))

    def _read_past(self, engine: BoundedDatasetEngine, ssps: list[SystemStreamPartition]) -> None:
        """At a commit: records in the bounded dataset's store that its stream was read up to the consumer's
        position (`VersionedStore.read_past`), when every record fetched was handed to the store. The
        position is past a transaction's commit record after the end-of-dataset marker, which no consumer
        delivers: a restart after retention deleted the sealed dataset with that commit record then finds
        no deleted record it had not read."""
        for ssp in ssps:  # one (a bounded dataset is read from one partition)
            buf = self._adjunct_buffers.get(ssp)
            if buf is None or buf.pos < len(buf.messages):
                continue  # records fetched are still on their way to the store
            tp = (ssp.stream, ssp.partition)
            position = self._consumers[ssp.system].position([tp]).get(tp, -1)
            if position >= 0:  # negative: nothing fetched since the assignment
                engine.versions.read_past(position)

    def _marks(self, offsets: dict[SystemStreamPartition, int]) -> dict[SystemStreamPartition, RecordMark]:
        """The mark of the record before each offset, of the partitions that have one: the last message
        read, or the mark the store's offsets file had when nothing was read since the start."""
        marks = {}
        for ssp, offset in offsets.items():
            buf = self._adjunct_buffers.get(ssp)
            last = buf.last if buf is not None else None
            mark = self._adjunct_marks.get(ssp)
            if (
                last is not None
                and last.offset() == offset - 1
                and (mark is None or mark.offset != offset - 1)
            ):
                mark = self._adjunct_marks[ssp] = RecordMark.of(last)
            if mark is not None and mark.offset == offset - 1:
                marks[ssp] = mark
        return marks

    def _input_firsts(
        self,
    ) -> tuple[dict[SystemStreamPartition, tuple[int, int]], dict[SystemStreamPartition, RecordMark]]:
        """The watermarks of every input partition of the container, and the mark of the first record of
        each that holds one: one read per partition, all of a system's at once. The marks go into every
        checkpoint of this run, for the next start to tell that a topic was recreated since."""
        partitions = sorted({ssp for tm in self.model.tasks for ssp in tm.partitions})
        watermarks = {
            ssp: self._consumers[ssp.system].watermarks((ssp.stream, ssp.partition)) for ssp in partitions
        }
        firsts: dict[SystemStreamPartition, RecordMark] = {}
        for system in sorted({ssp.system for ssp in partitions}):
            lows = {
                ssp: low
                for ssp, (low, high) in watermarks.items()
                if ssp.system == system and low < high  # an empty partition has no record to mark
            }
            firsts.update(
                read_marks(
                    self._consumers[system],
                    lows,
                    "mark the first record of each input partition (to tell a recreated topic at the "
                    "next start)",
                )
            )
        if self._state is not None:
            self._state.input_marks = dict(firsts)
        return watermarks, firsts

    def _start_offsets(
        self,
        partitions: Sequence[SystemStreamPartition],
        checkpoint: AnyCheckpoint | None,
        known: Mapping[SystemStream, int],
        checkpointed: Set[SystemStreamPartition],
        watermarks: dict[SystemStreamPartition, tuple[int, int]],
        firsts: dict[SystemStreamPartition, RecordMark],
    ) -> dict[SystemStreamPartition, int]:
        """Each partition's start (`start_offset`); `known`: the `known_partition_counts` of every task's
        checkpoints; `checkpointed`: the partitions any task has a checkpointed offset of; `watermarks` and
        `firsts` (the first record's mark) of each partition."""
        marks = checkpoint.input_marks if isinstance(checkpoint, CheckpointV2) else {}
        kept = checkpoint.kept_inputs if checkpoint is not None else frozenset()
        out = {}
        for ssp in partitions:
            out[ssp] = start_offset(
                ssp,
                self.job.stream(ssp.system_stream),
                checkpoint.offsets.get(ssp) if checkpoint is not None else None,
                watermarks[ssp],
                added_since(ssp, known, checkpointed),
                recreated_since(marks.get(ssp), firsts.get(ssp)),
                ssp in kept,
            )
        return out

    def _buffers(self) -> list[tuple[KafkaConsumer, dict[tuple[str, int], PartitionBuffer]]]:
        sources: dict[str, dict[tuple[str, int], PartitionBuffer]] = {}
        for ti in self._tasks:
            handlers = {
                store: self._adjunct_handler(ti, store) for store in self._adjunct_partitions(ti.model)
            }
            for ssp in ti.model.partitions:
                if not self._consumes(ti.model, ssp):
                    continue
                shared = sources.get(ssp.system, {}).get((ssp.stream, ssp.partition))
                if shared is not None and shared.tasks is not None:
                    # A broadcast partition read once for the container: this task gets its messages too.
                    shared.tasks = (*shared.tasks, ti)
                    self._lag_gauge(ti, ssp)
                    continue
                settings = self.job.stream(ssp.system_stream)
                key_serde = self._serdes.get(settings.key_serde, ssp.stream, is_key=True)
                msg_serde = self._serdes.get(settings.msg_serde, ssp.stream, is_key=False)
                buf = PartitionBuffer(
                    ssp,
                    ti,
                    self._consumers[ssp.system],
                    (settings.key_serde, key_serde),
                    (settings.msg_serde, msg_serde),
                    bootstrap=settings.bootstrap,
                )
                store = self._adjunct_store_of(ssp)
                if store is not None:
                    buf.handler = handlers[store]
                    # Its end-of-dataset markers are taken by their header, before decoding.
                    buf.end_markers = isinstance(ti.storage.context.engines.get(store), BoundedDatasetEngine)
                    self._adjunct_buffers[ssp] = buf
                elif ssp in self.job.broadcast:
                    buf.tasks = (ti,)
                sources.setdefault(ssp.system, {})[buf.tp] = buf
                self._lag_gauge(ti, ssp)
        for routes in sources.values():
            for buf in routes.values():
                if buf.tasks is not None and len(buf.tasks) == 1:
                    buf.tasks = None  # one task: the plain path
        return [(self._consumers[system], routes) for system, routes in sources.items()]

    def _lag_gauge(self, ti: TaskInstance, ssp: SystemStreamPartition) -> None:
        self.registry.gauge_fn(
            m.CONSUMER_LAG,
            "Messages between the task's position and the partition's high watermark",
            {"task": ti.name, "topic": ssp.stream, "partition": str(ssp.partition)},
            self._lag_fn(ti, ssp),
        )

    def _lag_fn(self, ti: TaskInstance, ssp: SystemStreamPartition) -> Any:
        consumer = self._consumers[ssp.system]

        def lag() -> float:
            _, high = consumer.watermarks((ssp.stream, ssp.partition), cached=True)
            return max(0, high - ti.offsets.get(ssp, high))

        return lag

    # -- commit -----------------------------------------------------------------------------------
    def commit(self, tasks: Sequence[TaskInstance], wait: bool = False, requested: bool = False) -> None:
        """Each task's commit: its input offsets captured first, then the blocking snapshot phase; the
        upload and the checkpoint record follow off the loop (or before returning, with `wait`)."""
        assert self._state is not None
        # Before anything is flushed: a start fenced by a newer one must not add its cached writes to the
        # changelog the newer one restored from.
        if self._clock() >= self._next_look:
            self._look_for_newer_start()
        if self._fenced is not None:
            raise self._fenced_error()
        if self._eos is not None:
            self._commit_exactly_once(tasks)
            return
        managers = self._state.commit_managers
        # The store write count with the offsets: both before anything is flushed.
        now = {ti.name: dict(ti.offsets) for ti in tasks}
        first_now = now.get(self._tasks[0].name) if self._tasks else None
        captured = [
            (ti, {**self._read_for(ti, first_now), **now[ti.name]}, ti.storage.writes()) for ti in tasks
        ]
        timer = not (wait or requested)
        if timer:
            # Tasks with something new first: their commits' producer flush then leaves no output pending
            # that would keep an idle task's commit from being left out.
            captured.sort(key=lambda c: managers[c[0].name].unchanged(c[1], c[2]))
        for ti, offsets, writes in captured:
            start = time.perf_counter_ns()
            manager = managers[ti.name]
            if timer and manager.unchanged(offsets, writes) and not self._outputs_pending():
                # An idle task stays quiet: no flush, checkpoint record or snapshot upload repeating the
                # last commit's. A requested, waited (start, stop) or first commit is never left out.
                # Its adjunct stores' offsets files are refreshed all the same (a touch, not a write): a
                # restart reads a file's age as the store's staleness, and wipes one left quiet too long.
                dirs = ti.storage.context.store_dirs
                for store in self._adjunct_partitions(ti.model) if self.job.adjunct_inputs else ():
                    if store in dirs:
                        touch_offsets(dirs[store])
                ti.commit_idle()
            elif manager.start(offsets, force=wait, requested=requested, writes=writes):
                ti.committed(time.perf_counter_ns() - start)
            else:
                ti.commit_skipped()
            if ti.commit_interval:
                ti.next_commit = self._clock() + ti.commit_interval  # the container's clock, maybe virtual
        if wait:
            # Every task's commit was started before waiting for any: their uploads overlap (a blob-store
            # commit is several round trips per task, so one after the other grows with the task count).
            wait_all(managers[ti.name] for ti, _, _ in captured)

    def _outputs_pending(self) -> bool:
        """Whether a producer holds messages a commit's flush would wait for (any task's: the producers
        are the container's)."""
        return any(producer.pending() for producer in self._producers.values())

    def _commit_exactly_once(self, tasks: Sequence[TaskInstance]) -> None:
        """A source task cuts its version on its commit timer (or request, or stop); an aligned task only
        when its barrier is complete (`_on_aligned`): its timer just checks for a stalled barrier."""
        assert self._eos is not None
        for ti in tasks:
            assert ti.eos is not None
            if ti.eos.aligner is None:
                self._eos.cut_source(ti)
            else:
                self._eos.check_barriers(ti)
            self._eos.schedule(ti)

    def _on_aligned(self, ti: TaskInstance) -> None:
        assert self._eos is not None
        self._eos.commit(ti, advance=True)

    def _commit_ms(self, task: str) -> int:
        """The task's commit timer: task.commit.ms, as in Samza (-1: only the commits the task asks for; a
        long interval is the user's choice). Warns once per container (at its first task) when an
        at-least-once task with a changelogged store may let its checkpoint age past what a restore without
        the local copy can undo after (`idle_commit_bound_ms`)."""
        # Not forced: a timer commit of a task that buffers work and asks for its own commits could checkpoint
        # offsets past records it has not written yet.
        manager = self._state.commit_managers.get(task) if self._state is not None else None
        bound = manager.max_idle_ms if manager is not None else float("inf")
        commit_ms = self.job.commit_ms
        if self.job.exactly_once or bound == float("inf") or 0 < commit_ms <= bound:
            return commit_ms
        if task != self.model.tasks[0].name:  # the stores, so the bound, are the same for every task
            return commit_ms
        log.warning(
            "task %s (and this container's other tasks): task.commit.ms=%d%s: its changelogged stores' "
            "checkpoints may grow older than %d ms (half of the smaller of 0.9 x min.compaction.lag.ms and "
            "delete.retention.ms) while it runs. After a crash more than 0.9 x min.compaction.lag.ms after "
            "the last commit, a restart on another host (or of an in-memory store, which has no local copy) "
            "may have to keep the changelog's writes after the checkpoint rather than undo them, and the "
            "inputs read again after the checkpoint then count twice. To rule that out, commit more often "
            "(task.commit.ms at most %d, or coordinator.commit() from the task), or raise "
            "stores.<store>.changelog.min.compaction.lag.ms and delete.retention.ms",
            task,
            commit_ms,
            " (commits only when the task asks)" if commit_ms <= 0 else "",
            int(bound),
            int(bound),
        )
        return commit_ms

    def _schedule_timers(self, ti: TaskInstance) -> None:
        now = self._clock()
        if ti.commit_interval:
            ti.next_commit = now + ti.commit_interval
        if ti.window_interval:
            ti.next_window = now + ti.window_interval

    # -- bad input --------------------------------------------------------------------------------
    def on_bad_message(self, buf: PartitionBuffer, msg: RawMessage, part: str, error: Exception) -> None:
        if isinstance(error, SchemaRegistryError | SerdeConfigError):
            # The registry is down, or the serde's config cannot read the stream (a reader schema that
            # does not match): not a bad message to skip or park, every later one would fail the same way.
            raise error
        policy = self.job.deserialization_policy
        where = f"topic {buf.ssp.stream} partition {buf.ssp.partition} offset {msg.offset()}"
        if isinstance(error, ExtractionError):
            # An adjunct stream's message that decodes but yields nothing to store (a bad CDC event).
            reason, fix = error.reason, "the producer or the store's adstore.key.value.extractor.factory"
        elif isinstance(error, ProtocolError):
            # An intermediate stream's record without the exactly-once header (a stray producer's).
            reason, fix = error.problem, "the producer"
        else:
            serde, serde_name = (
                (buf.key_serde, buf.key_serde_name) if part == "key" else (buf.msg_serde, buf.msg_serde_name)
            )
            raw = msg.key() if part == "key" else msg.value()
            error = explain(serde.from_bytes, raw, error) if raw is not None else error
            reason, fix = (
                f"cannot deserialize the {part} with serde {serde_name!r}: {error}",
                "the producer or the serde",
            )
        if policy == "fail":
            raise MessageDeserializationError(
                f"{where} (system {buf.ssp.system}): {reason}. Fix {fix}, or set "
                f"task.deserialization.error.policy to skip or dlq to get past the message"
            ) from error
        self._bad_message_counter(buf.task.name, buf.ssp.stream).inc()
        if policy == "skip":
            self._bad_messages_log.told(f"skipping message at {where}: {reason}")
            return
        dlq = self.job.dlq_stream(buf.ssp.system)
        headers = [
            *(msg.headers() or []),
            ("samsa.error", reason.encode()),
            ("samsa.source.topic", buf.ssp.stream.encode()),
            ("samsa.source.partition", str(buf.ssp.partition).encode()),
            ("samsa.source.offset", str(msg.offset()).encode()),
        ]
        producer = self._producers[dlq.system]
        producer.note_topic(
            dlq.stream,
            f"Topic {dlq.stream!r} is the dead-letter stream of task.deserialization.error.policy=dlq: a "
            "bad input record too large for it is not dead-lettered; raise the limit, or set the policy to "
            "skip to get past such records.",
        )
        try:
            producer.send(dlq.stream, msg.value(), key=msg.key(), headers=headers)
        except MessageTooLargeError as e:  # say which input record it is
            advice = f"The bad record is the one at {where} (system {buf.ssp.system}). {e.advice}"
            raise MessageTooLargeError(e.topic, e.partition, e.error_name, e.reason, advice=advice) from e
        self._bad_messages_log.told(f"sent message at {where} to dead-letter stream {dlq}: {reason}")

    # -- run --------------------------------------------------------------------------------------
    def run(self) -> bool:
        """Runs to a stop; returns True when it stopped because every input was caught up."""
        loop = self.start()
        if loop is None:
            return False
        kafka = any(not is_inmemory(s.bootstrap_servers) for s in self.job.systems.values())
        with self._released_on_failure(), _startup_heap_frozen(collect=kafka):
            loop.run()
        return self.finish()

    @property
    def loop(self) -> RunLoop | None:
        """The run loop, once `start` has built it (a driver steps it with `RunLoop.step`)."""
        return self._loop

    @property
    def tasks(self) -> tuple[TaskInstance, ...]:
        """The tasks it runs, once started (a test driver reads their stores between steps)."""
        return tuple(self._tasks)

    def start(self) -> RunLoop | None:
        """Everything before the loop: clients, restore, tasks, the start-up commit. Returns the loop ready
        to `run` or `step`, then `finish`; None when stopped while waiting for its lock or restoring (all
        released)."""
        kafka_systems = [name for name, s in self.job.systems.items() if s.kafka_clients]
        # Before fencing: a second start on this machine is refused and leaves the running one be.
        if not self._driven and not self._take_lock():
            if self._pending_s3 is not None:
                self._pending_s3.discard()
            return None
        with self._released_on_failure():
            if self._pending_s3 is None:
                # Made meanwhile, on a thread of its own (importing boto3, parsing its models): off the
                # restore's path.
                self._pending_s3 = early_s3_client(self.job)
            for system in kafka_systems:
                self._producers[system] = self._new_producer(client_config(self.job, system, "producer"))
                self._producers[system].name_settings(f"systems.{system}.producer.")
            # Checkpoint records go out from the commit threads on a producer of their own.
            self._checkpoint_producer = self._new_producer(self._checkpoint_client_config())
            write_versions, read_versions = checkpoint_versions(self.job.config)
            self._checkpoints = checkpoint_manager(
                self.job, self._checkpoint_producer, read_versions, self.epoch
            )
            self._fence_older_starts()
            # Once older starts are fenced: they stop at their next commit (or the driver's word).
            if self._driven and not self._take_lock():
                self._bootstrapped()
                self._release(failed=False)
                return None
            # Before any restore: a port taken fails the start at once (a config error, not restarted), and
            # the restore's progress is scraped while it runs.
            self._serve_metrics()
            for system in {ssp.system for tm in self.model.tasks for ssp in tm.partitions}:
                self._consumers[system] = KafkaConsumer(client_config(self.job, system))
            checkpoints = self._checkpoints.read_last()
            self._state = ContainerState(
                self.job,
                self.model,
                self._serdes,
                self._producers,
                self._checkpoints,
                write_versions,
                executor=self._hooks.executor,
                clock=self._clock,
                s3_client=self._pending_s3,
            )
            # Before anything of the stores is touched or written (an exactly-once start's abort records).
            self._state.check_changelogs(checkpoints)
            self._adjunct_starts = self._prepare_adjunct_stores()
            if self.job.exactly_once:
                self._eos = ExactlyOnceTasks(
                    self.job,
                    self._state,
                    self._producers,
                    self._serdes,
                    self._new_producer,
                    self.registry,
                    self._clock,
                    self._hooks.version_clock,
                    read_for=self._read_for,
                )
                self._eos.abort_changelogs(checkpoints)
            self._phase = "restoring"
            try:
                storages = self._state.start(checkpoints, self._restore_stop, self.registry)
            except RestoreInterrupted:
                if not self._stop_requested:
                    raise
                if self._fenced is not None:
                    raise self._fenced_error() from None
                log.info("stopped while restoring; nothing processed, nothing committed")
                self._bootstrapped()
                self._release(failed=False)
                return None
            self._build_tasks(checkpoints, storages)
            if self._eos is not None:
                self._eos.set_up(self._tasks, checkpoints)
            sources = self._buffers()
            if self._eos is not None:
                self._eos.mark_inputs([buf for _, routes in sources for buf in routes.values()])
            # Before the assignment: once fetching, a watermark request waits behind the first large fetch.
            ends = self._high_watermarks(lambda ssp: True) if self.until_caught_up else None
            bootstrap = self._high_watermarks(lambda ssp: self.job.stream(ssp.system_stream).bootstrap)
            for consumer, routes in sources:
                consumer.assign({buf.tp: buf.start_offset() for buf in routes.values()})
            self._container_metrics()
            self._bad_message_counters()
            if self._hooks.before_init is not None:
                self._hooks.before_init(self._tasks)
            for ti in self._tasks:
                ti.init()
            if self._eos is not None:
                # The new generations are durable (with the restored state) before anything is sent.
                for ti in self._tasks:
                    self._eos.commit(ti, advance=False)
                self._eos.announce(self._tasks)
            elif self._state.has_durable_stores or self._unsaved_starts:
                # Seal the restored state (and the changelog's undo records) before processing anything:
                # on a first start there is no checkpoint to go back to, so a crash before this one is
                # durable would leave processed writes in stores that are never wiped (counted twice).
                # And seal where the inputs start when a checkpoint did not say so: a crash before the
                # first timer commit would otherwise resolve samza.offset.default again at the restart
                # (`upcoming`: past every message written meanwhile, never processed).
                log.debug(
                    "container %s: start-up commit (%d input partitions start where no checkpoint says)",
                    self.model.id,
                    len(self._unsaved_starts),
                )
                self.commit(self._tasks, wait=True)
            self._loop = RunLoop(
                sources,
                self._tasks,
                self.commit,
                self.on_bad_message,
                batch_size=self.job.batch_size,
                end_offsets=ends,
                bootstrap_ends=bootstrap,
                on_bootstrapped=self._bootstrapped,
                poll=self._poll_producers,
                polled=self.registry.counter(
                    m.CONTAINER_MESSAGES_POLLED,
                    "Messages fetched by the container",
                    {"container": self.model.id},
                ),
                poll_timer=self.registry.timer(
                    m.CONTAINER_POLL_SECONDS, "Time in consumer fetches", {"container": self.model.id}
                ),
                clock=self._clock,
                chooser=self._hooks.chooser,
                on_aligned=self._on_aligned,
                on_rewind=self._eos.rewind if self._eos is not None else None,
                name=f"container {self.model.id}",
            )
            if self._stop_requested:
                self._loop.stop()
            self._start_watchdog(self._loop)
            self._phase = "running"
            log.info("container %s running tasks %s", self.model.id, ", ".join(t.name for t in self._tasks))
            if self._bootstrap_progress:
                self._bootstrap_reporter = RestoreReporter(self._bootstrap_progress, what="bootstrapp")
                self._bootstrap_reporter.__enter__()
            return self._loop

    def _fence_older_starts(self) -> None:
        """Registers the checkpoint producer, which fences every older start of this container wherever it
        runs, and records this start. An older start still running learns of it from its `StartWatch` at
        its next fetch, or at the latest when its next checkpoint transaction fails, and stops without
        committing."""
        start = ContainerStart.here(
            self.job.job_key, self.model.id, self.epoch, self._started_ms, assignment=assignment(self.model)
        )
        if self._fenced is not None:
            # Told before it registered (by its driver): registering now would fence the newer start.
            raise CheckpointFencedError(fenced_message(start, self.epoch, self._fenced))
        assert self._checkpoints.starts_topic is not None
        self._start_watch = StartWatch(
            client_config(self.job, checkpoint_system(self.job)), self._checkpoints.starts_topic
        )
        self._start_watch.begin()
        self._checkpoints.on_fenced = self.fence
        self._checkpoints.init_fencing(start)
        self._start_watch.watch_for(start)
        if self._fenced is not None:  # told meanwhile
            self._checkpoints.fence(self._fenced)

    def _take_lock(self) -> bool:
        """Refuses a second start of this container on this machine (two would share, and delete each
        other's, store files), then writes the pid file. A start under a newer epoch (Spark) waits for the
        older one, fenced by now, to stop first; False when asked to stop while waiting."""
        lock, self._held_lock = self._held_lock, None
        if lock is None:
            lock = container_lock(self.job, self.model.id)
            wait_s = (self.job.heartbeat_timeout_ms + self.job.shutdown_ms) / 1000 if self._driven else 0.0
            if not lock.acquire(max(wait_s, self._lock_wait_s), self._restore_stop.is_set):
                log.info("stopped while waiting for %s to be free; nothing started", lock.path)
                return False
        self._lock = lock
        self._pid_file = pid_dir(self.job) / f"container-{self.model.id}.pid"
        self._pid_file.write_text(f"{os.getpid()}\n")  # a line, as `cat` shows it
        return True

    def _let_go(self) -> None:
        """Removes the pid file and releases the lock, once: a later start of the container may own them."""
        pid_file, self._pid_file = self._pid_file, None
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def commit_all(self) -> None:
        """Commits every task now and waits until it is durable (a test driver between its steps)."""
        self.commit(self._tasks, wait=True, requested=True)

    def finish(self) -> bool:
        """After the loop: the tasks' close(), the final commit, the stores' and clients' release. True when
        the loop stopped because every input was caught up."""
        assert self._loop is not None, "finish() follows a start() that returned the loop"
        with self._released_on_failure():
            self._phase = "stopping"
            self._bootstrapped()
            if self._fenced is not None:
                raise self._fenced_error()
            # close() before the final commit, as Kafka Streams closes processors before its last commit:
            # what close() writes (aggregates kept in memory, say) is committed with the rest. Written after
            # the commit, it would be undone at the next start as writes past the checkpoint. A close()
            # that fails fails the stop without a commit: the next start resumes from the last one.
            for ti in self._tasks:
                ti.close_task()
            if self._eos is not None:
                self._eos.stopping = True  # source tasks end on the clock's next version boundary
            self.commit(self._tasks, wait=True)
            if self._eos is not None:
                for ti in self._tasks:
                    if ti.eos is not None and ti.eos.aligner is not None:
                        self._eos.abort_open(ti)
            names = ", ".join(t.name for t in self._tasks) or "none"
            self._close_tasks()
        self._bootstrapped()
        self._release(failed=False)
        why = " (caught up with its inputs)" if self._loop.caught_up else ""
        log.info("container %s stopped after its final commit%s (tasks: %s)", self.model.id, why, names)
        return self._loop.caught_up

    def _fenced_error(self) -> CheckpointFencedError:
        # The broker's refusal is told before the newer start is looked up: wait for its name (it is
        # looked up with a bound; the container already stopped processing).
        self._checkpoints.wait_named(_NAMING_WAIT_S)
        return CheckpointFencedError(
            self._checkpoints.fenced or f"container {self.model.id} (epoch {self.epoch}): {self._fenced}"
        )

    @contextmanager
    def _released_on_failure(self) -> Iterator[None]:
        """A simulated crash dies in place; any other failure closes the tasks and clients and goes up. A
        sys.exit() or KeyboardInterrupt of the job's code is a failure too (`escaped`), not a stop."""
        try:
            try:
                yield
            except (SystemExit, KeyboardInterrupt) as e:
                # Samsa stops a container by its flag, never by raising these (SIGINT and SIGTERM call
                # `stop` under `samsa run`): they come from the job's code outside its task's methods (a
                # serde, a store engine, an extractor), whose own are UserCodeErrors already. Gone up, they
                # would end the process as if the container had finished: exit 0, never restarted.
                if interrupted(e):
                    raise  # a real Ctrl-C where it raises one (a test session): it goes on interrupting
                raise escaped(e, f"container {self.model.id}") from e
        except SimulatedCrash:
            self.crash()
            raise
        except BaseException as e:
            if isinstance(e, CheckpointFencedError) or self._fenced is not None:
                # A newer start took over: its state must not meet this one's cached writes or outputs.
                self.crash()
                raise
            # Before `_fail` lets the lock go: a newer start must find a damaged store copy set aside.
            damaged = self._damaged_store(e)
            self._fail()
            full = self._disk_full(e)  # once the commit in flight has ended (or been abandoned)
            if full is None and damaged is not None and damaged[1] is not e:
                # Damaged store files are the cause whatever they surfaced as (a read in a task's process(),
                # the open at restore): the container fails with what they mean, restartable or not.
                damage, failure = damaged
                if failure is damage:
                    raise damage from damage.__cause__  # of no store of this container: as RocksDB told it
                raise failure from damage
            if full is None or full is e:
                raise
            # A full disk is the cause whatever it surfaced as (a task's process() or a later commit failing
            # with it): the container fails with it, so that it is what the log and the exit tell.
            raise full from full.__cause__

    def _damaged_store(self, error: BaseException) -> tuple[StoreCorruptError, StoreError] | None:
        """The damaged store files behind `error`, with what the container fails with for them (the storage
        sets a copy with a backup aside); None when there are none."""
        damage = corruption_cause(error)
        if damage is None or self._state is None:
            return None
        return damage, self._state.storage.damaged(damage)

    def _disk_full(self, error: BaseException) -> StoreDiskFullError | None:
        """The full disk behind `error`, or behind a commit's failure that the next commit would raise."""
        managers = self._state.commit_managers.values() if self._state is not None else ()
        for failure in [error, *(manager.failure for manager in managers if manager.failure is not None)]:
            full = disk_full_cause(failure)
            if full is not None:
                return full
        return None

    def _fail(self) -> None:
        """A failure is on its way up: close the tasks and the clients quietly, the stores once the commits
        in flight have ended (or been abandoned): closed under one, they would fail it."""
        try:
            self._settle_commits()
            self._close_tasks(quietly=True)
        finally:
            self._bootstrapped()
            self._release(failed=True)

    def _settle_commits(self) -> None:
        """Waits for the commits in flight to end, or abandons them, within a share of task.shutdown.ms."""
        if self._state is None:
            return
        try:
            self._state.settle_commits(self.job.shutdown_ms * _SETTLE_SHARE / 1000)
        except Exception as e:  # the failure on its way up is the cause: this one is told, not raised
            log.warning("while waiting for the commits in flight after a failure: %r", e)

    def crash(self) -> None:
        """Dies in place like kill -9 (for the deterministic scheduler, and when fenced; idempotent): no
        final commit, no `close` of the tasks, no flush of store caches or producers. Queued commit work is
        dropped, sends a test's producer still buffers are lost, and the stores' engines, consumers and
        producers are released so that a new container of the same model can start in this process and
        restore."""
        if self._phase == "crashed":
            return
        self._phase = "crashed"
        self._close_watchdog()
        self._stopping_for_crash()
        self._tasks = []
        if self._state is not None:
            self._state.crash()
        abandon = [getattr(p, "crash", None) for p in self._all_producers()]
        closers: list[Callable[[], None]] = [a for a in abandon if a is not None]
        closers += [c.close for c in self._consumers.values()]
        closers += [partial(p.close, 0) for p in self._all_producers()]
        if self._pending_s3 is not None:
            closers.append(self._pending_s3.discard)
        if self._start_watch is not None:
            closers.append(self._start_watch.close)
        if self._server is not None:
            closers.append(self._server.stop)
        for close in closers:
            try:
                close()
            except Exception as e:
                log.debug("while releasing a crashed container: %r", e)
        self._let_go()

    def _stopping_for_crash(self) -> None:
        self._stop_requested = True
        if self._loop is not None:
            self._loop.stop()
        reporter, self._bootstrap_reporter = self._bootstrap_reporter, None
        if reporter is not None:
            reporter.__exit__(None, None, None)

    def _all_producers(self) -> list[KafkaProducer]:
        extra = [self._checkpoint_producer] if self._checkpoint_producer is not None else []
        sinks = self._eos.sinks if self._eos is not None else []
        return [*self._producers.values(), *extra, *sinks]

    def _new_producer(self, config: dict[str, Any]) -> KafkaProducer:
        factory = self._hooks.producer_factory
        return factory(config) if factory is not None else KafkaProducer(config)

    def _release(self, failed: bool) -> None:
        """Closes the clients. After a failure the cause is already on its way up: close quickly (outputs
        of processed messages still go out) and log, rather than raise, whatever else goes wrong."""
        self._close_watchdog()
        self._bad_messages_log.close()  # what the last while's count still holds
        server = self._server
        flush_s = _FLUSH_AFTER_FAILURE_S if failed else _FLUSH_ON_STOP_S
        closers: list[Callable[[], None]] = [server.stop] if server is not None else []
        if self._pending_s3 is not None:
            closers.append(self._pending_s3.discard)
        if self._start_watch is not None:
            closers.append(self._start_watch.close)
        closers += [c.close for c in self._consumers.values()]
        if self._state is not None:
            # After a failure, uploads in flight are abandoned: they could retry for many minutes.
            closers.append(partial(self._state.close, abandon=failed))
        closers += [partial(p.close, flush_s) for p in self._producers.values()]
        if self._checkpoint_producer is not None:
            closers.append(partial(self._checkpoint_producer.close, flush_s))
        if self._eos is not None:
            # An open transaction is aborted by the next start's registration: nothing to flush.
            closers += [partial(p.close, 0) for p in self._eos.sinks]
        first: Exception | None = None
        try:
            for close in closers:
                try:
                    close()
                except Exception as e:
                    if failed:
                        log.warning("while stopping after a failure: %r", e)
                    elif first is None:
                        first = e
        finally:
            self._let_go()
        if first is not None:
            raise first

    def _serve_metrics(self) -> None:
        """Registers the restoring gauge and, with metrics.prometheus.port set, binds the port and serves."""
        self.registry.gauge_fn(
            m.CONTAINER_RESTORING,
            "1 while the container restores its stores at start, else 0",
            {"container": self.model.id},
            lambda: 1 if self._phase == "restoring" else 0,
        )
        if self.job.prometheus_port is None:
            return
        base = self.job.prometheus_port
        # Container N serves on base + N; base 0 asks each for a free port of its own (logged).
        port = base + int(self.model.id) if base else 0
        self._server = PrometheusServer(self.registry, port, name=f"container {self.model.id}")
        # A fenced older start of this container (a task Spark took for dead) may hold the port while it
        # stops: a few seconds' grace before a port in use counts as a config error.
        self._server.start(busy_wait_s=_METRICS_PORT_GRACE_S)

    def _container_metrics(self) -> None:
        labels = {"container": self.model.id}
        self.registry.gauge(m.CONTAINER_TASKS, "Tasks the container runs", labels).set(len(self._tasks))
        started = time.monotonic()
        self.registry.gauge_fn(
            m.CONTAINER_UPTIME_SECONDS,
            "Seconds since the container started",
            labels,
            lambda: time.monotonic() - started,
        )

    def _start_watchdog(self, loop: RunLoop) -> None:
        """Watches the loop for a task stuck in process(), and serves how long each task has been in its
        current process() call (0 when in none, or with the watchdog off)."""
        warn_ms: int = self.job.config.value("task.process.warn.ms")
        if warn_ms > 0:
            self._watchdog = StepWatchdog(f"container {self.model.id}", loop, warn_ms / 1000)
            self._watchdog.start()
        watchdog = self._watchdog
        for ti in self._tasks:
            self.registry.gauge_fn(
                m.PROCESS_STUCK_SECONDS,
                "Seconds the task has been in its current process() call (0 when in none)",
                {"task": ti.name},
                partial(watchdog.stuck_seconds, ti.name) if watchdog is not None else lambda: 0.0,
            )

    def _close_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.close()

    def _bad_message_counters(self) -> None:
        """Every task's input streams start at 0 (Prometheus' advice): increase() sees the first burst."""
        for ti in self._tasks:
            for ssp in ti.model.partitions:
                self._bad_message_counter(ti.name, ssp.stream)

    def _bad_message_counter(self, task: str, stream: str) -> m.Counter:
        counter = self._bad_messages.get((task, stream))
        if counter is None:
            counter = self.registry.counter(
                m.DESERIALIZATION_ERRORS,
                "Input messages that failed to deserialize",
                {"task": task, "topic": stream, "policy": self.job.deserialization_policy},
            )
            self._bad_messages[(task, stream)] = counter
        return counter

    def _poll_producers(self) -> None:
        """With every fetch: serves the producers' delivery reports, and looks for a newer start now and
        then."""
        for producer in self._producers.values():
            producer.poll(0)
        if self._clock() >= self._next_look:
            self._look_for_newer_start()

    def _look_for_newer_start(self) -> None:
        """One round trip (the start records' high watermark); stops the container when a newer start of it
        recorded itself."""
        watch = self._start_watch
        self._next_look = self._clock() + _LOOK_EVERY_S
        if watch is not None and self._fenced is None:
            newer = watch.look()
            if newer is not None:
                self.fence(f"a newer start of it took over ({newer.describe()})")

    def _high_watermarks(self, include: Any) -> dict[SystemStreamPartition, int]:
        return {
            ssp: self._consumers[ssp.system].watermarks((ssp.stream, ssp.partition))[1]
            for ti in self._tasks
            for ssp in ti.model.partitions
            if include(ssp)
        }

    def _close_tasks(self, quietly: bool = False) -> None:
        """Each task's close() (unless it ran) and its stores'; `quietly` after a failure: log, go on."""
        tasks, self._tasks = self._tasks, []
        first: Exception | None = None
        for ti in tasks:
            try:
                ti.close()
            except Exception as e:
                if quietly and disk_full_cause(e) is not None:
                    # The full disk fails the stop too: the failure on its way up tells it, once.
                    log.warning("task %s: its stores did not close cleanly, the disk being full", ti.name)
                elif quietly:
                    log.exception("task %s: close() failed while stopping after an error", ti.name)
                elif first is None:  # raised once every task's stores are closed
                    if isinstance(e, UserCodeError):
                        first = e
                    else:
                        first = ContainerError(f"task {ti.name}: closing its stores failed: {e!r}")
                        first.__cause__ = e
        if first is not None:
            raise first


def _several_partitions(
    store: str, task: str, ssps: Sequence[SystemStreamPartition], broadcast: Sequence[SystemStreamPartition]
) -> AdjunctConfigError:
    """The error for a bounded dataset's store that `task` would feed from several partitions `ssps`: its
    versions are sealed by one partition's end-of-dataset markers, which say nothing of the others'."""
    stream = ssps[0].system_stream
    partitions = ", ".join(str(ssp.partition) for ssp in ssps)
    if any(ssp in broadcast for ssp in ssps):
        how = (
            f"its stream {stream} is broadcast (task.broadcast.inputs) with partitions {partitions}, "
            "all read into one store"
        )
        fix = (
            f"give topic {stream.stream} one partition, or leave it out of task.broadcast.inputs "
            "(one partition per task, into each task's own store)"
        )
    else:
        how = f"task {task} reads partitions {partitions} of its stream {stream} into it"
        fix = "group the stream so that each task reads one of its partitions"
    return AdjunctConfigError(
        f"stores.{store}.adstore.versioned",
        f"store {store!r} holds a bounded dataset, read from one partition per task, but {how}: {fix}, or "
        f"set stores.{store}.adstore.versioned=false",
    )
