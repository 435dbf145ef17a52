"""The blob-store part of `restore.py`: Samsa's blob-store restore against a parallel boto3 download of the
same objects, and what incremental commits upload. Run through `restore.py --backend blobstore|all`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

# bench/ is not part of the package: the raw baseline uses boto3 directly, against moto's server.
import boto3
from botocore.config import Config
from restore import BATCH, SAMPLE, STORE, key_of
from s3_client_wait import probe_config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from moto_server import FAKE_ENVIRONMENT, UNSET, MotoProcess

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.deploy.fork_server import ForkServer
from samsa.deploy.local import CONTAINER_MALLOC_ENV, CONTAINER_MODULES
from samsa.examples.wordcount.generator import WORDS
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker
from samsa.runtime.config.config import Config as JobSettings
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator
from samsa.stores.backend import Markers, TaskStoresContext
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.backup import BlobStoreBackupManager, UploadStats
from samsa.stores.blobstore.factory import BlobStoreBackendFactory, open_blob_store
from samsa.stores.blobstore.restore import BlobStoreRestoreManager, RestoreStats
from samsa.stores.blobstore.s3 import S3BlobStore
from samsa.stores.blobstore.settings import BlobStoreSettings
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import create_checkpoint
from samsa.stores.rocksdb import RocksDbStore

JOB_NAME, JOB_ID = "bench", "1"
PIECE = 1 << 20  # bytes per read of the raw download, as Samsa's S3 store copies a body


@dataclass(frozen=True)
class S3Target:
    """Where the blob-store side puts its blobs: an endpoint, a bucket and a key prefix of this run."""

    endpoint: str | None
    bucket: str
    prefix: str
    region: str | None
    label: str

    def settings(self, download_parallelism: int) -> BlobStoreSettings:
        return BlobStoreSettings(
            JOB_NAME,
            JOB_ID,
            Path("/nonexistent"),  # unused: a bucket is set
            s3_bucket=self.bucket,
            s3_prefix=self.prefix,
            s3_endpoint_url=self.endpoint,
            s3_region=self.region,
            download_parallelism=download_parallelism,
        )


def raw_client(target: S3Target, connections: int) -> Any:
    """A plain boto3 S3 client, as a hand-written download would make one (botocore's default retries)."""
    config = Config(max_pool_connections=max(10, connections))
    return boto3.session.Session().client(
        "s3", endpoint_url=target.endpoint, region_name=target.region, config=config
    )


@contextlib.contextmanager
def s3_target(args: argparse.Namespace) -> Iterator[S3Target]:
    """`--s3-bucket` (on `--s3-endpoint`, else AWS), or moto's S3 server started in a process of its own on a
    free port of 127.0.0.1, with fake credentials in this process's environment (boto3 must never find a
    developer's real ones). The run's objects go at the end."""
    prefix = f"samsa-bench-restore-{int(time.time())}"
    if args.s3_bucket:
        target = S3Target(args.s3_endpoint, args.s3_bucket, prefix, args.s3_region, args.s3_endpoint or "AWS")
        try:
            yield target
        finally:
            delete_prefix(target)
        return
    for name in UNSET:
        os.environ.pop(name, None)
    os.environ.update(FAKE_ENVIRONMENT)
    with MotoProcess() as server:  # moto keeps the objects in its process: they go with it
        target = S3Target(server.url, "samsa-bench", prefix, "us-east-1", "moto, in a process of its own")
        raw_client(target, 1).create_bucket(Bucket=target.bucket)
        yield target


def delete_prefix(target: S3Target) -> None:
    client = raw_client(target, 1)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=target.bucket, Prefix=f"{target.prefix}/")
    for page in pages:
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=target.bucket, Delete={"Objects": keys, "Quiet": True})


def fill_stores(dirs: list[Path], keys: int, blob: bytes, width: int) -> None:
    """`--backend blobstore` alone: the stores written directly (key i into store i % len(dirs)), bulk."""
    for p, d in enumerate(dirs):
        store = RocksDbStore(d, name=f"{STORE}-{p}")
        try:
            store.begin_bulk_load()
            ids = range(p, keys, len(dirs))
            for start in range(0, len(ids), BATCH):
                store.put_all(
                    (key_of(i), blob[i * width : (i + 1) * width]) for i in ids[start : start + BATCH]
                )
            store.end_bulk_load()
        finally:
            store.close()


def task_context(p: int, store_dir: Path, markers: Markers | None = None) -> TaskStoresContext:
    return TaskStoresContext(
        job_key=JOB_NAME,
        task_name=f"Partition {p}",
        changelog_partition=p,
        store_dirs={STORE: store_dir},
        store_configs={STORE: {"factory": "rocksdb"}},
        checkpoint_markers={"blobstore": markers} if markers else {},
    )


@dataclass
class Commit:
    checkpoint_id: str
    #: One per task: its store's checkpoint dir, and the markers (store -> snapshot index blob id).
    dirs: list[Path]
    markers: list[Markers]
    stats: list[UploadStats]
    seconds: float  # upload + cleanup of every task


def commit(
    engines: list[RocksDbStore], managers: list[BlobStoreBackupManager], uploads: list[UploadStats]
) -> Commit:
    """What a commit does for the blob store: RocksDB checkpoint dirs, then upload, then (the checkpoint
    being durable) cleanup, which makes the snapshot the base of the next diff."""
    checkpoint_id = str(CheckpointId.create())
    dirs = []
    for engine in engines:
        engine.flush()
        made = create_checkpoint(engine, engine.path, checkpoint_id)
        assert made is not None
        dirs.append(made)
    first = len(uploads)
    t0 = time.monotonic()
    futures = [m.upload(checkpoint_id, {}) for m in managers]
    markers = [f.result() for f in futures]
    for m, mk in zip(managers, markers, strict=True):
        m.cleanup(checkpoint_id, mk).result()
    return Commit(checkpoint_id, dirs, markers, uploads[first:], time.monotonic() - t0)


def snapshot_keys(settings: BlobStoreSettings, markers: list[Markers]) -> tuple[list[str], int]:
    """The object keys of every file blob of the snapshots (what a restore downloads), and their bytes."""
    with ThreadPoolExecutor(2) as pool:
        store = cast(S3BlobStore, open_blob_store(settings, pool))
        try:
            transfer = BlobTransfer(store, settings.chunk_size)
            keys, size = [], 0
            for p, mk in enumerate(markers):
                base = BlobMetadata("", -1, JOB_NAME, JOB_ID, f"Partition {p}", STORE)
                index = transfer.get_index(mk[STORE], base)
                keys += [store.key(b) for b in index.dir_index.present_blobs()]
                size += index.dir_index.stats()[1]
            return keys, size
        finally:
            store.close()


def samsa_blob_restore(
    settings: BlobStoreSettings, markers: list[Markers], checkpoint_id: str, root: Path, parallelism: int
) -> tuple[float, float, list[Path], list[RestoreStats]]:
    """One task per snapshot restored as a container does. First what the container's backend factory
    makes at start: the restore store (its boto3 client) on its download pool
    (`blobstore.download.parallelism` threads). Then the restore, on a pool of `parallelism` threads
    (`stores.restore.parallelism`): per task a manager, its init (reads the index), restore and close.

    Returns (seconds to make the client, seconds to restore, store dirs, the managers' figures).
    """
    restored: list[RestoreStats] = []
    t0 = time.monotonic()
    download_pool = ThreadPoolExecutor(settings.download_parallelism, "blob-download")
    store = open_blob_store(settings, download_pool)
    t1 = time.monotonic()
    try:
        contexts = [task_context(p, root / f"Partition_{p}" / STORE, mk) for p, mk in enumerate(markers)]

        def restore_one(context: TaskStoresContext) -> None:
            transfer = BlobTransfer(store, settings.chunk_size)
            manager = BlobStoreRestoreManager(context, transfer, JOB_NAME, JOB_ID, restored.append)
            try:
                manager.init(context.checkpoint_markers["blobstore"], checkpoint_id)
                manager.restore(threading.Event())
            finally:
                manager.close()

        with ThreadPoolExecutor(parallelism, "restore") as pool:
            list(pool.map(restore_one, contexts))
    finally:
        store.close()
        download_pool.shutdown(wait=True)
    dirs = [c.store_dirs[STORE] for c in contexts]
    return t1 - t0, time.monotonic() - t1, dirs, restored


def raw_download(
    target: S3Target, keys: list[str], out_dir: Path, parallelism: int, fsync: bool
) -> tuple[float, float, int]:
    """A hand-written parallel download: one boto3 client, `parallelism` threads, each object streamed into
    its own file 1 MiB at a time, no checksums; with `fsync`, each file then the dir made durable.

    Returns (seconds to make the client, seconds to download, bytes written).
    """
    t0 = time.monotonic()
    client = raw_client(target, parallelism)
    t1 = time.monotonic()
    out_dir.mkdir(parents=True)

    def one(item: tuple[int, str]) -> int:
        i, key = item
        body = client.get_object(Bucket=target.bucket, Key=key)["Body"]
        size = 0
        with open(out_dir / f"{i:06d}", "wb") as out:
            while piece := body.read(PIECE):
                out.write(piece)
                size += len(piece)
            if fsync:
                out.flush()
                os.fsync(out.fileno())
        return size

    with ThreadPoolExecutor(parallelism, "raw-download") as pool:
        size = sum(pool.map(one, enumerate(keys)))
    if fsync:
        fd = os.open(out_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return t1 - t0, time.monotonic() - t1, size


def verify_stores(dirs: list[Path], keys: int, blob: bytes, width: int) -> None:
    """The restored stores hold exactly `keys` keys, and a random sample of values equal to the source."""
    stores = [RocksDbStore(d, name=f"{STORE}-check-{i}") for i, d in enumerate(dirs)]
    try:
        count = sum(sum(1 for _ in s.all()) for s in stores)
        if count != keys:
            raise RuntimeError(f"blob-store restore: {count:,} keys, want {keys:,}")
        for i in random.sample(range(keys), min(SAMPLE, keys)):
            if stores[i % len(stores)].get(key_of(i)) != blob[i * width : (i + 1) * width]:
                raise RuntimeError(f"blob-store restore: value of {key_of(i)!r} differs from the source")
    finally:
        for s in stores:
            s.close()


def dir_files(dirs: list[Path]) -> dict[str, int]:
    """Relative path (`<task>/<file>`) -> size of every file of the checkpoint dirs."""
    return {
        f"{p}/{f.relative_to(d)}": f.stat().st_size
        for p, d in enumerate(dirs)
        for f in sorted(d.rglob("*"))
        if f.is_file()
    }


def blob_bench(
    args: argparse.Namespace, work: Path, blob: bytes, store_dirs: list[Path], changelog_t: float | None
) -> None:
    """Upload the stores as a snapshot, time Samsa's blob restore against a raw boto3 download of the same
    objects, then measure an incremental commit after updating `--update-percent` of the keys."""
    n, width = args.keys, args.value_bytes
    if not store_dirs:
        store_dirs = [work / "source" / f"Partition_{p}" / STORE for p in range(args.partitions)]
        t0 = time.monotonic()
        fill_stores(store_dirs, n, blob, width)
        print(
            f"filled {len(store_dirs)} RocksDB store(s) directly: {n:,} keys x {width} B "
            f"in {time.monotonic() - t0:.1f} s"
        )
    with s3_target(args) as target:
        settings = target.settings(args.download_parallelism)
        print(
            f"\nblob store: s3://{target.bucket}/{target.prefix} ({target.label}), "
            f"blobstore.download.parallelism={settings.download_parallelism}"
        )
        uploads: list[UploadStats] = []
        factory = BlobStoreBackendFactory(settings, [STORE], on_upload=uploads.append)
        engines = [RocksDbStore(d, name=f"{STORE}-live-{p}") for p, d in enumerate(store_dirs)]
        try:
            managers = [factory.backup_manager(task_context(p, d)) for p, d in enumerate(store_dirs)]
            for m in managers:
                m.init(None)
            first = commit(engines, managers, uploads)
            files = sum(s.files_uploaded for s in first.stats)
            size = sum(s.bytes_uploaded for s in first.stats)
            print(
                f"  commit {first.checkpoint_id}: uploaded {files} files, {size / 1e6:.1f} MB in "
                f"{first.seconds:.2f} s ({size / 1e6 / first.seconds:.0f} MB/s, upload + cleanup); index "
                + ", ".join(mk[STORE] for mk in first.markers)
            )
            keys, snapshot_bytes = snapshot_keys(settings, first.markers)
            restore_timed(args, work, target, settings, first, keys, snapshot_bytes, blob, changelog_t)
            incremental(args, engines, managers, uploads, first)
        finally:
            for engine in engines:
                engine.close()
            factory.close()


def container_client_waits(target: S3Target, work: Path, repeat: int) -> tuple[list[float], list[float]]:
    """Seconds a container's restore waited for its S3 client, in `repeat` containers each started in a
    fresh process (`s3_client_wait.py`) and in `repeat` forked by a fork server as the local supervisor
    starts them, on the embedded broker, the job prepared here as a supervisor does."""
    with EmbeddedBroker(work / "probe-broker") as broker:
        topic, bootstrap = "client-wait", broker.bootstrap_servers
        with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topic(topic, 1)
            admin.create_topic(f"{topic}-counts", 1)
        producer = KafkaProducer({"bootstrap.servers": bootstrap})
        for i in range(200):
            word = WORDS[i % len(WORDS)].encode()
            producer.send(topic, word, key=word)
        producer.close()
        config = probe_config(bootstrap, target.bucket, topic, work / "probe", target.endpoint, target.region)
        JobCoordinator(JobConfig(JobSettings(config))).prepare()
        probe = Path(__file__).with_name("s3_client_wait.py")

        def arguments(i: int) -> list[str]:
            argv = ["--bootstrap", bootstrap, "--bucket", target.bucket, "--topic", topic]
            argv += ["--state", str(work / f"probe-{i}")]
            argv += ["--endpoint", target.endpoint] if target.endpoint else []
            return argv + (["--region", target.region] if target.region else [])

        fresh = []
        for i in range(repeat + 1):  # the first fills the snapshot the others restore on a new host each
            done = subprocess.run(
                [sys.executable, str(probe), *arguments(i)], capture_output=True, text=True, timeout=300
            )
            if done.returncode != 0:
                raise RuntimeError(f"client-wait probe failed ({done.returncode}):\n{done.stderr[-3000:]}")
            if i:
                fresh.append(float(json.loads(done.stdout.splitlines()[-1])["wait_s"]))
        forked = []
        server = ForkServer(CONTAINER_MODULES, True, {**CONTAINER_MALLOC_ENV, **os.environ})
        try:
            for i in range(repeat + 1, 2 * repeat + 1):
                process = server.spawn(
                    "s3_client_wait:main", [*arguments(i), "--forked"], {}, [str(probe.parent)]
                )
                assert process.stdout is not None
                output = process.stdout.read().decode()
                if process.wait() != 0:
                    raise RuntimeError(
                        f"forked client-wait probe failed ({process.returncode}):\n{output[-3000:]}"
                    )
                forked.append(float(json.loads(output.splitlines()[-1])["wait_s"]))
        finally:
            server.close()
        return fresh, forked


_COLD_CLIENT = """
import sys, time
import samsa.runtime.container  # what a container's process has imported before it makes the client
t0 = time.monotonic()
from samsa.stores.blobstore.s3 import make_client
make_client(sys.argv[1] or None, sys.argv[2] or None)
print(time.monotonic() - t0)
"""


def cold_client_seconds(target: S3Target, repeat: int) -> list[float]:
    """Seconds to make the S3 client in place in a fresh container process (importing boto3 included): what
    a restore waited before the client was made from the start."""
    times = []
    for _ in range(repeat):
        command = [sys.executable, "-c", _COLD_CLIENT, target.endpoint or "", target.region or ""]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
        times.append(float(done.stdout.split()[-1]))
    return times


def restore_timed(
    args: argparse.Namespace,
    work: Path,
    target: S3Target,
    settings: BlobStoreSettings,
    first: Commit,
    keys: list[str],
    snapshot_bytes: int,
    blob: bytes,
    changelog_t: float | None,
) -> None:
    n, width, mb = args.keys, args.value_bytes, snapshot_bytes / 1e6
    parallelism = settings.download_parallelism
    raw_times: list[float] = []
    samsa_times: list[float] = []
    clients: list[float] = []  # client creation, both sides: container start-up, not restore
    for i in range(args.repeat):
        samsa_dir, raw_dir = work / f"blob-samsa-{i}", work / f"blob-raw-{i}"
        # Alternate which side goes first. Before each, write back what the previous one left dirty, and
        # collect garbage: each boto3 client leaves ~100k objects, and a full collection takes 0.1-0.2 s.
        for side in ("raw", "samsa") if i % 2 == 0 else ("samsa", "raw"):
            os.sync()
            gc.collect()
            if side == "raw":
                client_s, took, got = raw_download(target, keys, raw_dir, parallelism, args.raw_fsync)
                raw_times.append(took)
            else:
                client_s, took, dirs, restored = samsa_blob_restore(
                    settings, first.markers, first.checkpoint_id, samsa_dir, args.parallelism
                )
                samsa_times.append(took)
            clients.append(client_s)
        samsa_bytes = sum(r.bytes_downloaded for r in restored)
        if got != snapshot_bytes or samsa_bytes != snapshot_bytes:
            raise RuntimeError(f"downloaded {got:,} B raw / {samsa_bytes:,} B samsa, want {snapshot_bytes:,}")
        verify_stores(dirs, n, blob, width)
        for name, t in (("raw boto3", raw_times[-1]), ("samsa blob", samsa_times[-1])):
            print(f"  run {i} {name:<10}: {mb / t:>7.1f} MB/s ({t:.3f} s)")
        print(
            f"  run {i} verified: {len(keys)} objects, {snapshot_bytes:,} B on both sides; samsa's store "
            f"holds {n:,} keys, {min(SAMPLE, n):,} sampled values equal"
        )
        shutil.rmtree(samsa_dir)
        shutil.rmtree(raw_dir)
    raw_t, samsa_t = statistics.median(raw_times), statistics.median(samsa_times)
    print(
        f"\nmedian of {args.repeat} run(s), snapshot of {len(keys)} objects, {mb:.1f} MB "
        f"({n:,} keys x {width} B), {parallelism} download threads:"
    )
    print(f"  {'':<36}{'s':>8}{'MB/s':>9}")
    raw_name = "raw boto3 download" + (" + fsync" if args.raw_fsync else " (no fsync)")
    print(f"  {raw_name:<36}{raw_t:>8.3f}{mb / raw_t:>9.1f}")
    print(f"  {'samsa blob-store restore':<36}{samsa_t:>8.3f}{mb / samsa_t:>9.1f}")
    client_t = statistics.median(clients)
    print(f"  {'boto3 client creation (each side)':<36}{client_t:>8.3f}   (not in the figures above)")
    cold_t = statistics.median(cold_client_seconds(target, args.repeat))
    label = "the client made in place, cold"
    print(f"  {label:<36}{cold_t:>8.3f}   (importing boto3 included, in a fresh container process)")
    fresh, forked = container_client_waits(target, work, args.repeat)
    fresh_t, wait_t = statistics.median(fresh), statistics.median(forked)
    label = "a container's wait for its client"
    print(
        f"  {label:<36}{wait_t:>8.3f}   (forked by the local supervisor's fork server, boto3's models "
        f"parsed there: {', '.join(f'{w:.3f}' for w in forked)})"
    )
    print(
        f"  {'  the same, started alone':<36}{fresh_t:>8.3f}   (a fresh process making its client from its "
        f"start, while it reads its checkpoints: {', '.join(f'{w:.3f}' for w in fresh)})"
    )
    if changelog_t is not None:
        # The changelog figure includes its factory and consumer, so the speedup counts the client in: as
        # long as a container waits for it, and as if made in place on the restore's path.
        speedup = changelog_t / (samsa_t + wait_t)
        alone, made_in_path = changelog_t / (samsa_t + fresh_t), changelog_t / (samsa_t + cold_t)
        print(f"  {'samsa changelog restore (above)':<36}{changelog_t:>8.3f}")
        print(
            f"  {'blob vs changelog speedup':<36}{speedup:>8.1f}x   (target >= 10x; a forked container's "
            f"wait for its client included; {alone:.1f}x for a container started alone, "
            f"{made_in_path:.1f}x with the client made in place, cold, "
            f"{changelog_t / samsa_t:.1f}x without it)"
        )
    else:
        print(f"  {'blob vs changelog speedup':<36}{'n/a':>8}   (--backend all measures it)")
    print(f"  {'blob/raw':<36}{raw_t / samsa_t:>8.2f}    (target >= 0.8)")


def incremental(
    args: argparse.Namespace,
    engines: list[RocksDbStore],
    managers: list[BlobStoreBackupManager],
    uploads: list[UploadStats],
    first: Commit,
) -> None:
    """`--update-rounds` commits, each after updating a random `--update-percent` of the keys, `--settle-s`
    apart, then one more without writes: what each uploaded against the store's size. A flush adds an L0
    SST; RocksDB's background compactions rewrite files, and the next commit uploads what they wrote."""
    n, width, pct = args.keys, args.value_bytes, args.update_percent
    count = max(1, round(n * pct / 100))
    print(
        f"\nincremental commits, {args.settle_s:g} s apart; before each, {count:,} random keys ({pct:g}%) "
        "updated (put + flush + checkpoint + upload + cleanup):"
    )
    print(
        f"  {'commit':<8}{'updated':>9}{'store MB':>10}{'files up':>10}{'MB up':>9}{'of store':>10}"
        f"{'SST kept/new/gone':>19}  new non-SST files"
    )
    previous, figures = first, []
    for r in range(args.update_rounds + 1):
        updated = random.sample(range(n), count) if r < args.update_rounds else []
        values = random.randbytes(len(updated) * width)
        for p, engine in enumerate(engines):
            mine = [(j, i) for j, i in enumerate(updated) if i % len(engines) == p]
            for start in range(0, len(mine), BATCH):
                engine.put_all(
                    (key_of(i), values[j * width : (j + 1) * width]) for j, i in mine[start : start + BATCH]
                )
        if r > 0:
            time.sleep(args.settle_s)
        this = commit(engines, managers, uploads)
        figures.append(report_commit(str(r + 1) if updated else "no write", len(updated), previous, this))
        previous = this
    if args.update_rounds == 0:
        return
    total, size = sum(up for up, _ in figures), figures[-1][1]
    print(
        f"  in all {total / 1e6:.1f} MB uploaded for {args.update_rounds} updates: "
        f"{total / size / args.update_rounds:.1%} of the store per update on average "
        f"(the first commit alone: {figures[0][0] / figures[0][1]:.2%})"
    )


def report_commit(label: str, updated: int, previous: Commit, this: Commit) -> tuple[int, int]:
    """One line: what `this` commit uploaded against the store's size, its SST files against `previous`'s.
    Returns (bytes uploaded, store size)."""
    before, after = dir_files(previous.dirs), dir_files(this.dirs)
    store_size = sum(after.values())
    up_files = sum(s.files_uploaded for s in this.stats)
    up_bytes = sum(s.bytes_uploaded for s in this.stats)
    sst_before = {f for f in before if f.endswith(".sst")}
    sst_after = {f for f in after if f.endswith(".sst")}
    kept, new, gone = sst_before & sst_after, sst_after - sst_before, sst_before - sst_after
    others = sorted({f.split("/", 1)[1] for f in after if not f.endswith(".sst") and f not in before})
    ssts = f"{len(kept)}/{len(new)}/{len(gone)}"
    print(
        f"  {label:<8}{updated:>9,}{store_size / 1e6:>10.1f}{up_files:>10}{up_bytes / 1e6:>9.2f}"
        f"{up_bytes / store_size:>10.2%}{ssts:>19}  {', '.join(others) or '-'}"
    )
    if sum(before[f] for f in gone) > 0.5 * sum(before[f] for f in sst_before):
        print(
            f"  ^ a RocksDB compaction rewrote {sum(before[f] for f in gone) / 1e6:.1f} MB of the previous "
            "commit's SST files (most of the store): this commit re-uploaded the store"
        )
    return up_bytes, store_size
