"""The `samsa` command: run a job, list config keys, show or reset checkpoints, inspect and check state."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, cause_of, unmendable_exit
from samsa.exceptions import SamsaError
from samsa.runtime.config.config import Config, default_registry
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw, rewrite
from samsa.runtime.exceptions import ConfigError, TaskError
from samsa.runtime.user_errors import explain
from samsa.streams import SystemStream, SystemStreamPartition

if TYPE_CHECKING:
    from samsa.checkpoint.model import AnyCheckpoint
    from samsa.checkpoint.starts import ContainerStart
    from samsa.kafka.message import Headers
    from samsa.stores.blobstore.api import BlobStoreManager
    from samsa.stores.blobstore.settings import BlobStoreSettings
    from samsa.stores.blobstore.tool import SnapshotRef

log = logging.getLogger("samsa")

#: How long `samsa state ...` and `samsa blobstore ...` retry an unreachable blob store before giving up
#: (or `blobstore.retry.max.duration.ms` when smaller): a person waits at the terminal.
TOOL_RETRY_MAX_MS = 30_000


def _load(args: argparse.Namespace) -> JobConfig:
    overrides = {}
    for item in args.config or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SamsaError(f"--config {item!r}: write key=value")
        overrides[key] = value
    if getattr(args, "deploy", None):
        overrides["job.deploy"] = args.deploy
    # Overrides apply before validation, so one can mend a bad value in the file.
    # Then job.config.rewriters, as Samza runs them over the whole config: SAMZA_* variables win.
    return JobConfig(Config(rewrite({**load_raw(args.job), **overrides}, os.environ)))


def _cmd_run(args: argparse.Namespace) -> int:
    from samsa.deploy.local import LocalSupervisor, install_stop_handlers

    job = _load(args)
    _refuse_in_process_brokers(job)
    if args.container_id is not None:
        return _run_container(job, args)
    if job.deploy == "spark":
        from samsa.deploy.spark_supervisor import run_spark

        return run_spark(job, args.until_caught_up, install_stop_handlers)
    # The containers log at the supervisor's level: --log-level DEBUG shows every frame of a task's failure.
    passthrough = [str(args.job), f"--log-level={args.log_level}"]
    passthrough += [f"--config={c}" for c in args.config or []]
    if args.until_caught_up:
        passthrough.append("--until-caught-up")
    supervisor = LocalSupervisor(job, passthrough)
    install_stop_handlers(supervisor.stop)
    return supervisor.run()


def _refuse_in_process_brokers(job: JobConfig) -> None:
    """Refuses a system on an in-process in-memory broker (`inmemory://NAME`, the in-memory system's
    default): each process started would get an empty broker of its own, where no topic is found."""
    from samsa.kafka.inmemory import is_in_process

    for name, system in sorted(job.systems.items()):
        if not is_in_process(system.bootstrap_servers):
            continue
        prefix = f"systems.{name}."
        where = ("bootstrap.servers", "consumer.bootstrap.servers", "producer.bootstrap.servers")
        set_in = [k for k in where if job.config.get(prefix + k)]
        key = (
            f"{prefix}{set_in[0]}={system.bootstrap_servers}"
            if set_in
            else f"{prefix}samza.factory=inmemory (its bootstrap.servers defaults to "
            f"{system.bootstrap_servers})"
        )
        raise ConfigError(
            f"{key}: an in-process in-memory broker lives in one process, and `samsa run` starts the job's "
            "containers in processes of their own, each with an empty broker; set "
            f"systems.{name}.bootstrap.servers to a file-backed one, inmemory:///ABS/DIR (three slashes: an "
            "absolute directory the processes share), or run the job with the TestRunner (docs/testing.md)"
        )


def _run_container(job: JobConfig, args: argparse.Namespace) -> int:
    from samsa.deploy.local import install_stop_handlers, stop_when_orphaned, unless_stopped
    from samsa.deploy.restarts import ORPHANED_EXIT
    from samsa.runtime.container import Container, container_lock
    from samsa.runtime.coordinator import JobCoordinator
    from samsa.runtime.state import early_s3_client

    container: Container | None = None
    stop_requested = False
    orphaned = False

    def stop() -> None:
        nonlocal stop_requested
        stop_requested = True
        if container is not None:
            container.stop()

    def stop_orphaned() -> None:
        nonlocal orphaned
        orphaned = True
        stop()

    # Set before the container exists: a stop while it starts ends the start instead of killing the process.
    install_stop_handlers(stop, logging.getLogger("samsa.runtime.container"))
    if args.from_supervisor:
        stop_when_orphaned(stop_orphaned)  # a supervisor killed with -9 leaves no orphan running
    held = None
    if not args.from_supervisor:
        # Before the job is touched: a second start of a running container is refused without publishing
        # its (maybe different) job model over the running one's.
        held = container_lock(job, args.container_id)
        held.acquire()
    # Made while the job model is read and the container starts (importing boto3, parsing its models): off
    # the restore's path. The container takes it over; discarded if it never does.
    s3_client = early_s3_client(job)
    try:
        coordinator = JobCoordinator(job)
        if not args.from_supervisor:
            log.info("preparing job %s: checking its topics, publishing its job model", job.job_key)
        model = unless_stopped(
            coordinator.read_model if args.from_supervisor else coordinator.prepare, lambda: stop_requested
        )
        if stop_requested:
            log.info("container %s: stopped before it started", args.container_id)
            return ORPHANED_EXIT if orphaned else 0
        if model is None:
            raise SamsaError(
                "no job model was published; start the job with `samsa run` without --container-id"
            )
        # Under a supervisor, a container still holding the lock is an orphan of a killed supervisor, on its
        # way out (it stops when its parent goes, final commit included): wait for it rather than end the job.
        lock_wait_s = job.shutdown_ms / 1000 + 2 if args.from_supervisor else 0.0
        container = Container(
            job,
            model.container(args.container_id),
            until_caught_up=args.until_caught_up,
            lock_wait_s=lock_wait_s,
            held_lock=held,
            s3_client=s3_client,
        )
        if stop_requested:
            log.info("container %s: stopped before it started", args.container_id)
            return ORPHANED_EXIT if orphaned else 0
        container.run()
        # Stopped because its parent went: a supervisor that runs on (its fork server died) restarts it.
        return ORPHANED_EXIT if orphaned else 0
    finally:
        if s3_client is not None:
            s3_client.discard()  # nothing once the container's restore took it


def _cmd_config_keys(args: argparse.Namespace) -> int:
    print(default_registry().render())
    return 0


def _job_tasks(job: JobConfig) -> dict[str, list[SystemStreamPartition]]:
    from samsa.runtime.coordinator import JobCoordinator
    from samsa.runtime.job_model import build_job_model

    coordinator = JobCoordinator(job)
    model = coordinator.read_model() or build_job_model(
        coordinator.partition_counts(), job.container_count, job.broadcast
    )
    return {t.name: list(t.partitions) for t in model.tasks}


def _cmd_checkpoint_show(args: argparse.Namespace) -> int:
    from samsa.checkpoint.tool import require_checkpoints
    from samsa.checkpoint.versions import checkpoint_versions
    from samsa.kafka import KafkaConsumer
    from samsa.runtime.coordinator import checkpoint_manager, client_config

    job = _load(args)
    manager = checkpoint_manager(job)
    require_checkpoints(manager, job.name, job.id)
    checkpoints = manager.read_last(checkpoint_versions(job.config)[1])
    tasks = _job_tasks(job)
    consumers: dict[str, KafkaConsumer] = {}
    print(f"checkpoints of job {job.job_key} (topic {manager.topic}); offsets are the next to read")
    for task_name in sorted(set(tasks) | set(checkpoints), key=_task_order):
        checkpoint = checkpoints.get(task_name)
        print(f"{task_name}:" + ("" if checkpoint else " no checkpoint yet"))
        if checkpoint is None:
            continue
        for ssp, offset in sorted(checkpoint.offsets.items()):
            if not _reads_now(job, tasks, task_name, ssp):
                # Kept for when the stream is added back (its topic may be gone: no watermark asked).
                print(
                    f"  {ssp.system}.{ssp.stream}#{ssp.partition}  offset {offset}  not an input now "
                    "(kept: resumes here if added back)"
                )
                continue
            consumer = consumers.get(ssp.system) or consumers.setdefault(
                ssp.system, KafkaConsumer(client_config(job, ssp.system))
            )
            _, high = consumer.watermarks((ssp.stream, ssp.partition))
            print(
                f"  {ssp.system}.{ssp.stream}#{ssp.partition}  offset {offset}  high watermark {high}  "
                f"lag {max(0, high - offset)}"
            )
    for consumer in consumers.values():
        consumer.close()
    return 0


def _reads_now(
    job: JobConfig, tasks: dict[str, list[SystemStreamPartition]], task: str, ssp: SystemStreamPartition
) -> bool:
    """Whether `task` reads `ssp` by the config (`task.inputs`) and the job model (`tasks`: a stream the model
    has no partition of was added to the config since it was published, and will be read)."""
    if ssp.system_stream not in job.inputs:
        return False
    modelled = any(p.system_stream == ssp.system_stream for ps in tasks.values() for p in ps)
    return not modelled or ssp in tasks.get(task, ())


def _chosen_tasks(job: JobConfig, chosen: Sequence[str] | None) -> dict[str, list[SystemStreamPartition]]:
    """The job's tasks, or those `--task` named (an unknown name is an error listing the tasks)."""
    tasks = _job_tasks(job)
    if not chosen:
        return tasks
    unknown = sorted(set(chosen) - set(tasks))
    if unknown:
        known = ", ".join(sorted(tasks, key=_task_order))
        raise SamsaError(f"--task {', '.join(unknown)}: no such task in job {job.job_key} (tasks: {known})")
    return {name: tasks[name] for name in chosen}


def _cmd_checkpoint_forget_changelog(args: argparse.Namespace) -> int:
    """Gives up a store's changelog position in the last checkpoints (`ChangelogLostError`'s way on)."""
    return _forget_stores(args, changelog_only=True)


def _cmd_checkpoint_forget_store(args: argparse.Namespace) -> int:
    """Gives up a store's state in the last checkpoints, every backend's marker of it: its changelog
    position and blob-store snapshot (`StoreRenamedError`'s way on)."""
    return _forget_stores(args, changelog_only=False)


def _forget_stores(args: argparse.Namespace, changelog_only: bool) -> int:
    """`forget-changelog` (the changelog positions of stores of the job with one) and `forget-store` (every
    marker of a store, defined by the job or not)."""
    from samsa.checkpoint.tool import forget_stores, live_containers, require_checkpoints
    from samsa.checkpoint.versions import checkpoint_versions
    from samsa.kafka import KafkaProducer
    from samsa.runtime.container import pid_dir
    from samsa.runtime.coordinator import checkpoint_manager, checkpoint_system, client_config
    from samsa.runtime.state import changelogs
    from samsa.stores.backends import CHANGELOG
    from samsa.stores.factory import store_specs

    job = _load(args)
    specs = store_specs(job.config)
    logged = changelogs(job, specs)
    unknown = sorted(set(args.store) - set(logged))
    if changelog_only and unknown:
        raise SamsaError(
            f"--store {', '.join(unknown)}: no store of job {job.job_key} with a changelog by that name "
            f"(stores with one: {', '.join(sorted(logged)) or 'none'})"
        )
    alive = live_containers(pid_dir(job))
    if alive:
        raise SamsaError(f"job {job.job_key} is running ({', '.join(alive)}); stop it first")
    require_checkpoints(checkpoint_manager(job), job.name, job.id, "nothing to do")
    tasks = _chosen_tasks(job, args.task)
    producer = KafkaProducer(client_config(job, checkpoint_system(job), "producer"))
    try:
        manager = checkpoint_manager(job, producer)
        stores = {s: logged.get(s) for s in args.store}
        backends = (CHANGELOG,) if changelog_only else None
        emptied: dict[str, list[str]] = {}
        read_versions = checkpoint_versions(job.config)[1]
        dropped = forget_stores(manager, tasks, stores, backends, read_versions, emptied)
    finally:
        producer.close()
    what = "changelog position" if changelog_only else "state (changelog position, blob-store snapshot)"
    for task_name in sorted(tasks, key=_task_order):
        gone = dropped.get(task_name)
        print(f"{task_name}: {what} of {', '.join(gone)} dropped" if gone else f"{task_name}: no such {what}")
        if emptied.get(task_name):
            # Its changelog holds a cut-short rebuild: part old state, part rebuilt.
            print(
                f"{task_name}: the changelog of {', '.join(emptied[task_name])} was being rebuilt (cut "
                "short): the next start empties the store and undoes what the changelog holds"
            )
    # A store of no checkpoint and not of the job: a mistyped name, most likely.
    strays = sorted(s for s in set(args.store) - set(specs) if not any(s in g for g in dropped.values()))
    if strays:
        raise SamsaError(
            f"--store {', '.join(strays)}: job {job.job_key} defines no store by that name, and no last "
            f"checkpoint of task(s) {', '.join(sorted(tasks, key=_task_order))} has one: nothing dropped "
            "of it (mistyped? `samsa state ls` lists the stores with a blob-store snapshot)"
        )
    return 0


def _cmd_checkpoint_reset(args: argparse.Namespace) -> int:
    from samsa.checkpoint.tool import live_containers, parse_reset_target, require_checkpoints, reset
    from samsa.checkpoint.versions import checkpoint_versions
    from samsa.kafka import KafkaProducer
    from samsa.runtime.container import pid_dir
    from samsa.runtime.coordinator import checkpoint_manager, checkpoint_system, client_config
    from samsa.runtime.lost_checkpoints import started_containers
    from samsa.runtime.offsets import InputOffsets

    job = _load(args)
    target = parse_reset_target(args.to)
    alive = live_containers(pid_dir(job))
    if alive:
        raise SamsaError(
            f"job {job.job_key} is running ({', '.join(alive)}); stop it before resetting checkpoints"
        )
    manager = checkpoint_manager(job)
    if not manager.topic_exists() and started_containers(job):
        # The job ran and its checkpoint topic was deleted: fresh checkpoints are the way on that keeps its
        # state (a start without them is refused, `CheckpointsLostError`).
        manager.create_resources()
    # Creating the topics here would make a mistyped job.name look like a job reset to its start.
    require_checkpoints(manager, job.name, job.id, "nothing to reset")
    tasks = _chosen_tasks(job, args.task)
    producer = KafkaProducer(client_config(job, checkpoint_system(job), "producer"))
    try:
        write_versions, read_versions = checkpoint_versions(job.config)
        manager = checkpoint_manager(job, producer)
        with InputOffsets(job) as inputs:
            at_end: dict[SystemStreamPartition, bool] = {}

            def resolve(ssp: SystemStreamPartition, to: str | int) -> int:
                offset = inputs.at(ssp, to)
                if isinstance(to, int):
                    low, high = inputs.consumer(ssp.system).watermarks((ssp.stream, ssp.partition))
                    if high > low:  # it holds records: is none of them at or after `to`?
                        at_end[ssp] = offset >= high
                return offset

            written = reset(manager, tasks, target, resolve, write_versions, read_versions)
    finally:
        producer.close()
    if at_end and all(at_end.values()):
        _warn_past_every_record(args.to, target)
    _warn_state_kept(job)
    for task_name, checkpoint in sorted(written.items(), key=lambda kv: _task_order(kv[0])):
        offsets = ", ".join(f"{s.stream}#{s.partition}={o}" for s, o in sorted(checkpoint.offsets.items()))
        print(f"{task_name}: {offsets}")
    return 0


def _warn_state_kept(job: JobConfig) -> None:
    """A reset moves the input offsets only: the stores a backup restores keep their state, and the inputs
    read again are applied on top of it (Samza's checkpoint tool does the same; Kafka Streams' reset tool
    also wipes the state): say so, naming the stores, and how to reprocess into fresh state."""
    from samsa.stores.backends import store_backends
    from samsa.stores.factory import store_specs

    specs = store_specs(job.config)
    kept = sorted(name for name, spec in specs.items() if store_backends(job.config, spec).backup)
    if kept:
        log.warning(
            "the reset moved the input offsets only: store(s) %s keep their state, and the inputs read again "
            "from the new offsets are applied on top of it (a count counts them again); to reprocess into "
            "fresh state, start the state over before the next start: delete the stores' changelogs and "
            "their local directories under %s, then drop their state from the checkpoints (`samsa checkpoint "
            "forget-store <job config> %s`: changelog positions and blob-store snapshots, which `samsa "
            "blobstore gc` then deletes)",
            ", ".join(kept),
            job.logged_store_dir,
            " ".join(f"--store {s}" for s in kept),
        )


def _warn_past_every_record(text: str, target: str | int) -> None:
    """A `--to` time later than every input's newest record moved every task to the end of its inputs, as
    `latest` would: most likely a mistyped date."""
    future = isinstance(target, int) and target > time.time() * 1000
    log.warning(
        "--to %s is later than the newest record of every input partition%s: every partition was reset to "
        "its end, as --to latest does (a mistyped year?); reset again with an earlier time if that was not "
        "meant",
        text,
        " (and it is in the future)" if future else "",
    )


def _last_checkpoints(job: JobConfig) -> tuple[list[str], dict[str, AnyCheckpoint]]:
    """(every task of the job or its checkpoints, in order; each task's last checkpoint)."""
    from samsa.checkpoint.tool import require_checkpoints
    from samsa.runtime.coordinator import checkpoint_manager

    require_checkpoints(checkpoint_manager(job), job.name, job.id)
    checkpoints = _read_checkpoints(job)
    return sorted(set(_job_tasks(job)) | set(checkpoints), key=_task_order), checkpoints


def _read_checkpoints(job: JobConfig) -> dict[str, AnyCheckpoint]:
    """Each task's last checkpoint; the state tools read them again when a running job's commit deleted
    the snapshot they were reading."""
    from samsa.checkpoint.versions import checkpoint_versions
    from samsa.runtime.coordinator import checkpoint_manager

    return checkpoint_manager(job).read_last(checkpoint_versions(job.config)[1])


def _blob_settings(job: JobConfig) -> BlobStoreSettings:
    """The job's blob store; a local dir must exist (opening it would create an empty one)."""
    from samsa.runtime.state import blob_store_settings
    from samsa.runtime.validation import blob_backed_stores
    from samsa.stores.blobstore.factory import LocalDirAdmin

    if not blob_backed_stores(job):
        raise ConfigError(
            f"job {job.job_key} backs up no store to the blob store (no stores.<s>.backup.factories or "
            "stores.backup.factories names blobstore), so it has no snapshots; its stores restore from "
            "their changelogs (samsa state ls shows them)"
        )
    settings = blob_store_settings(job)
    if not settings.s3_bucket:
        LocalDirAdmin(settings).validate_resources()
    # An interactive command gives up soon on an unreachable store (the error names the endpoint); the
    # running job keeps its blobstore.retry.max.duration.ms.
    retry_ms = min(settings.retry_max_duration_ms, TOOL_RETRY_MAX_MS)
    return dataclasses.replace(settings, retry_max_duration_ms=retry_ms)


def _cmd_state_ls(args: argparse.Namespace) -> int:
    from samsa.runtime.state import changelogs
    from samsa.stores.blobstore.tool import (
        blob_snapshots,
        list_state,
        opened_store,
        render_state,
        state_problems,
    )
    from samsa.stores.factory import store_specs

    job = _load(args)
    tasks, checkpoints = _last_checkpoints(job)
    logs = changelogs(job, store_specs(job.config))
    print(f"state of job {job.job_key} at its last checkpoints")
    if not blob_snapshots(tasks, checkpoints):
        rows = list_state(tasks, checkpoints, None, job.name, job.id, logs)
    else:
        settings = _blob_settings(job)
        print(f"blob store {settings.location}")
        with opened_store(settings) as store:
            reread = partial(_read_checkpoints, job)
            rows = list_state(tasks, checkpoints, store, job.name, job.id, logs, reread)
    for line in render_state(rows):
        print(line)
    for line in state_problems(rows):
        print(line)
    bad = sum(r.problem for r in rows)
    if bad:
        # As `samsa blobstore verify` does: a script sees that a checkpointed snapshot cannot be read.
        print(f"{bad} snapshot index(es) missing or unreadable; `samsa blobstore verify` checks every blob")
        return 1
    return 0


def _cmd_state_show(args: argparse.Namespace) -> int:
    from samsa.stores.blobstore.api import SNAPSHOT_INDEX_PATH, BlobMetadata
    from samsa.stores.blobstore.index import SnapshotIndex
    from samsa.stores.blobstore.tool import index_json, opened_store, read_named_index, render_index

    job = _load(args)
    with opened_store(_blob_settings(job)) as store:
        base = BlobMetadata(SNAPSHOT_INDEX_PATH, -1, job.name, job.id, "", "")
        data = read_named_index(store, args.index_blob_id, base)
    if args.json:
        print(index_json(data, args.index_blob_id))
        return 0
    for line in render_index(args.index_blob_id, SnapshotIndex.from_bytes(data, args.index_blob_id)):
        print(line)
    return 0


def _cmd_state_download(args: argparse.Namespace) -> int:
    from samsa.stores.blobstore.tool import download_snapshot, find_snapshot, opened_store
    from samsa.stores.blobstore.transfer import BlobTransfer

    job = _load(args)
    tasks, checkpoints = _last_checkpoints(job)
    ref = find_snapshot(tasks, checkpoints, args.task, args.store)
    settings = _blob_settings(job)
    with opened_store(settings) as store:
        transfer = BlobTransfer(store, settings.chunk_size)
        result = download_snapshot(
            transfer, ref, args.to, job.name, job.id, reread=partial(_read_checkpoints, job)
        )
    got = result.snapshot
    print(
        f"downloaded store {got.store} of task {got.task} (checkpoint {got.checkpoint_id}, snapshot index "
        f"{got.index_blob_id}) into {args.to}: {result.files} file(s), {result.bytes} bytes in "
        f"{result.seconds:.2f} s"
    )
    return 0


def _cmd_state_bootstrap(args: argparse.Namespace) -> int:
    from collections.abc import Callable

    from samsa.deploy.bootstrap import BootstrapPlan, BootstrapRequest, PartitionResult, bootstrap_state
    from samsa.deploy.spark import Spark, batch_spark, run_bootstrap

    job = _load(args)
    request = BootstrapRequest(
        store=args.store,
        source=args.source,
        format=args.format,
        key=args.key,
        values=tuple(c.strip() for v in args.value or [] for c in v.split(",") if c.strip()),
        offsets=args.offsets,
        staging=args.staging,
        partitioner=args.partitioner,
    )
    spark: Spark | None = None

    def run(plan: BootstrapPlan, on_done: Callable[[PartitionResult], None]) -> list[PartitionResult]:
        nonlocal spark
        print(f"bootstrapping store {plan.store} of job {job.job_key} from {plan.source} on Spark")
        spark = batch_spark(job, f"samsa-bootstrap-{job.job_key}-{plan.store}")
        return run_bootstrap(spark, plan, on_done)

    try:
        summary = bootstrap_state(job, request, run)
    finally:
        if spark is not None:
            spark.stop()
    for line in summary.lines():
        print(line)
    return 0


def _cmd_blobstore_verify(args: argparse.Namespace) -> int:
    from samsa.stores.blobstore.tool import blob_snapshots, opened_store, verify_snapshots

    job = _load(args)
    tasks, checkpoints = _last_checkpoints(job)
    refs = blob_snapshots(tasks, checkpoints)
    if not refs:
        print(f"job {job.job_key}: its last checkpoints name no blob-store snapshot; nothing to verify")
        return 0
    settings = _blob_settings(job)
    print(f"verifying the blob-store snapshots of job {job.job_key} in {settings.location}")
    with opened_store(settings) as store:
        reread = partial(_read_checkpoints, job)
        report = verify_snapshots(store, refs, job.name, job.id, settings.download_parallelism, reread)
    for problem in report.problems:
        print(problem.line())
    print(report.summary())
    return 0 if report.ok else 1


def _cmd_blobstore_gc(args: argparse.Namespace) -> int:
    from samsa.runtime.state import blob_store_settings
    from samsa.runtime.validation import blob_backed_stores
    from samsa.stores.blobstore.local import LocalDirBlobStore
    from samsa.stores.blobstore.tool import blob_snapshots, gc_local, opened_store, referenced_blobs

    job = _load(args)
    backed_up = bool(blob_backed_stores(job))
    if backed_up:
        settings = _blob_settings(job)
    else:
        # Rolled back to changelogs, or its blob-backed stores removed: its last snapshots are still there.
        plain = blob_store_settings(job)
        retry_ms = min(plain.retry_max_duration_ms, TOOL_RETRY_MAX_MS)
        settings = dataclasses.replace(plain, retry_max_duration_ms=retry_ms)
        if not settings.s3_bucket and not settings.local_dir.is_dir():
            print(
                f"job {job.job_key} backs up no store to the blob store, and its blob store dir "
                f"{settings.local_dir} does not exist: nothing to collect"
            )
            return 0
        print(
            f"job {job.job_key} backs up no store to the blob store (any more): looking for the snapshots "
            f"its earlier runs left in {settings.location}"
        )
    tasks, checkpoints = _gc_checkpoints(job)
    if settings.s3_bucket:
        if backed_up:
            _check_lifecycle_rule(job, settings)
        with opened_store(settings) as store:
            left = _gc_left_snapshots(job, store, args.dry_run)
        return 0 if left else 1
    with opened_store(settings) as store:
        assert isinstance(store, LocalDirBlobStore)
        # The last V2 records too: a job reading V1 now resumes from them again once it reads V2.
        refs = [*blob_snapshots(tasks, checkpoints), *_v2_snapshots(job)]
        used, unreadable = referenced_blobs(store, refs, job.name, job.id, partial(_read_checkpoints, job))
        if unreadable:
            names = ", ".join(f"{r.task}/{r.store} ({r.index_blob_id})" for r in unreadable)
            print(
                f"warning: snapshot index(es) of {names} cannot be read; `samsa blobstore verify` checks them"
            )
        report = gc_local(store, used, job.name, job.id, dry_run=args.dry_run)
        for line in report.lines(settings.location):
            print(line)
        left = _gc_left_snapshots(job, store, args.dry_run)
    return 0 if left else 1


def _check_lifecycle_rule(job: JobConfig, settings: BlobStoreSettings) -> None:
    """Prints that the job's S3 lifecycle rule (which expires its never-committed blobs) is in place, or
    raises naming what is wrong with it."""
    from samsa.stores.blobstore.factory import blob_store_admin
    from samsa.stores.blobstore.s3 import TTL_TAG_KEY, TTL_TAG_VALUE, S3BlobStoreAdmin

    admin = blob_store_admin(settings)
    assert isinstance(admin, S3BlobStoreAdmin)
    print(
        f"blob store {settings.location}: the job's lifecycle rule {admin.rule_id} deletes its expired "
        f"blobs (objects under {admin.key_prefix} tagged {TTL_TAG_KEY}={TTL_TAG_VALUE}, older than "
        f"{settings.ttl_days} days); checking the rule"
    )
    admin.validate_resources()
    print(f"the lifecycle rule of job {job.job_key} is in place")


def _gc_checkpoints(job: JobConfig) -> tuple[list[str], dict[str, AnyCheckpoint]]:
    """`_last_checkpoints`, or an error saying gc deletes nothing without them."""
    try:
        return _last_checkpoints(job)
    except SamsaError as e:
        raise _unread_checkpoints(job, e) from e


def _unread_checkpoints(job: JobConfig, error: SamsaError) -> SamsaError:
    from samsa.checkpoint.exceptions import CheckpointError
    from samsa.checkpoint.kafka_manager import checkpoint_topic

    return CheckpointError(
        f"job {job.job_key}: its checkpoints (topic {checkpoint_topic(job.name, job.id)}) cannot be read, "
        f"so gc cannot tell which snapshots they still need and deletes nothing: {error}"
    )


def _v2_snapshots(job: JobConfig) -> list[SnapshotRef]:
    """The snapshots each task's last V2 checkpoint record names, whichever version the job reads now:
    a change of `task.checkpoint.read.versions` makes that record the one a start resumes from."""
    from samsa.checkpoint.model import CheckpointV2
    from samsa.runtime.coordinator import checkpoint_manager
    from samsa.stores.blobstore.tool import blob_snapshots

    try:
        records = checkpoint_manager(job).read_records((2,))
    except SamsaError as e:
        raise _unread_checkpoints(job, e) from e
    last: dict[str, AnyCheckpoint] = {}
    for task, stored in records.items():
        if 2 in stored and isinstance(stored[2].checkpoint, CheckpointV2):
            last[task] = stored[2].checkpoint
    return blob_snapshots(sorted(last, key=_task_order), last)


def _gc_left_snapshots(job: JobConfig, store: BlobStoreManager, dry_run: bool) -> bool:
    """Prints (and unless `dry_run` deletes) the committed snapshots of the job no task's last checkpoint
    names; False when it refused to (a checkpointed snapshot's index unreadable)."""
    from samsa.stores.blobstore.tool import delete_left_snapshots, find_left_snapshots, job_blobs

    listed, expiring = job_blobs(store, job.name, job.id)
    checkpointed = partial(_v2_snapshots, job)
    report = find_left_snapshots(store, listed, expiring, checkpointed, job.name, job.id, dry_run)
    if dry_run or not report.snapshots:
        for line in report.lines():
            print(line)
        return not report.refused
    print(report.lines()[0])
    delete_left_snapshots(store, report.snapshots, job.name, job.id, lambda s: print(s.line(False)))
    return True


def _cmd_eos_retire(args: argparse.Namespace) -> int:
    import time

    from samsa.checkpoint.kafka_manager import choose
    from samsa.checkpoint.tool import live_containers, require_checkpoints
    from samsa.checkpoint.versions import checkpoint_versions
    from samsa.exactly_once.retire import Activity, check_stopped, default_quiet_ms, retired_records, retirees
    from samsa.runtime.container import pid_dir
    from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager

    job = _load(args)
    outputs = [ss for ss in job.outputs if job.intermediate(ss)]
    if not job.exactly_once or not outputs:
        raise ConfigError(
            f"job {job.job_key} writes no intermediate stream under exactly-once (job.processing.guarantee="
            "exactly_once, task.outputs naming a stream with systems.<system>.streams.<stream>.samza."
            "intermediate: true): no downstream job waits for its producers; give the gone job's own config"
        )
    manager = checkpoint_manager(job)
    require_checkpoints(manager, job.name, job.id, "nothing to retire")
    reads = checkpoint_versions(job.config)[1]

    def last_checkpoints() -> dict[str, tuple[AnyCheckpoint, int | None]]:
        out = {}
        for task, records in manager.read_records(reads).items():
            chosen = choose(list(records.values()), reads, manager.live_max_age_ms)
            if chosen is not None:
                out[task] = (chosen.checkpoint, chosen.timestamp)
        return out

    chosen = retirees(job.name, job.id, last_checkpoints(), args.task or ())
    model = JobCoordinator(job).read_model()
    activity = Activity(
        now_ms=int(time.time() * 1000),
        quiet_ms=default_quiet_ms(job.commit_ms) if args.quiet_ms is None else args.quiet_ms,
        # "container-<id> (pid <pid>)", as the pid files are named.
        live_here={c.split(" ", 1)[0].removeprefix("container-"): c for c in live_containers(pid_dir(job))},
        starts=_container_starts(job),
        model=None if model is None else {c.id: frozenset(t.name for t in c.tasks) for c in model.containers},
    )
    for doubt in check_stopped(job.job_key, chosen, activity, args.force):
        print(f"--force: going on although {doubt}")
    _fence_tasks(job, [r.task for r in chosen])
    # Read again once fenced: no start of these tasks can commit any more, so these versions are final.
    chosen = retirees(job.name, job.id, last_checkpoints(), [r.task for r in chosen])
    counts = _stream_partitions(job, outputs)
    records = retired_records(chosen, counts)
    _send_records(job, records)
    streams = ", ".join(f"{ss} ({n} partitions)" for ss, n in sorted(counts.items()))
    print(f"retired {len(chosen)} task(s) of job {job.job_key}: {len(records)} retired records on {streams}")
    for r in sorted(chosen, key=lambda r: _task_order(r.task)):
        print(
            f"  {r.task}: producer {r.producer.name} (id {r.producer.id}), generation {r.generation}, "
            f"last committed version {r.version}"
        )
    print(
        "downstream jobs stop waiting for these producers as they read the records; do not start them again"
    )
    return 0


def _fence_tasks(job: JobConfig, tasks: Sequence[str]) -> None:
    """Registers each exactly-once task's transactional id: a start of it still running anywhere is fenced
    (its open transaction aborted, its next checkpoint refused)."""
    from samsa.kafka import KafkaProducer
    from samsa.runtime.coordinator import checkpoint_system, client_config
    from samsa.runtime.eos_tasks import transactional_id

    config = client_config(job, checkpoint_system(job), "producer")
    for task in tasks:
        fence = KafkaProducer({**config, "transactional.id": transactional_id(job, task)})
        try:
            fence.init_transactions()
        finally:
            fence.close()


def _send_records(job: JobConfig, records: Sequence[tuple[SystemStream, int, bytes, Headers]]) -> None:
    """Sends each (stream, partition, value, headers) with a null key and waits until all are written."""
    from samsa.kafka import KafkaProducer
    from samsa.runtime.coordinator import client_config

    producers: dict[str, KafkaProducer] = {}
    try:
        for stream, partition, value, headers in records:
            producer = producers.get(stream.system) or producers.setdefault(
                stream.system, KafkaProducer(client_config(job, stream.system, "producer"))
            )
            producer.send(stream.stream, value, None, partition, headers)
    finally:
        for producer in producers.values():
            producer.close()


def _container_starts(job: JobConfig) -> list[ContainerStart]:
    """The newest start record of each container of the job (its coordinator topic)."""
    from samsa.checkpoint.compacted_log import read_latest
    from samsa.checkpoint.starts import ContainerStart
    from samsa.runtime.coordinator import checkpoint_system, client_config, coordinator_topic

    # Uncommitted records too: a start record is written in its start's transaction.
    config = {**client_config(job, checkpoint_system(job)), "isolation.level": "read_uncommitted"}
    starts = [ContainerStart.decode(r.value) for r in read_latest(config, coordinator_topic(job)) if r.value]
    return [s for s in starts if s is not None]


def _stream_partitions(job: JobConfig, streams: Sequence[SystemStream]) -> dict[SystemStream, int]:
    """Partition count of each stream; a missing one fails naming it."""
    from samsa.kafka import KafkaAdmin
    from samsa.runtime.coordinator import client_config

    out: dict[SystemStream, int] = {}
    for system in sorted({ss.system for ss in streams}):
        wanted = [ss for ss in streams if ss.system == system]
        with KafkaAdmin(client_config(job, system)) as admin:
            counts = admin.partition_counts(ss.stream for ss in wanted)
        for ss in wanted:
            count = counts.get(ss.stream)
            if not count:
                raise SamsaError(
                    f"job {job.job_key}: its intermediate output {ss} does not exist: no downstream job can "
                    "be waiting on it (check task.outputs)"
                )
            out[ss] = count
    return out


def _task_order(name: str) -> tuple[int, str]:
    tail = name.rsplit(" ", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (sys.maxsize, name)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# log4j's spelling, which a Samza user types out of habit, for the level Python calls WARNING.
_LOG_LEVEL_ALIASES = {"WARN": "WARNING"}


def _log_level(text: str) -> str:
    """`--log-level`'s value in upper case, with log4j's WARN read as WARNING."""
    level = text.upper()
    return _LOG_LEVEL_ALIASES.get(level, level)


def _log_level_option(default: str) -> argparse.ArgumentParser:
    """A parent parser holding `--log-level`, checked against LOG_LEVELS in any case."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--log-level",
        type=_log_level,
        choices=LOG_LEVELS,
        default=default,
        help="DEBUG, INFO, WARNING (or WARN) or ERROR, any case (default INFO); before or after the "
        "subcommand",
    )
    return parent


def _container_id(text: str) -> str:
    """`--container-id`: a container's number, as the job model numbers them (0, 1, ...)."""
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a container id, which is a number: 0 to job.container.count - 1"
        )
    return str(int(text))  # `07` is container 7, as the job model and the pid files name it


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser (nested ones too): it takes `--log-level` as the top-level parser does."""

    def __init__(self, **kwargs: Any) -> None:
        # No default here: an unset option must not overwrite a level given before the subcommand.
        kwargs["parents"] = [*kwargs.get("parents", ()), _log_level_option(argparse.SUPPRESS)]
        super().__init__(**kwargs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa", description=__doc__, parents=[_log_level_option("INFO")])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)

    def job_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("job", type=Path, help="job config: .properties, .yaml or .yml")
        p.add_argument("--config", action="append", metavar="KEY=VALUE", help="override a config key")

    run = sub.add_parser("run", help="run a job (all containers, supervised) or one container")
    job_args(run)
    run.add_argument(
        "--container-id",
        type=_container_id,
        help=f"run only this container (for an outside orchestrator); it exits {CONFIG_ERROR_EXIT} on a "
        "configuration error, which a restart does not mend (2 when the published job model has no such "
        "container)",
    )
    run.add_argument("--deploy", choices=["local", "spark"], help="override job.deploy")
    run.add_argument(
        "--until-caught-up",
        action="store_true",
        help="stop once every input reaches the high watermark seen at start",
    )
    run.add_argument("--from-supervisor", action="store_true", help=argparse.SUPPRESS)
    run.set_defaults(func=_cmd_run)

    config = sub.add_parser("config", help="job configuration").add_subparsers(
        dest="config_cmd", required=True
    )
    config.add_parser("keys", help="print every known config key").set_defaults(func=_cmd_config_keys)

    checkpoint = sub.add_parser("checkpoint", help="inspect or reset checkpoints (job stopped)")
    cp = checkpoint.add_subparsers(dest="checkpoint_cmd", required=True)
    show = cp.add_parser("show", help="print each task's checkpointed offsets and lag")
    job_args(show)
    show.set_defaults(func=_cmd_checkpoint_show)
    reset = cp.add_parser("reset", help="move every task's checkpoint (the job must be stopped)")
    job_args(reset)
    reset.add_argument("--to", required=True, help="earliest, latest, epoch ms, or ISO time")
    reset.add_argument("--task", action="append", help="only this task (repeatable)")
    reset.set_defaults(func=_cmd_checkpoint_reset)
    for name, helped, store_help, func in (
        (
            "forget-changelog",
            "drop stores' changelog positions from the last checkpoints (job stopped): their next start "
            "restores what the changelog holds, giving up the state the positions pointed at",
            "a store (repeatable)",
            _cmd_checkpoint_forget_changelog,
        ),
        (
            "forget-store",
            "drop stores' state from the last checkpoints (job stopped): their changelog positions and "
            "blob-store snapshots; for a store renamed or removed whose state is given up on purpose",
            "a store, defined by the job or not (repeatable)",
            _cmd_checkpoint_forget_store,
        ),
    ):
        forget = cp.add_parser(name, help=helped)
        job_args(forget)
        forget.add_argument("--store", action="append", required=True, help=store_help)
        forget.add_argument("--task", action="append", help="only this task (repeatable)")
        forget.set_defaults(func=func)

    state = sub.add_parser("state", help="inspect the checkpointed state of stores (blob-store snapshots)")
    st = state.add_subparsers(dest="state_cmd", required=True)
    ls = st.add_parser("ls", help="list each task's checkpointed stores and their snapshots")
    job_args(ls)
    ls.set_defaults(func=_cmd_state_ls)
    show_index = st.add_parser("show", help="print a snapshot index: metadata and files")
    job_args(show_index)
    show_index.add_argument("index_blob_id", metavar="INDEX-BLOB-ID", help="as `samsa state ls` prints it")
    show_index.add_argument("--json", action="store_true", help="print the index JSON itself")
    show_index.set_defaults(func=_cmd_state_show)
    download = st.add_parser("download", help="download a store's last checkpointed snapshot into a dir")
    job_args(download)
    download.add_argument("--task", required=True, help="task name, e.g. 'Partition 0'")
    download.add_argument("--store", required=True, help="store name")
    download.add_argument("--to", required=True, type=Path, help="a new or empty dir")
    download.set_defaults(func=_cmd_state_download)

    boot = st.add_parser(
        "bootstrap", help="fill a store of every task from a dataset on Spark, as its checkpointed state"
    )
    boot.add_argument("--job", required=True, type=Path, help="job config: .properties, .yaml or .yml")
    boot.add_argument("--config", action="append", metavar="KEY=VALUE", help="override a config key")
    boot.add_argument("--store", required=True, help="the store to fill (RocksDB, changelog or blob store)")
    boot.add_argument("--from", dest="source", required=True, help="dataset path (file or dir; Spark's URL)")
    boot.add_argument(
        "--format", choices=["parquet", "csv", "json"], default="parquet", help="default parquet"
    )
    boot.add_argument("--key", required=True, metavar="COL", help="the column holding the store key")
    boot.add_argument(
        "--value",
        action="append",
        metavar="COLS",
        help="value column(s), comma-separated or repeated: one column is the value itself, several a dict "
        "of them; default: every column but the key, as a dict",
    )
    boot.add_argument(
        "--offsets",
        default="latest",
        help="where the inputs resume: earliest, latest (default), epoch ms or ISO time",
    )
    boot.add_argument(
        "--staging", type=Path, help="dir for the SST files (shared by executors and driver on a cluster)"
    )
    boot.add_argument(
        "--partitioner",
        choices=["murmur2", "consistent"],
        help="place keys by this hash: murmur2 (Java's, Samsa's producers) or consistent (librdkafka's "
        "CRC32 default); default: as the inputs' keyed records show",
    )
    boot.set_defaults(func=_cmd_state_bootstrap)

    blobstore = sub.add_parser("blobstore", help="check or clean the job's blob store")
    bs = blobstore.add_subparsers(dest="blobstore_cmd", required=True)
    verify = bs.add_parser("verify", help="check every blob of the last checkpoints' snapshots (exit 1: bad)")
    job_args(verify)
    verify.set_defaults(func=_cmd_blobstore_verify)
    gc = bs.add_parser(
        "gc",
        help="delete expired blobs of commits that never completed (local dir store), and committed "
        "snapshots no task's last checkpoint names (a store no longer backed up to the blob store)",
    )
    job_args(gc)
    gc.add_argument("--dry-run", action="store_true", help="count only, delete nothing")
    gc.set_defaults(func=_cmd_blobstore_gc)

    eos = sub.add_parser("eos", help="exactly-once pipelines")
    es = eos.add_subparsers(dest="eos_cmd", required=True)
    retire = es.add_parser(
        "retire",
        help="tell downstream jobs that an upstream job (or some of its tasks) is gone for good: they stop "
        "waiting for its markers",
    )
    job_args(retire)
    retire.add_argument(
        "--task", action="append", help="only this task (repeatable): the tasks a shrink of the job removed"
    )
    retire.add_argument(
        "--force",
        action="store_true",
        help="retire although the job may still run (recent checkpoints or starts, or no way to tell)",
    )
    retire.add_argument(
        "--quiet-ms",
        type=int,
        help="how long its checkpoints and starts must be quiet for the job to count as stopped (default: "
        "10 commit intervals, at least 60000)",
    )
    retire.set_defaults(func=_cmd_eos_retire)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a reader gone (`| head`) shows here, not as an error while exiting
        return status
    except SamsaError as e:
        log.error("%s", explain(e, full=log.isEnabledFor(logging.DEBUG)))
        return _error_status(args, e)
    except BrokenPipeError:
        # The reader of stdout went away (`| head`): as the Python docs advise for SIGPIPE, point stdout at
        # devnull so that flushing it at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _error_status(args: argparse.Namespace, error: BaseException) -> int:
    """2; a single container whose failure a restart cannot mend exits with that failure's status instead
    (`unmendable_exit`: a configuration error, a fence by a newer start of itself, its lock held by another
    process here, an input record it cannot take under the `fail` policy), which ends its supervisor's job
    rather than restarting it; one whose task failed (its code raising, a send refused) exits 1, a crash
    that its supervisor or orchestrator restarts, not 2 as a usage error."""
    if getattr(args, "container_id", None) is None:
        return 2
    return unmendable_exit(error) or (1 if cause_of(error, TaskError) is not None else 2)


if __name__ == "__main__":
    sys.exit(main())
