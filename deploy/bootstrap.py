"""State bootstrap: a store of every task filled from a dataset, keys placed as the inputs' producers place
them, and sealed as each task's checkpointed state (local dirs, changelog, blob-store snapshot).

The driver first samples the inputs' keyed records to tell which hash their producers place keys by
(`deploy.key_placement`: murmur2 or librdkafka's CRC32). The Spark batch job (`deploy.spark.run_bootstrap`)
reads the dataset, serializes each row with the store's serdes, partitions by that hash of the serialized
key, sorts each partition and calls `write_partition` on the
executors: one SST file per task partition in a staging dir, plus the rows on the store's changelog.
The driver (`bootstrap_state`) restores every task's stores first (so that the changelog's new records
are not taken for uncommitted writes), ingests the SST files, then commits each task through the
container's own commit path: local checkpoint dirs with their markers, the blob-store upload, and the
checkpoint records with the input offsets asked for. No pyspark here.
"""

from __future__ import annotations

import codecs
import itertools
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from samsa.checkpoint.commit import wait_all
from samsa.checkpoint.tool import live_containers, parse_reset_target
from samsa.checkpoint.versions import checkpoint_versions
from samsa.deploy.exceptions import BootstrapError
from samsa.deploy.key_placement import MURMUR2, detect_partitioner, placer
from samsa.kafka import KafkaProducer
from samsa.runtime.config.job import JobConfig
from samsa.runtime.offsets import InputOffsets
from samsa.serde.base import fast_to_bytes
from samsa.serde.builtin import BytesSerde, StringSerde
from samsa.serde.registry import SerdeRegistry
from samsa.stores.backends import BLOBSTORE, CHANGELOG, store_backends
from samsa.stores.factory import ROCKSDB, StoreSpec, store_specs
from samsa.stores.rocksdb import RocksDbStore, write_sst
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)

FORMATS = ("parquet", "csv", "json")
# A partition's done file: written by its Spark task once its SST and changelog records are durable.
_DONE_SUFFIX = ".done.json"
# What to do when the staging dir's disk is full (an SST file's `StoreDiskFullError`).
_STAGING_FIX = (
    "Free space there, or point --staging (by default under job.logged.store.base.dir) at a disk with "
    "room, then run the bootstrap again: nothing was installed"
)
# Longest row shown in an error message.
_ROW_TEXT = 300


@dataclass(frozen=True)
class BootstrapRequest:
    """What `samsa state bootstrap` was asked: store, dataset, columns, and where the inputs resume."""

    store: str
    source: str
    format: str = "parquet"
    key: str = "key"
    #: One column: its value is the store value; several: a dict of them; none: every column but the key.
    values: tuple[str, ...] = ()
    #: `earliest`, `latest`, epoch ms or an ISO time (as `samsa checkpoint reset --to`).
    offsets: str = "latest"
    #: Where the SST files are staged (default: next to the job's store dirs, so ingest moves them).
    staging: Path | None = None
    #: How keys are placed in task partitions (`key_placement.PARTITIONERS`); None: as the inputs show.
    partitioner: str | None = None


@dataclass(frozen=True)
class BootstrapPlan:
    """What every Spark task needs (pickled to the executors): the config, the store, the layout."""

    job_key: str
    config: dict[str, str]
    store: str
    source: str
    format: str
    key_column: str
    value_columns: tuple[str, ...]
    #: The store value is the one value column itself, not a dict of columns.
    single_value: bool
    partitions: int
    staging: str
    #: (system, topic) of the store's changelog, and the producer config of its system; None without one.
    changelog: tuple[str, str] | None
    producer_config: dict[str, Any]
    #: The hash placing a serialized key in its task partition (`key_placement.PARTITIONERS`).
    partitioner: str = MURMUR2

    def sst_path(self, partition: int) -> Path:
        return Path(self.staging) / f"partition-{partition}.sst"

    def done_path(self, partition: int) -> Path:
        return Path(self.staging) / f"partition-{partition}{_DONE_SUFFIX}"

    def with_columns(self, values: Sequence[str], single: bool) -> BootstrapPlan:
        return BootstrapPlan(**{**asdict(self), "value_columns": tuple(values), "single_value": single})


@dataclass(frozen=True)
class PartitionResult:
    """One task partition's share, as its Spark task wrote it."""

    partition: int
    rows: int
    bytes: int
    seconds: float
    #: The SST file (None: no rows for this partition).
    sst: str | None
    changelog_records: int

    def line(self) -> str:
        size = f"{self.bytes / 1e6:.1f} MB"
        return f"Partition {self.partition}: {self.rows:,} rows, {size} in {self.seconds:.2f} s" + (
            f", {self.changelog_records:,} changelog records" if self.changelog_records else ""
        )


@dataclass(frozen=True)
class BootstrapSummary:
    """What a bootstrap did, for the command's last lines."""

    store: str
    tasks: int
    rows: int
    bytes: int
    seconds: float
    backends: tuple[str, ...]
    offsets: dict[str, dict[SystemStreamPartition, int]]

    def lines(self) -> list[str]:
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        out = [
            f"bootstrapped store {self.store}: {self.rows:,} rows ({self.bytes / 1e6:.1f} MB) into "
            f"{self.tasks} task(s) in {self.seconds:.1f} s ({rate:,.0f} rows/s)"
        ]
        where = {CHANGELOG: "its changelog", BLOBSTORE: "a blob-store snapshot"}
        kept = " and ".join(where[b] for b in self.backends if b in where)
        out.append(f"state: local store dirs, checkpointed with {kept}")
        for task, offsets in self.offsets.items():
            text = ", ".join(f"{s.stream}#{s.partition}={o}" for s, o in sorted(offsets.items()))
            out.append(f"{task}: inputs resume at {text}")
        return out


RunPartitions = Callable[[BootstrapPlan, Callable[[PartitionResult], None]], list[PartitionResult]]
"""Runs the batch job of a plan (Spark), calling back as each partition completes."""


# -- executor side ---------------------------------------------------------------------------------
def row_encoder(plan: BootstrapPlan) -> Callable[[Sequence[Any]], tuple[bytes, bytes]]:
    """Row (key column first, then the value columns) -> (key bytes, value bytes) through the store's
    serdes; a null key or a value the serde refuses raises `BootstrapError` naming file, column and row."""
    spec = store_specs(plan.config)[plan.store]
    serdes = SerdeRegistry(plan.config)
    key_bytes = fast_to_bytes(serdes.get(spec.key_serde))
    value_bytes = fast_to_bytes(serdes.get(spec.msg_serde))
    names = plan.value_columns
    single = plan.single_value

    def encode(row: Sequence[Any]) -> tuple[bytes, bytes]:
        key = row[0]
        value = row[1] if single else dict(zip(names, row[1:], strict=True))
        try:
            if key is None:  # the bytes serde passes None through
                raise ValueError("null key")
            return key_bytes(key), value_bytes(value)
        except Exception as e:
            raise _row_error(plan, spec, row, e) from None

    return encode


@dataclass(frozen=True)
class ColumnEncoders:
    """The store's serdes for a batch of columns: `key(keys)` and `value(value columns)` -> bytes lists.

    They raise whatever the serde raises, without naming the row: on an error, run `row_encoder` over the
    batch's rows for the message. `key_raw`/`value_raw`: the serde's bytes of a text column are its UTF-8
    bytes (`utf8`), or of a binary column the bytes themselves (`bytes`), so a columnar reader may take the
    column's own buffers; None otherwise.
    """

    key: Callable[[Sequence[Any]], list[bytes]]
    value: Callable[[Sequence[Sequence[Any]]], list[bytes]]
    key_raw: str | None
    value_raw: str | None


def column_encoders(plan: BootstrapPlan) -> ColumnEncoders:
    """The `ColumnEncoders` of the plan's store and columns."""
    spec = store_specs(plan.config)[plan.store]
    serdes = SerdeRegistry(plan.config)
    key_serde, value_serde = serdes.get(spec.key_serde), serdes.get(spec.msg_serde)
    key_bytes, value_bytes = fast_to_bytes(key_serde), fast_to_bytes(value_serde)
    names = plan.value_columns

    def keys(column: Sequence[Any]) -> list[bytes]:
        out = list(map(key_bytes, column))
        if None in out:
            raise ValueError("null key")
        return out

    def values(columns: Sequence[Sequence[Any]]) -> list[bytes]:
        if plan.single_value:
            return list(map(value_bytes, columns[0]))
        return [value_bytes(dict(zip(names, row, strict=True))) for row in zip(*columns, strict=True)]

    return ColumnEncoders(keys, values, _raw(key_serde), _raw(value_serde) if plan.single_value else None)


def _raw(serde: Any) -> str | None:
    if isinstance(serde, StringSerde) and codecs.lookup(serde.encoding).name == "utf-8":
        return "utf8"
    return "bytes" if isinstance(serde, BytesSerde) else None


def _row_error(plan: BootstrapPlan, spec: StoreSpec, row: Sequence[Any], error: Exception) -> BootstrapError:
    text = repr(tuple(row))
    if len(text) > _ROW_TEXT:
        text = text[:_ROW_TEXT] + "...)"
    if row[0] is None:
        return BootstrapError(
            f"{plan.source}: a row has no key (column {plan.key_column!r} is null): {text}; drop or fill "
            f"such rows, nothing was installed"
        )
    try:
        SerdeRegistry(plan.config).get(spec.key_serde).to_bytes(row[0])
    except Exception:
        return BootstrapError(
            f"{plan.source}: key column {plan.key_column!r} of row {text} cannot be serialized with the "
            f"store's key serde {spec.key_serde!r} ({error}); nothing was installed"
        )
    columns = ", ".join(repr(c) for c in plan.value_columns)
    return BootstrapError(
        f"{plan.source}: value column(s) {columns} of row {text} cannot be serialized with the store's "
        f"msg serde {spec.msg_serde!r} ({error}); nothing was installed"
    )


def write_partition(
    plan: BootstrapPlan, partition: int, entries: Iterable[tuple[bytes, bytes]]
) -> PartitionResult:
    """One task partition, on an executor: `entries` sorted by key into its SST file and onto the store's
    changelog partition; then its done file (what the driver's progress lines watch for)."""
    started = time.monotonic()
    sst = plan.sst_path(partition)
    counted = _Counted(entries, plan.source, plan.key_column, partition)
    producer = KafkaProducer(plan.producer_config) if plan.changelog else None
    try:
        if producer is not None and plan.changelog is not None:
            topic, send = plan.changelog[1], producer.send
            sent = counted.also(lambda k, v: send(topic, v, k, partition))
            rows = write_sst(sst, sent, store=plan.store, fix=_STAGING_FIX)
            producer.flush()
        else:
            rows = write_sst(sst, counted, store=plan.store, fix=_STAGING_FIX)
    finally:
        if producer is not None:
            producer.close()
    result = PartitionResult(
        partition,
        rows,
        counted.bytes,
        time.monotonic() - started,
        str(sst) if rows else None,
        rows if producer is not None else 0,
    )
    tmp = plan.done_path(partition).with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(result)))
    os.replace(tmp, plan.done_path(partition))
    return result


def write_partitions(
    plan: BootstrapPlan, chunks: Iterable[tuple[int, Sequence[bytes], Sequence[bytes]]]
) -> list[PartitionResult]:
    """`write_partition` of each task partition in `chunks`: (partition, keys, values), a partition's
    chunks consecutive and its keys sorted across them (as a sort by partition and key leaves them)."""
    results = []
    for partition, group in itertools.groupby(chunks, key=itemgetter(0)):
        entries = itertools.chain.from_iterable(zip(keys, values, strict=True) for _, keys, values in group)
        results.append(write_partition(plan, partition, entries))
    return results


class _Counted:
    """The entries, counting their bytes and refusing a repeated key with a clear message."""

    def __init__(
        self, entries: Iterable[tuple[bytes, bytes]], source: str, key_column: str, partition: int
    ) -> None:
        self._entries = entries
        self._source = source
        self._key_column = key_column
        self._partition = partition
        self._each: Callable[[bytes, bytes], None] | None = None
        self.bytes = 0

    def also(self, each: Callable[[bytes, bytes], None]) -> _Counted:
        self._each = each
        return self

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        last = None
        each = self._each
        size = 0
        for key, value in self._entries:
            if key == last:
                raise BootstrapError(
                    f"{self._source}: key {key!r} (column {self._key_column!r}) is in more than one row; a "
                    f"store holds one value per key, so deduplicate the rows first (nothing was installed)"
                )
            last = key
            size += len(key) + len(value)
            if each is not None:
                each(key, value)
            yield key, value
        self.bytes = size


def key_partitioner(partitions: int, partitioner: str = MURMUR2) -> Callable[[bytes], int]:
    """Serialized key -> its task partition, as the inputs' producers place it (`partitioner`)."""
    return placer(partitioner, partitions)


# -- driver side -----------------------------------------------------------------------------------
def plan_bootstrap(
    job: JobConfig, request: BootstrapRequest, partitions: int, partitioner: str = MURMUR2
) -> BootstrapPlan:
    """Checks the request against the job's config and lays out the batch job."""
    from samsa.runtime.coordinator import client_config
    from samsa.runtime.state import changelogs

    if request.format not in FORMATS:
        raise BootstrapError(f"--format {request.format!r}: use one of {', '.join(FORMATS)}")
    spec = _store_spec(job, request.store)
    logs = changelogs(job, {spec.name: spec})
    stream = logs.get(spec.name) if CHANGELOG in store_backends(job.config, spec).backup else None
    staging = request.staging or job.logged_store_dir / f".bootstrap-{job.job_key}-{spec.name}"
    return BootstrapPlan(
        job_key=job.job_key,
        config=dict(job.config),
        store=spec.name,
        source=request.source,
        format=request.format,
        key_column=request.key,
        value_columns=request.values,
        single_value=len(request.values) == 1,
        partitions=partitions,
        staging=str(Path(staging) / uuid.uuid4().hex[:12]),
        changelog=(stream.system, stream.stream) if stream else None,
        producer_config=client_config(job, stream.system, "producer") if stream else {},
        partitioner=partitioner,
    )


def _store_spec(job: JobConfig, store: str) -> StoreSpec:
    specs = store_specs(job.config)
    spec = specs.get(store)
    if spec is None:
        known = ", ".join(specs) or "none"
        raise BootstrapError(f"--store {store!r}: job {job.job_key} has no such store (stores: {known})")
    if spec.factory != ROCKSDB:
        raise BootstrapError(
            f"--store {store!r} is a {spec.factory} store; bootstrap writes RocksDB SST files, so set "
            f"stores.{store}.factory=rocksdb"
        )
    if not store_backends(job.config, spec).durable:
        raise BootstrapError(
            f"store {store!r} has no state backend (no stores.{store}.changelog, no blob store): the job "
            f"deletes its dirs at every start, so bootstrapped state would be lost; give it a changelog "
            f"or stores.{store}.backup.factories=blobstore"
        )
    return spec


def task_partitions(job: JobConfig, counts: dict[Any, int]) -> int:
    """The task count (GroupByPartition); every grouped input must have as many partitions, since a key
    belongs to the same partition (its hash modulo n) of each of them."""
    grouped = {ss: n for ss, n in counts.items() if ss not in job.broadcast_streams}
    if len(set(grouped.values())) != 1:
        listed = ", ".join(f"{ss} ({n})" for ss, n in sorted(grouped.items()))
        raise BootstrapError(
            f"the job's inputs have different partition counts ({listed}): a key's task is not defined; "
            f"bootstrap needs inputs partitioned alike"
        )
    return next(iter(grouped.values()))


def bootstrap_state(
    job: JobConfig,
    request: BootstrapRequest,
    run_partitions: RunPartitions,
    out: Callable[[str], None] = print,
) -> BootstrapSummary:
    """The whole bootstrap; `run_partitions` runs the batch job (the Spark side)."""
    from samsa.runtime.container import pid_dir
    from samsa.runtime.coordinator import JobCoordinator

    started = time.monotonic()
    alive = live_containers(pid_dir(job))
    if alive:
        raise BootstrapError(
            f"job {job.job_key} is running ({', '.join(alive)}); stop it before bootstrapping state"
        )
    target = parse_reset_target(request.offsets)
    _store_spec(job, request.store)  # fail before touching the broker
    coordinator = JobCoordinator(job)
    partitions = task_partitions(job, coordinator.partition_counts())
    # Before anything is written: a row placed by another hash than the producers' never meets its messages.
    placement = detect_partitioner(job, partitions, request.partitioner)
    out(placement.line())
    model = coordinator.prepare()  # topics checked; checkpoint topic and changelogs created
    plan = plan_bootstrap(job, request, partitions, placement.partitioner)
    with _TaskStates(job, list(model.tasks)) as states:
        if plan.changelog:
            # Sealed before the changelog grows: should the batch job fail, the next restore undoes its
            # records as writes after the checkpoint, instead of keeping a partial bootstrap.
            states.commit({t: states.offsets_now(t, target) for t in states.tasks})
        Path(plan.staging).mkdir(parents=True, exist_ok=True)
        try:
            results = run_partitions(plan, lambda result: out(result.line()))
            states.ingest(plan.store, {f"Partition {r.partition}": r for r in results})
            offsets = {t: states.resolve(t, target) for t in states.tasks}
            states.commit(offsets)
        finally:
            shutil.rmtree(plan.staging, ignore_errors=True)
    spec = store_specs(job.config)[plan.store]
    return BootstrapSummary(
        plan.store,
        len(results),
        sum(r.rows for r in results),
        sum(r.bytes for r in results),
        time.monotonic() - started,
        store_backends(job.config, spec).backup,
        offsets,
    )


def read_done(plan: BootstrapPlan, seen: set[int]) -> list[PartitionResult]:
    """Partitions whose done file appeared since `seen` (updated), for the progress lines."""
    found = []
    for partition in range(plan.partitions):
        if partition in seen:
            continue
        try:
            data = json.loads(plan.done_path(partition).read_text())
        except (FileNotFoundError, ValueError):
            continue
        seen.add(partition)
        found.append(PartitionResult(**data))
    return found


class _TaskStates:
    """Every task's stores restored to its last checkpoint on this host, committed like a container."""

    def __init__(self, job: JobConfig, tasks: list[Any]) -> None:
        self.job = job
        self._tasks = {t.name: t for t in tasks}
        self._opened: list[Callable[[], None]] = []

    @property
    def tasks(self) -> list[str]:
        return list(self._tasks)

    def __enter__(self) -> _TaskStates:
        from samsa.runtime.coordinator import checkpoint_manager, checkpoint_system, client_config
        from samsa.runtime.job_model import ContainerModel, input_counts
        from samsa.runtime.metrics import MetricsRegistry
        from samsa.runtime.state import ContainerState, changelog_system, changelogs

        job = self.job
        try:
            system = changelog_system(job, changelogs(job, store_specs(job.config)))
            producers = {system: KafkaProducer(client_config(job, system, "producer"))} if system else {}
            self._opened += [p.close for p in producers.values()]
            checkpoint_producer = KafkaProducer(client_config(job, checkpoint_system(job), "producer"))
            self._opened.append(checkpoint_producer.close)
            write_versions, read_versions = checkpoint_versions(job.config)
            manager = checkpoint_manager(job, checkpoint_producer, read_versions)
            self.checkpoints = manager.read_last()
            # Every task of the job model: the snapshots record the model's input partition counts.
            tasks = tuple(self._tasks.values())
            model = ContainerModel("bootstrap", tasks, input_counts(tasks))
            self.state = ContainerState(
                job, model, SerdeRegistry(job.config), producers, manager, write_versions
            )
            self._opened.insert(0, self.state.close)
            self.storages = self.state.start(self.checkpoints, threading.Event(), MetricsRegistry())
            self._opened[:0] = [s.close for s in self.storages.values()]
            self._offsets = InputOffsets(job)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if hasattr(self, "_offsets"):
            self._offsets.close()
        closers, self._opened = self._opened, []
        for close in closers:
            try:
                close()
            except Exception as e:  # the cause of a failure is already on its way up
                log.warning("closing after the bootstrap: %r", e)

    def offsets_now(self, task: str, target: str | int) -> dict[SystemStreamPartition, int]:
        """The task's checkpointed offsets of its input partitions, or `target`'s for a task without a
        checkpoint (those it keeps of partitions it does not read now stay kept: `checkpoint_inputs`)."""
        checkpoint = self.checkpoints.get(task)
        if checkpoint is not None:
            partitions = set(self._tasks[task].partitions)
            return {ssp: o for ssp, o in checkpoint.offsets.items() if ssp in partitions}
        return self.resolve(task, target)

    def resolve(self, task: str, target: str | int) -> dict[SystemStreamPartition, int]:
        """`target` as offsets of each of the task's input partitions (as `checkpoint reset` resolves)."""
        return {ssp: self._offsets.at(ssp, target) for ssp in self._tasks[task].partitions}

    def ingest(self, store: str, results: dict[str, PartitionResult]) -> None:
        for task, result in results.items():
            if result.sst is None:
                continue
            if task not in self.storages:
                raise BootstrapError(
                    f"the batch job wrote partition {result.partition}, a task the job lacks"
                )
            engine = self.storages[task].context.engines[store]
            assert isinstance(engine, RocksDbStore)
            engine.ingest([Path(result.sst)])

    def commit(self, offsets: dict[str, dict[SystemStreamPartition, int]]) -> None:
        for task, task_offsets in offsets.items():
            self.state.commit_managers[task].start(task_offsets, force=True)
        wait_all(self.state.commit_managers[task] for task in offsets)  # all started first: they overlap
