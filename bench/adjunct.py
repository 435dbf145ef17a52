"""Adjunct stores: the bootstrap rate of a big adjunct store in a real container against a hand-written
consume-and-put loop, and the latency of store lookups from a task.

Prints figures; it is not a test: `python bench/adjunct.py --records 1000000` (see bench/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import logging
import math
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

# bench/ is not part of the package: the raw baseline is restore.py's (confluent_kafka + rocksdict).
from restore import SAMPLE, fill, key_of, raw_restore
from rocksdict import Options, Rdict

from samsa import IncomingMessageEnvelope, MessageCollector, StreamTask, TaskContext, TaskCoordinator
from samsa.adjunct.offsets import OFFSETS_FILE
from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator, coordinator_topic
from samsa.runtime.run_loop import RunLoop
from samsa.stores.rocksdb import RocksDbStore

STORE = "table"
ADJUNCT_RECORDS = "samsa_adjunct_records_total"

#: Nanoseconds of each `store.get` the lookup task made (this process runs the container).
LOOKUP_NS: list[int] = []
#: Keys the lookup task asked for and did not find (every key it asks for was written: must stay empty).
MISSED: list[bytes] = []


class LookupTask(StreamTask):
    """Per message, `bench.lookups` gets of random keys of the adjunct store `table` (of the keys 0 to
    `bench.records` - 1 that `fill` put on this task's partition), each timed on its own into `LOOKUP_NS`.
    Writes nothing."""

    def init(self, context: TaskContext) -> None:
        self.table: Any = context.store(STORE)
        records = int(context.config.get("bench.records", "0"))
        partitions = int(context.config.get("bench.partitions", "1"))
        (mine,) = {ssp.partition for ssp in context.system_stream_partitions}
        self.keys = range(mine, records, partitions)  # fill puts key i on partition i % partitions
        self.lookups = int(context.config.get("bench.lookups", "0"))
        self.rng = random.Random(int(context.config.get("bench.seed", "1")))

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        keys = [key_of(self.rng.choice(self.keys)) for _ in range(self.lookups)]
        get, perf, record = self.table.get, time.perf_counter_ns, LOOKUP_NS.append
        for key in keys:
            start = perf()
            value = get(key)
            record(perf() - start)
            if value is None:
                MISSED.append(key)


@dataclass
class ContainerRun:
    """One container run: seconds from start to the caught-up run loop, and to the closed container."""

    to_caught_up: float
    to_closed: float
    loop_started: float  # seconds from start until the run loop began (clients, stores, watermarks)
    stored: int  # records the container wrote to the adjunct store (all tasks)
    store_dirs: list[Path]  # one per task


@dataclass
class Bench:
    """What the runs share: the broker, the topics, the work dir, and the jobs to delete at the end."""

    args: argparse.Namespace
    bootstrap: str
    table: str
    orders: str
    work: Path
    jobs: list[JobConfig] = field(default_factory=list)

    def job(self, run_id: str, state: Path, lookups: int = 0) -> JobConfig:
        """The job as a user writes it: orders in, store `table` fed by the table topic, marked bootstrap."""
        config = {
            "job.name": "adjunct-bench",
            "job.id": run_id,
            "task.class": f"{__name__}:LookupTask",
            "task.inputs": f"kafka.{self.orders}",
            "job.container.count": "1",
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.bootstrap.servers": self.bootstrap,
            "systems.kafka.samza.key.serde": "bytes",
            "systems.kafka.samza.msg.serde": "bytes",
            "systems.kafka.samza.offset.default": "oldest",
            f"systems.kafka.streams.{self.table}.samza.bootstrap": "true",
            f"stores.{STORE}.factory": "rocksdb",
            f"stores.{STORE}.key.serde": "bytes",
            f"stores.{STORE}.msg.serde": "bytes",
            f"stores.{STORE}.adstore.input": f"kafka.{self.table}",
            "job.non-logged.store.base.dir": str(state),
            "job.logged.store.base.dir": str(state),
            "bench.records": str(self.args.records),
            "bench.partitions": str(self.args.partitions),
            "bench.lookups": str(lookups),
        }
        config.update(dict(item.split("=", 1) for item in self.args.samsa_config or []))
        job = JobConfig(Config(config))
        self.jobs.append(job)
        return job

    def delete_topics(self, admin: KafkaAdmin) -> None:
        internal = [
            t for job in self.jobs for t in (checkpoint_topic(job.name, job.id), coordinator_topic(job))
        ]
        existing = admin.partition_counts(internal)
        admin.delete_topics([self.table, self.orders, *(t for t, n in existing.items() if n is not None)])


@contextlib.contextmanager
def loop_timed(marks: dict[str, float]) -> Iterator[None]:
    """Records when the container's run loop starts and returns (caught up)."""
    original = RunLoop.run

    def run(loop: RunLoop) -> None:
        marks["loop_start"] = time.monotonic()
        original(loop)
        marks["loop_end"] = time.monotonic()

    with mock.patch.object(RunLoop, "run", run):
        yield


def run_container(job: JobConfig, profile: cProfile.Profile | None = None) -> ContainerRun:
    """Runs the job's one container in this process until caught up; timed from the container's start
    (the job model is published before)."""
    model = JobCoordinator(job).prepare()
    model_tasks = model.containers[0].tasks
    marks: dict[str, float] = {}
    with loop_timed(marks):
        start = time.monotonic()
        container = Container(job, model.containers[0], until_caught_up=True)
        if profile is not None:
            profile.enable()
        try:
            caught_up = container.run()
        finally:
            if profile is not None:
                profile.disable()
        end = time.monotonic()
    if not caught_up:
        raise RuntimeError("the container stopped before it caught up")
    # The counters themselves: a snapshot would also call the closed consumers' lag gauges.
    counter = container.registry.counter
    stored = sum(
        int(counter(ADJUNCT_RECORDS, "", {"task": t.name, "store": STORE}).value) for t in model_tasks
    )
    store_dirs = sorted(f.parent for f in job.non_logged_store_dir.rglob(OFFSETS_FILE))
    return ContainerRun(
        marks["loop_end"] - start, end - start, marks["loop_start"] - start, stored, store_dirs
    )


def verify(raw_dir: Path, store_dirs: list[Path], records: int, blob: bytes, width: int) -> None:
    """Both sides hold every key; a random sample of values equal on both sides and to the source."""
    raw = Rdict(str(raw_dir), Options(raw_mode=True))
    stores = [RocksDbStore(d, name=f"{STORE}-{i}") for i, d in enumerate(store_dirs)]
    try:
        raw_count = sum(1 for _ in raw.keys())  # noqa: SIM118  (the stub types no Rdict.__iter__)
        samsa_count = sum(sum(1 for _ in s.all()) for s in stores)
        if raw_count != records or samsa_count != records:
            raise RuntimeError(f"key counts: raw {raw_count:,}, samsa {samsa_count:,}, want {records:,}")
        for i in random.sample(range(records), min(SAMPLE, records)):
            want = blob[i * width : (i + 1) * width]
            if raw.get(key_of(i)) != want or want not in (s.get(key_of(i)) for s in stores):
                raise RuntimeError(f"value of {key_of(i)!r} differs between the stores and the source")
    finally:
        raw.close()
        for s in stores:
            s.close()


def bootstrap_bench(bench: Bench, blob: bytes) -> tuple[Path, JobConfig, list[Path]]:
    """Raw loop vs container, `--repeat` times, sides alternating; prints the figures. Returns the last
    raw db and the last Samsa run's job and store dirs (for the lookups)."""
    args, n, width = bench.args, bench.args.records, bench.args.value_bytes
    mb = n * (len(key_of(0)) + width) / 1e6
    raw_times: list[float] = []
    runs: list[ContainerRun] = []
    raw_dir = job = None
    for i in range(args.repeat):
        raw_dir, state = bench.work / f"raw-{i}", bench.work / f"samsa-{i}"
        if i > 0:  # the last run's stores stay for the lookups
            shutil.rmtree(bench.work / f"raw-{i - 1}")
            shutil.rmtree(bench.work / f"samsa-{i - 1}")
        # Alternate which side goes first: the second reads a topic the first left in the page cache.
        for side in ("raw", "samsa") if i % 2 == 0 else ("samsa", "raw"):
            if side == "raw":
                t0 = time.monotonic()
                got = raw_restore(bench.bootstrap, bench.table, args.partitions, raw_dir, args.raw_wal)
                raw_times.append(time.monotonic() - t0)
            else:
                job = bench.job(f"bootstrap_{i}_{uuid.uuid4().hex[:6]}", state)
                runs.append(run_container(job))
        run = runs[-1]
        if got != n or run.stored != n:
            raise RuntimeError(f"read {got:,} raw / stored {run.stored:,} samsa records, want {n:,}")
        verify(raw_dir, run.store_dirs, n, blob, width)
        for name, t in (("raw", raw_times[-1]), ("samsa", run.to_caught_up)):
            print(f"  run {i} {name:<5}: {n / t:>10,.0f} records/s {mb / t:>7.1f} MB/s ({t:.2f} s)")
        print(
            f"  run {i} samsa: start-up {run.loop_started:.2f} s, closed at {run.to_closed:.2f} s; verified "
            f"{n:,} keys on both sides, {min(SAMPLE, n):,} sampled values equal"
        )
    raw_t = statistics.median(raw_times)
    caught_t = statistics.median(r.to_caught_up for r in runs)
    closed_t = statistics.median(r.to_closed for r in runs)
    startup_t = statistics.median(r.loop_started for r in runs)
    wal = "with WAL" if args.raw_wal else "WAL off"
    print(f"\nmedian of {args.repeat} run(s), {n:,} records x {width} B, {args.partitions} partition(s):")
    print(f"  {'':<42}{'records/s':>12}{'MB/s':>9}{'s':>8}")
    for label, t in (
        (f"raw (confluent-kafka + rocksdict, {wal})", raw_t),
        ("samsa container, start to caught up", caught_t),
        ("samsa container, start to closed", closed_t),
    ):
        print(f"  {label:<42}{n / t:>12,.0f}{mb / t:>9.1f}{t:>8.2f}")
    print(f"  {'  of which start-up (before the run loop)':<42}{'':>21}{startup_t:>8.2f}")
    print(
        f"  samsa/raw: {raw_t / caught_t:.2f} to caught up, {raw_t / closed_t:.2f} to closed (target >= 0.8)"
    )
    assert raw_dir is not None and job is not None
    return raw_dir, job, runs[-1].store_dirs


def percentiles(samples: list[int]) -> tuple[float, float, float]:
    """p50, p99 (nearest rank) and the mean, in microseconds."""
    ordered = sorted(samples)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] / 1000

    return rank(0.50), rank(0.99), statistics.fmean(ordered) / 1000


def timer_overhead_ns(rounds: int = 100_000) -> float:
    perf = time.perf_counter_ns
    spans = []
    for _ in range(rounds):
        start = perf()
        spans.append(perf() - start)
    return statistics.median(spans)


def timed_gets(get: Any, keys: range, count: int) -> list[int]:
    """Nanoseconds of each of `count` gets of random `keys`, timed as the lookup task times them."""
    rng = random.Random(2)
    perf, spans = time.perf_counter_ns, []
    for key in [key_of(rng.choice(keys)) for _ in range(count)]:
        start = perf()
        get(key)
        spans.append(perf() - start)
    return spans


def lookup_bench(bench: Bench, raw_dir: Path, job: JobConfig, store_dirs: list[Path]) -> None:
    """Orders through the bootstrapped job (restarted: its store continues from its offsets file), each
    making `--lookups` timed gets; then as many gets on its RocksDB engine alone and on the raw db."""
    args = bench.args
    producer = KafkaProducer({"bootstrap.servers": bench.bootstrap, "linger.ms": 20})
    try:
        for i in range(args.lookup_messages):
            producer.send(bench.orders, b"order", key=b"%d" % i, partition=i % args.partitions)
        producer.flush()
    finally:
        producer.close()
    LOOKUP_NS.clear()
    MISSED.clear()
    rerun = bench.job(job.id, job.non_logged_store_dir, lookups=args.lookups)
    run = run_container(rerun)
    if run.stored != 0 or run.store_dirs != store_dirs:
        raise RuntimeError(f"the restarted container re-bootstrapped its store ({run.stored:,} records)")
    total = args.lookup_messages * args.lookups
    if len(LOOKUP_NS) != total or MISSED:
        raise RuntimeError(f"{len(LOOKUP_NS):,} lookups timed, {len(MISSED):,} missed; want {total:,}, none")
    samsa = percentiles(LOOKUP_NS)
    # Task 0's store alone, on its own keys (key i is on partition i % partitions).
    engine = RocksDbStore(store_dirs[0], name=STORE)
    try:
        alone = percentiles(timed_gets(engine.get, range(0, args.records, args.partitions), total))
    finally:
        engine.close()
    raw = Rdict(str(raw_dir), Options(raw_mode=True))
    try:
        plain = percentiles(timed_gets(raw.get, range(args.records), total))
    finally:
        raw.close()
    print(
        f"\nlookups: {args.lookup_messages:,} messages x {args.lookups} random keys = {total:,} gets of "
        f"{args.records:,} keys; container restarted in {run.loop_started:.2f} s, store continued (0 re-read)"
    )
    print(f"  {'µs per lookup':<40}{'p50':>8}{'p99':>8}{'mean':>8}")
    print(f"  {'samsa task, context.store(...).get':<40}{samsa[0]:>8.2f}{samsa[1]:>8.2f}{samsa[2]:>8.2f}")
    print(f"  {'its RocksDbStore alone (no layers)':<40}{alone[0]:>8.2f}{alone[1]:>8.2f}{alone[2]:>8.2f}")
    print(f"  {'raw rocksdict Rdict.get (same dataset)':<40}{plain[0]:>8.2f}{plain[1]:>8.2f}{plain[2]:>8.2f}")
    print(f"  (perf_counter_ns pair alone: {timer_overhead_ns() / 1000:.2f} µs, included in both)")


def profile_bench(bench: Bench, top: int) -> None:
    """One more container bootstrap of the whole store under cProfile; prints where its time goes."""
    profile = cProfile.Profile()
    job = bench.job(f"profile_{uuid.uuid4().hex[:6]}", bench.work / "samsa-profile")
    run = run_container(job, profile)
    print(f"\nprofile of one container run (cProfile on: {run.to_closed:.2f} s, start to closed):")
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(top)
        print(out.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000, help="records of the adjunct store's topic")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1, help="topic partitions = tasks (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; the median is reported")
    parser.add_argument("--raw-wal", action="store_true", help="raw side writes through RocksDB's WAL")
    parser.add_argument("--lookup-messages", type=int, default=10_000, help="messages of the lookup run")
    parser.add_argument("--lookups", type=int, default=10, help="store.get calls per message")
    parser.add_argument("--profile", type=int, metavar="N", help="profile one more container run; top N")
    parser.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    parser.add_argument(
        "--samsa-config", action="append", metavar="KEY=VALUE", help="extra job config (repeatable)"
    )
    parser.add_argument("--verbose", action="store_true", help="show the container's log")
    args = parser.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-adjunct-"))
    broker = None if args.bootstrap else EmbeddedBroker(data_dir=work / "broker").start()
    bootstrap = args.bootstrap or (broker.bootstrap_servers if broker else "")
    run_id = f"{int(time.time())}-{uuid.uuid4().hex[:4]}"
    bench = Bench(args, bootstrap, f"adjunct-bench-{run_id}-table", f"adjunct-bench-{run_id}-orders", work)
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    try:
        admin.ensure_topic(bench.table, args.partitions)
        admin.ensure_topic(bench.orders, args.partitions)
        blob = os.urandom(args.records * args.value_bytes)  # random.randbytes stops at 256 MiB
        t0 = time.monotonic()
        fill(bootstrap, bench.table, args.partitions, args.records, blob, args.value_bytes)
        took = time.monotonic() - t0
        print(f"filled {bench.table}: {args.records:,} records x {args.value_bytes} B in {took:.1f} s")
        raw_dir, job, store_dirs = bootstrap_bench(bench, blob)
        if args.profile:
            profile_bench(bench, args.profile)
        lookup_bench(bench, raw_dir, job, store_dirs)
        return 0
    finally:
        with contextlib.suppress(Exception):
            bench.delete_topics(admin)
        admin.close()
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
