"""A container's durable state: stores restored through their backends, and each task's commit manager."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from samsa.adjunct.bounded import BoundedDatasetEngine
from samsa.checkpoint.commit import CommitResult, DurableStore, TaskCommitManager
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import AnyCheckpoint, Checkpoint, CheckpointV2
from samsa.checkpoint.tool import with_changelog_markers
from samsa.exactly_once.task import EosState
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.record_marks import RecordMark
from samsa.runtime import metrics as m
from samsa.runtime.config.job import JobConfig, parse_stream
from samsa.runtime.config.keys import RETAIN_EXISTING_STATE
from samsa.runtime.coordinator import client_config
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.job_model import ContainerModel, JobModel, TaskModel, grouped_counts
from samsa.runtime.store_metrics import CommitMetrics, restore_gauges
from samsa.runtime.validation import blob_backed_stores
from samsa.serde.registry import SerdeRegistry
from samsa.stores.backend import Markers, StateBackendFactory
from samsa.stores.backends import BLOBSTORE, CHANGELOG
from samsa.stores.blobstore.backup import UploadStats
from samsa.stores.blobstore.factory import BlobStoreBackendFactory, PendingS3Client, blob_store_admin
from samsa.stores.blobstore.renamed import check_store_renames
from samsa.stores.blobstore.requests import ABANDON_WAIT_S
from samsa.stores.blobstore.restore import RestoreStats
from samsa.stores.blobstore.settings import BlobStoreSettings
from samsa.stores.changelog.admin import ChangelogAdmin
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.lost import check_changelogs_kept
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.changelog.moved import changelog_moves, check_changelog_moves, kafka_probe
from samsa.stores.changelog.settings import idle_commit_bound_ms
from samsa.stores.factory import ROCKSDB, StoreSpec, store_specs
from samsa.stores.rocksdb import container_memory
from samsa.stores.rocksdb_options import RocksDbMemory
from samsa.stores.storage_manager import ContainerStorage, TaskStorage, TaskStoresModel
from samsa.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)


def changelog_partition(task: TaskModel) -> int:
    """GroupByPartition: a task's changelog partition is its partition number."""
    return int(task.name.rsplit(" ", 1)[-1])


def changelog_partitions(model: JobModel) -> int:
    """How many partitions the job's changelogs need: one past the highest task partition number (a number
    only broadcast partitions have gets no task, so the numbers may have gaps)."""
    return max((changelog_partition(t) for t in model.tasks), default=-1) + 1


def input_partitions(job: JobConfig, model: ContainerModel) -> dict[str, int] | None:
    """`system.stream` -> partition count of each input grouped into the job's tasks, in the job model of
    the container (None: a container model no job model filled in)."""
    if not model.input_counts:
        return None
    return {str(ss): n for ss, n in grouped_counts(model.input_counts, job.broadcast).items()}


def changelogs(job: JobConfig, specs: Mapping[str, StoreSpec]) -> dict[str, SystemStream]:
    """Store -> changelog stream, for the stores that have one."""
    return {
        s: parse_stream(spec.changelog, f"stores.{s}.changelog")
        for s, spec in specs.items()
        if spec.changelog
    }


def changelog_system(job: JobConfig, logs: Mapping[str, SystemStream]) -> str | None:
    """The one system every changelog is on (one producer sends changelog writes and restore trims)."""
    systems = {stream.system for stream in logs.values()}
    if len(systems) > 1:
        raise ConfigError(
            f"stores.<s>.changelog: all changelogs must be on one system, found {sorted(systems)}"
        )
    for stream in logs.values():
        if stream.system not in job.systems or not job.systems[stream.system].kafka_clients:
            raise ConfigError(f"stores.<s>.changelog={stream}: define Kafka system {stream.system!r}")
    return next(iter(systems), None)


def blob_store_settings(job: JobConfig) -> BlobStoreSettings:
    """The job's `blobstore.*` keys (the local directory defaults to `<logged store dir>/blobstore`)."""
    c = job.config
    local = c.value("blobstore.local.dir")
    return BlobStoreSettings(
        job_name=job.name,
        job_id=job.id,
        local_dir=Path(local) if local else job.logged_store_dir / "blobstore",
        s3_bucket=c.value("blobstore.s3.bucket"),
        s3_prefix=c.value("blobstore.s3.prefix") or "",
        s3_endpoint_url=c.value("blobstore.s3.endpoint.url"),
        s3_region=c.value("blobstore.s3.region"),
        chunk_size=c.value("blobstore.chunk.size"),
        upload_parallelism=c.value("blobstore.upload.parallelism"),
        download_parallelism=c.value("blobstore.download.parallelism"),
        ttl_days=c.value("blobstore.ttl.days"),
        retry_max_duration_ms=c.value("blobstore.retry.max.duration.ms"),
    )


def early_s3_client(job: JobConfig) -> PendingS3Client | None:
    """For a job whose stores are backed up to S3: its client, being made from now on (see
    `PendingS3Client`); `ContainerState` takes it, whoever else started it discards it if not."""
    return PendingS3Client(blob_store_settings(job)) if uses_s3(job) else None


def uses_s3(job: JobConfig) -> bool:
    """The job backs stores up to S3 (its containers make an S3 client)."""
    return bool(blob_store_settings(job).s3_bucket and blob_backed_stores(job))


def create_changelogs(job: JobConfig, partitions: int, inputs: Mapping[str, int] | None = None) -> None:
    """Creates (or checks) the state backends' resources: changelog topics (compacted, `partitions`
    partitions: see `changelog_partitions`) and the blob store's location (bucket lifecycle rule, or
    directory). `inputs`: partition count of each input grouped into tasks, which a refused changelog's
    partition count is explained by."""
    specs = store_specs(job.config)
    if blob_backed_stores(job, specs):
        blob_store_admin(blob_store_settings(job)).create_resources()
    logs = changelogs(job, specs)
    if not logs:
        return
    admins: dict[str, KafkaAdmin] = {}

    def admin_for(system: str) -> KafkaAdmin:
        return admins.setdefault(system, KafkaAdmin(client_config(job, system)))

    try:
        stores = {s: specs[s].config for s in logs}
        ChangelogAdmin(stores, logs, partitions, admin_for, inputs).create_resources()
    finally:
        for admin in admins.values():
            admin.close()


def _checkpoint_id(checkpoint: AnyCheckpoint | None) -> str | None:
    """The id of the commit a checkpoint records (V1 carries it in its changelog entries)."""
    if isinstance(checkpoint, CheckpointV2):
        return str(checkpoint.checkpoint_id)
    if checkpoint is not None and checkpoint.changelog_offsets:
        return next(iter(checkpoint.changelog_offsets.values()))[0]
    return None


@dataclass(frozen=True)
class TaskInputs:
    """What a task's checkpoint records of its input partitions (see `checkpoint_inputs`)."""

    offsets: dict[SystemStreamPartition, int]
    marks: dict[SystemStreamPartition, RecordMark]
    counts: dict[SystemStream, int]
    #: The partitions of `offsets` the task does not read now, kept from its start checkpoint.
    kept: frozenset[SystemStreamPartition]


def checkpoint_inputs(
    start: AnyCheckpoint | None,
    offsets: Mapping[SystemStreamPartition, int],
    marks: Mapping[SystemStreamPartition, RecordMark],
    counts: Mapping[SystemStream, int],
) -> TaskInputs:
    """The input entries of a task's checkpoint: those of the partitions it reads (`offsets` at the commit;
    this run's `marks` of their first records and the `counts` known of their streams, of the container's
    partitions), and, unchanged, those its checkpoint at the start (`start`) holds of partitions it does not
    read now (their stream removed from task.inputs, or read by another task), so that a stream added back
    resumes where it stopped, not at samza.offset.default (its records read twice, or with `upcoming` those
    written meanwhile skipped): Kafka Streams, too, keeps the committed offsets of a topic no longer read."""
    kept = {ssp: o for ssp, o in start.offsets.items() if ssp not in offsets} if start else {}
    kept_marks = start.input_marks if isinstance(start, CheckpointV2) else {}
    read = {ssp.system_stream for ssp in offsets}
    # A stream read now has its count known (`counts`); one only kept has its checkpoint's.
    gone = {ssp.system_stream for ssp in kept} - read
    kept_counts = start.input_counts if start else {}
    return TaskInputs(
        {**kept, **offsets},
        {
            **{ssp: m for ssp, m in kept_marks.items() if ssp in kept},
            **{ssp: m for ssp, m in marks.items() if ssp in offsets},
        },
        {
            **{ss: n for ss, n in kept_counts.items() if ss in gone},
            **{ss: n for ss, n in counts.items() if ss in read},
        },
        frozenset(kept),
    )


class ContainerState:
    """Opens and restores a container's stores and runs each task's commits."""

    def __init__(
        self,
        job: JobConfig,
        model: ContainerModel,
        serdes: SerdeRegistry,
        producers: Mapping[str, KafkaProducer],
        checkpoints: KafkaCheckpointManager,
        write_versions: list[int],
        executor: Executor | None = None,
        clock: Callable[[], float] = time.monotonic,
        s3_client: PendingS3Client | None = None,
    ) -> None:
        """`executor` runs the commits' async phases (default: a pool of commit threads); `clock` times
        the commits' max delay (a test's virtual clock); `s3_client` is the blob store's, made since the
        container's start (`early_s3_client`)."""
        self.job = job
        self._clock = clock
        self._checkpoints = checkpoints
        #: Per input partition, the mark of its first record at the container's start (the container's
        #: `_input_firsts`): every checkpoint of the run records it.
        self.input_marks: dict[SystemStreamPartition, RecordMark] = {}
        #: Per input stream, its partition count when the job first checkpointed it (the container's
        #: `recorded_partition_counts`): every checkpoint of the run records those of its task's streams.
        self.input_counts: dict[SystemStream, int] = {}
        #: Each task's checkpoint at the start (`start`): its entries of input partitions the task does not
        #: read now are kept in every checkpoint of the run (`checkpoint_inputs`).
        self._starts: dict[str, AnyCheckpoint] = {}
        self._write_versions = write_versions
        self._producers = producers
        container_memory().configure(RocksDbMemory.from_config(job.config))
        self.specs = store_specs(job.config)
        self.changelogs = changelogs(job, self.specs)
        system = changelog_system(job, self.changelogs)
        backends: dict[str, StateBackendFactory] = {}
        if system is not None:
            self._changelog_factory: ChangelogBackendFactory | None = ChangelogBackendFactory(
                producers[system],
                lambda s: client_config(job, s),
                self.changelogs,
                # Unset keeps, as true does: a first start it would wrong is refused before (inherited_state).
                retain_existing_state=job.config.value(RETAIN_EXISTING_STATE) is not False,
            )
            backends[CHANGELOG] = self._changelog_factory
        else:
            self._changelog_factory = None
        self._registry: m.MetricsRegistry | None = None
        blob_stores = blob_backed_stores(job, self.specs)
        self._blob_factory: BlobStoreBackendFactory | None = None
        if blob_stores:
            self._blob_factory = BlobStoreBackendFactory(
                blob_store_settings(job),
                blob_stores,
                on_upload=self._record_upload,
                on_restore=self._record_restore,
                tasks=len(model.tasks),
                s3_client=s3_client,
            )
            backends[BLOBSTORE] = self._blob_factory
        elif s3_client is not None:
            s3_client.discard()
        tasks = [TaskStoresModel(t.name, changelog_partition(t)) for t in model.tasks]
        self.storage = ContainerStorage(
            job.job_key,
            tasks,
            self.specs,
            job.config,
            serdes,
            job.logged_store_dir,
            job.non_logged_store_dir,
            backends,
            producers[system].send if system is not None else None,
            job.config.value("stores.restore.parallelism"),
            {store: f"stream {stream}" for store, stream in job.adjunct_inputs.items()},
            {
                store: model.tasks[0].name
                for store, stream in job.adjunct_inputs.items()
                if stream in job.broadcast_streams and model.tasks
            },
            {
                store: BoundedDatasetEngine
                for store in job.adjunct_inputs
                if job.config.value(f"stores.{store}.adstore.versioned")
            },
            input_partitions(job, model),
        )
        if job.exactly_once:
            self.storage.use_exactly_once()
        self._pool: Executor = executor or ThreadPoolExecutor(max(1, min(8, len(tasks))), "commit")
        self.commit_managers: dict[str, TaskCommitManager] = {}
        #: Exactly-once tasks' transactional producers: their checkpoints go in the task's transaction.
        self.transactions: dict[str, KafkaProducer] = {}
        #: The exactly-once state the task's commit in progress checkpoints.
        self.pending_eos: dict[str, EosState] = {}
        self._changelogs_checked = False
        self._blobs_abandoned = False  # `settle_commits` (after a failure) may abandon them before `close`

    def check_changelogs(self, checkpoints: Mapping[str, AnyCheckpoint]) -> None:
        """Refuses the start (`ChangelogMovedError`) while a store's changelog was changed in the config and
        the one its checkpoint names still holds its state (`stores.changelog.moved`), (`StoreRenamedError`)
        while a blob-backed store looks renamed (`stores.blobstore.renamed`), or
        (`ChangelogLostError`) while one lost its checkpointed state with no local copy here
        (`stores.changelog.lost`). Before anything is restored or written: the container calls it before an
        exactly-once start's abort records; `start` calls it too (once in all)."""
        if self._changelogs_checked:
            return
        logged = {
            s: stream
            for s, stream in self.changelogs.items()
            if CHANGELOG in self.storage.store_backends[s].backup and s not in self.storage.read_only
        }
        markers: dict[str, Markers | None] = {}
        v1: dict[str, list[SystemStreamPartition]] = {}
        v2: dict[str, tuple[str, Mapping[str, Markers]]] = {}
        for task in self.storage.contexts:
            checkpoint = checkpoints.get(task)
            if isinstance(checkpoint, CheckpointV2):
                markers[task] = checkpoint.state_markers.get(CHANGELOG)
                v2[task] = (str(checkpoint.checkpoint_id), checkpoint.state_markers)
            elif checkpoint is not None:
                v1[task] = list(checkpoint.changelog_offsets)
        # A blob-backed store renamed: its new name would start empty (`stores.blobstore.renamed`).
        blob_restored = [
            s
            for s, backends in self.storage.store_backends.items()
            if BLOBSTORE in backends.backup
            and backends.restore[:1] == (BLOBSTORE,)
            and s not in self.storage.read_only
        ]
        check_store_renames(self.specs, blob_restored, v2)
        moves = changelog_moves(logged, markers, v1)
        if moves:
            job = self.job

            def config_for(system: str) -> dict[str, Any] | None:
                settings = job.systems.get(system)
                return client_config(job, system) if settings and settings.kafka_clients else None

            check_changelog_moves(moves, kafka_probe(config_for))
        # Before an exactly-once start's abort records move a recreated changelog's end towards the
        # checkpointed offset (`ChangelogLostError`). A local copy an earlier run found damaged goes first:
        # it must not pass for the checkpointed state here, only for the restore to delete it after.
        self.storage.discard_damaged()
        rebuilds = check_changelogs_kept(
            self.storage,
            {task: self._restore_markers(checkpoints.get(task)) for task in self.storage.contexts},
            {task: _checkpoint_id(checkpoints.get(task)) for task in self.storage.contexts},
        )
        self._record_rebuilds(checkpoints, rebuilds)
        self._changelogs_checked = True

    def _record_rebuilds(
        self, checkpoints: Mapping[str, AnyCheckpoint], rebuilds: Mapping[str, Markers]
    ) -> None:
        """Writes each task's checkpoint again, its id, offsets and all kept, with the markers saying which
        lost changelogs the restore rebuilds from the local copies here: durable before the first rebuild
        record, so that a start on another host, which has no such copy, refuses the partly rebuilt
        changelog a cut-short rebuild leaves (`ChangelogRebuildCutShortError`) rather than restore it. The
        next commit's markers are plain positions: it seals the rebuild."""
        for task, markers in sorted(rebuilds.items()):
            recorded = with_changelog_markers(checkpoints[task], markers)
            v1 = recorded if isinstance(recorded, Checkpoint) else None
            v2 = recorded if isinstance(recorded, CheckpointV2) else None
            self._checkpoints.commit(task, (recorded.version,), v1, v2)
            log.warning(
                "task %s: recorded in its checkpoint that the changelog of store(s) %s is being rebuilt from "
                "the local copy here: until a commit seals the rebuild, a start elsewhere is refused",
                task,
                ", ".join(sorted(markers)),
            )

    def start(
        self, checkpoints: Mapping[str, AnyCheckpoint], stop: threading.Event, registry: m.MetricsRegistry
    ) -> dict[str, TaskStorage]:
        """Restores every durable store to its checkpoint, then opens all stores for processing."""
        self._registry = registry
        self._starts = dict(checkpoints)
        self.check_changelogs(checkpoints)
        markers = {task: self._restore_markers(checkpoints.get(task)) for task in self.storage.contexts}
        ids = {task: _checkpoint_id(checkpoints.get(task)) for task in self.storage.contexts}
        kept = {
            task
            for task, checkpoint in checkpoints.items()
            if isinstance(checkpoint, CheckpointV2) and checkpoint.local_state_kept
        }
        if self._blob_factory is not None:
            doc = "Time the start waited for its S3 client, made while the checkpoints were read"
            registry.gauge(m.BLOB_CLIENT_WAIT_SECONDS, doc, {}).set(self._blob_factory.client_wait_s)
        timer = registry.timer(m.CONTAINER_RESTORE_SECONDS, "Time restoring stores at start", {})
        # Before the restore: scraped while it runs (the metrics are served from before it).
        durable = [name for name, backends in self.storage.store_backends.items() if backends.durable]
        restore_gauges(registry, self.storage.contexts.values(), durable)
        with timer.time():
            self.storage.restore(markers, ids, stop, kept)
        opened = self.storage.open()

        def commit_manager(name: str) -> TaskCommitManager:
            return self._commit_manager(opened[name], markers[name])

        # A backup manager's init finishes its snapshot's cleanup (blob-store round trips): tasks in
        # parallel, so a start does not grow with the task count.
        with ThreadPoolExecutor(max(1, min(8, len(opened))), "backup-init") as pool:
            self.commit_managers.update(zip(opened, pool.map(commit_manager, opened), strict=True))
        return opened

    def _record_upload(self, stats: UploadStats) -> None:
        if self._registry is None:
            return
        r, labels = self._registry, {"task": stats.task, "store": stats.store}
        r.counter(m.BLOB_FILES_UPLOADED, "Files uploaded to the blob store", labels).inc(stats.files_uploaded)
        r.counter(m.BLOB_BYTES_UPLOADED, "Bytes uploaded to the blob store", labels).inc(stats.bytes_uploaded)
        doc = "Files of the last snapshot already in the blob store (not uploaded again)"
        r.gauge(m.BLOB_FILES_RETAINED, doc, labels).set(stats.files_retained)
        doc = "Bytes of the last snapshot already in the blob store (not uploaded again)"
        r.gauge(m.BLOB_BYTES_RETAINED, doc, labels).set(stats.bytes_retained)
        doc = "Time uploading one store's snapshot at a commit"
        r.timer(m.BLOB_UPLOAD_SECONDS, doc, labels).update_ns(int(stats.seconds * 1e9))

    def _record_restore(self, stats: RestoreStats) -> None:
        if self._registry is None:
            return
        r, labels = self._registry, {"task": stats.task, "store": stats.store}
        doc = "Files downloaded from the blob store at start"
        r.gauge(m.BLOB_FILES_DOWNLOADED, doc, labels).set(stats.files_downloaded)
        doc = "Bytes downloaded from the blob store at start"
        r.gauge(m.BLOB_BYTES_DOWNLOADED, doc, labels).set(stats.bytes_downloaded)
        doc = "Time restoring one store from the blob store at start"
        r.gauge(m.BLOB_RESTORE_SECONDS, doc, labels).set(stats.seconds)

    def _restore_markers(self, checkpoint: AnyCheckpoint | None) -> dict[str, Markers] | None:
        if checkpoint is None:
            return None
        if isinstance(checkpoint, CheckpointV2):
            return {backend: dict(stores) for backend, stores in checkpoint.state_markers.items()}
        # V1: changelog positions by partition; give each store the one of its own changelog.
        by_stream = {
            (ssp.system, ssp.stream): checkpoint.changelog_marks.get(ssp)
            or ChangelogMarker(ssp, offset).encode()
            for ssp, (_, offset) in checkpoint.changelog_offsets.items()
        }
        found = {
            s: by_stream[(c.system, c.stream)]
            for s, c in self.changelogs.items()
            if (c.system, c.stream) in by_stream
        }
        return {CHANGELOG: found}

    def _commit_manager(
        self, storage: TaskStorage, restore_markers: dict[str, Markers] | None
    ) -> TaskCommitManager:
        context = storage.context
        durable = {
            name: DurableStore(
                context.engines[name],
                context.store_dirs[name],
                self.storage.store_backends[name].backup,
                self.specs[name].factory == ROCKSDB,
                context.gates.get(name),
            )
            for name in self.specs
            if self.storage.store_backends[name].durable
        }
        backups = {}
        used = {b for name in durable for b in self.storage.store_backends[name].backup}
        for backend in sorted(used):
            manager = self.storage.backends[backend].backup_manager(context)
            manager.init(restore_markers.get(backend) if restore_markers else None)
            backups[backend] = manager
        return TaskCommitManager(
            context.task_name,
            flush_outputs=self._flush_producers,
            flush_stores=storage.flush,
            durable_stores=durable,
            backup_managers=backups,
            write_checkpoint=self._writer(context.task_name),
            executor=self._pool,
            max_delay_ms=self.job.config.value("task.commit.max.delay.ms"),
            timeout_ms=self.job.config.value("task.commit.timeout.ms"),
            max_idle_ms=idle_commit_bound_ms(
                (name, self.specs[name].config)
                for name in durable
                if CHANGELOG in self.storage.store_backends[name].backup
            ),
            clock=self._clock,
            on_committed=self._commit_metrics(context.task_name, durable),
        )

    def _commit_metrics(self, task: str, durable: Mapping[str, DurableStore]) -> CommitMetrics | None:
        """What records a task's completed commits: sizes of its stores on disk (RocksDB), phases, time."""
        if self._registry is None:
            return None
        dirs = {name: store.store_dir for name, store in durable.items() if store.persistent}
        return CommitMetrics(self._registry, task, dirs)

    def _writer(self, task_name: str) -> Callable[[CommitResult], None]:
        def write(result: CommitResult) -> None:
            inputs = checkpoint_inputs(
                self._starts.get(task_name), result.offsets, self.input_marks, self.input_counts
            )
            sink = self.transactions.get(task_name)
            # Exactly-once: the checkpoint commits in the task's transaction, with its sink records.
            eos = self.pending_eos.pop(task_name).to_dict() if sink is not None else None
            v1 = Checkpoint(inputs.offsets, self._v1_changelog_offsets(result), inputs.counts, inputs.kept)
            v2 = CheckpointV2(
                result.checkpoint_id,
                inputs.offsets,
                result.markers,
                eos,
                inputs.marks,
                inputs.counts,
                inputs.kept,
            )
            if sink is None:
                self._checkpoints.commit(task_name, self._write_versions, v1, v2)
                return
            self._checkpoints.write_versions(task_name, self._write_versions, v1, v2, producer=sink)
            sink.commit_transaction()
            sink.begin_transaction()

        return write

    def _v1_changelog_offsets(
        self, result: CommitResult
    ) -> dict[SystemStreamPartition, tuple[str, int | None]]:
        out = {}
        for store, marker in result.markers.get(CHANGELOG, {}).items():
            decoded = ChangelogMarker.decode(marker, store)
            out[decoded.changelog] = (str(result.checkpoint_id), decoded.offset)
        return out

    def _flush_producers(self) -> None:
        for producer in self._producers.values():
            producer.flush()

    @property
    def has_durable_stores(self) -> bool:
        return any(b.durable for b in self.storage.store_backends.values())

    def settle_commits(self, timeout_s: float) -> None:
        """After a failure, before the stores close: queued async phases are dropped, and running ones
        waited for up to `timeout_s` (each within its task.commit.timeout.ms), then abandoned (their blob
        requests stop retrying) and waited for until they notice. Each ends with its checkpoint written, or
        failed with nothing checkpointed; one still running then meets its stores closed (a warning)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        started = time.monotonic()
        deadline = started + timeout_s
        running = [
            manager
            for manager in self.commit_managers.values()
            if not manager.settle(max(0.0, deadline - time.monotonic()))
        ]
        if running and self._blob_factory is not None and not self._blobs_abandoned:
            self._blobs_abandoned = True
            self._blob_factory.close(abandon=True)
            deadline = time.monotonic() + ABANDON_WAIT_S
            running = [m for m in running if not m.settle(max(0.0, deadline - time.monotonic()), False)]
        for manager in running:
            log.warning(
                "task %s: its commit is still running %.1f s after the failure (the wait is bounded by "
                "task.shutdown.ms); its stores are closed under it, and nothing of it is checkpointed",
                manager.task_name,
                time.monotonic() - started,
            )

    def close(self, abandon: bool = False) -> None:
        """Waits for the commit in flight (a graceful stop's final commit), then releases the backends.
        `abandon` (after a failure): queued commits and requests are dropped and blob requests stop retrying
        (an unreachable blob store would hold the container for blobstore.retry.max.duration.ms); the work
        in flight is then waited for only until it notices, a few seconds at most, before the backends
        close. What it did not finish is not checkpointed; its blobs expire, and a cleanup is redone at the
        next start."""
        self._pool.shutdown(wait=not abandon, cancel_futures=abandon)
        deadline = time.monotonic() + ABANDON_WAIT_S
        if abandon and self._blob_factory is not None and not self._blobs_abandoned:
            # First: the abandon is what ends the async phases waiting on blob requests.
            self._blobs_abandoned = True
            self._blob_factory.close(abandon=True)
        for manager in self.commit_managers.values():
            # Before the changelog factory closes the watermark clients an async phase may still use.
            manager.close(max(0.0, deadline - time.monotonic()) if abandon else 0.0)
        if self._changelog_factory is not None:
            self._changelog_factory.close()
        if not abandon and self._blob_factory is not None:
            self._blob_factory.close()

    def crash(self) -> None:
        """Releases what a killed process would lose, without flushing or committing anything: queued
        async phases are dropped (one already running on a pool thread cannot be stopped: it ends on its
        own), the store caches are dropped unflushed, and every engine is closed so a new container in
        this process can open the same RocksDB directories (what the engines wrote through the WAL stays,
        as after kill -9)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        closers: list[Callable[[], None]] = []
        if self._blob_factory is not None and not self._blobs_abandoned:
            # Abandoned, as a killed process's would be: with the blob store down, a graceful close would
            # wait out the retries (blobstore.retry.max.duration.ms) of a fenced container's uploads.
            closers.append(partial(self._blob_factory.close, abandon=True))
        closers += [m.close for m in self.commit_managers.values()]
        if self._changelog_factory is not None:
            closers.append(self._changelog_factory.close)
        closers += [e.close for c in self.storage.contexts.values() for e in c.engines.values()]
        for close in closers:
            try:
                close()
            except Exception as e:
                log.warning("while releasing a crashed container's state: %r", e)
