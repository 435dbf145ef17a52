"""Commit cost on a big changelog-backed RocksDB store: blocking-phase latency; throughput, commits on/off.

Prints figures; it is not a test. `python bench/commit.py` (see bench/README.md for the method).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import random
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)
from samsa.checkpoint.commit import TaskCommitManager
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.run_loop import RunLoop
from samsa.runtime.state import ContainerState
from samsa.stores.changelog.backup import ChangelogBackupManager
from samsa.stores.checkpoint_dirs import create_checkpoint
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.storage_manager import TaskStorage

LONG = struct.Struct(">q")
FILL_BATCH = 10_000  # entries per put_all while filling
STEPS = (
    "flush producer",
    "flush stores",
    " of which rocksdb flush",
    "rocksdb checkpoint",
    "changelog marker",
)


class CommitBenchTask(StreamTask):
    """Word count over a big key space in store `counts` (string -> 8-byte count); `init` first fills it
    with `bench.fill.bytes` of random `bench.value.bytes` values, through the store's layers (so the
    changelog gets every record), when that key is set."""

    def init(self, context: TaskContext) -> None:
        self.counts: Any = context.store("counts")
        self.output = context.config.get("bench.output", "")
        size = int(context.config.get("bench.value.bytes", "1024"))
        entries = int(context.config.get("bench.fill.bytes", "0")) // size
        rng = random.Random(1)
        for start in range(0, entries, FILL_BATCH):
            stop = min(start + FILL_BATCH, entries)
            self.counts.put_all([(f"fill-{i:010d}", rng.randbytes(size)) for i in range(start, stop)])

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        word = envelope.key
        old = self.counts.get(word)
        value = LONG.pack((0 if old is None else LONG.unpack(old)[0]) + 1)
        self.counts.put(word, value)
        collector.send(OutgoingMessage("kafka", self.output, key=word, value=value))


@dataclass
class Probe:
    """What the patched framework reports: per timer commit, the blocking time and its steps."""

    commits: list[dict[str, float]] = field(default_factory=list)  # step -> seconds; "total" for all
    skipped: int = 0
    loop_s: list[float] = field(default_factory=list)
    #: The async phase's steps (off the loop thread): RocksDB memtable flush (rocksdict releases the GIL
    #: while it runs) and local checkpoint (rocksdict holds the GIL: the loop thread stalls meanwhile).
    async_steps: dict[str, list[float]] = field(default_factory=lambda: {"flush": [], "checkpoint": []})
    _current: dict[str, float] | None = None
    _last: dict[str, float] | None = None  # the last timer commit: its async phase is reported with it

    def timed(self, step: str, fn: Callable[..., Any], off_loop: str = "") -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                if off_loop and threading.current_thread() is not threading.main_thread():
                    self.async_steps[off_loop].append(took)
                    if off_loop == "checkpoint" and self._last is not None:
                        self._last["stall"] = self._last["total"] + took
                elif self._current is not None:
                    self._current[step] = self._current.get(step, 0.0) + took

        return wrapper

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        original_commit, original_run = TaskCommitManager.commit, RunLoop.run

        def commit(
            manager: TaskCommitManager, offsets: Any, wait: bool = False, requested: bool = False
        ) -> bool:
            # Start-up and final commits (wait=True) include the async phase: not what the loop pays.
            self._current = None if wait else {}
            if wait:
                self._last = None  # its async checkpoint is not a timer commit's
            start = time.perf_counter()
            done = original_commit(manager, offsets, wait=wait, requested=requested)
            if self._current is not None:
                self._current["total"] = time.perf_counter() - start
                if done:
                    self.commits.append(self._current)
                    self._last = self._current
                else:
                    self.skipped += 1
            self._current = None
            return done

        def run(loop: RunLoop) -> None:
            start = time.perf_counter()
            original_run(loop)
            self.loop_s.append(time.perf_counter() - start)

        timed = [
            (ContainerState, "_flush_producers", STEPS[0], ""),
            (TaskStorage, "flush", STEPS[1], ""),
            (RocksDbStore, "flush", STEPS[2], "flush"),
            (ChangelogBackupManager, "snapshot", STEPS[4], ""),
        ]
        with contextlib.ExitStack() as stack:
            stack.enter_context(mock.patch.object(TaskCommitManager, "commit", commit))
            stack.enter_context(mock.patch.object(RunLoop, "run", run))
            for owner, attr, step, off_loop in timed:
                wrapped = self.timed(step, getattr(owner, attr), off_loop)
                stack.enter_context(mock.patch.object(owner, attr, wrapped))
            # commit.py calls create_checkpoint by the name it imported: patch that name.
            checkpoint = self.timed(STEPS[3], create_checkpoint, "checkpoint")
            stack.enter_context(mock.patch("samsa.checkpoint.commit.create_checkpoint", checkpoint))
            yield


def run_job(config: dict[str, str]) -> None:
    """The job's containers in this process, one after another, each until caught up."""
    job = JobConfig(Config(config))
    for model in JobCoordinator(job).prepare().containers:
        Container(job, model, until_caught_up=True).run()


def produce_words(bootstrap: str, topic: str, n: int, keys: int) -> None:
    """`n` words from a Zipf-like vocabulary of `keys` words (a few hot, a long tail), one partition."""
    rng = random.Random(7)
    words = [f"w{i:07d}".encode() for i in range(keys)]
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    try:
        for word in rng.choices(words, [1.0 / (r + 1) for r in range(keys)], k=n):
            producer.send(topic, word, key=word, partition=0)
        producer.flush()
    finally:
        producer.close()


def percentile(data: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1)."""
    ordered = sorted(data)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def dir_bytes(path: Path) -> int:
    """Bytes of the files under `path` (the live store dir; its checkpoint dirs are siblings)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def job_config(args: argparse.Namespace, name: str, bootstrap: str, words: str, work: Path) -> dict[str, str]:
    """The bench job: one task (the input has one partition), its store logged to a fresh changelog."""
    return {
        "job.name": name,
        "job.container.count": "1",
        "task.class": f"{__name__}:CommitBenchTask",
        "task.inputs": f"kafka.{words}",
        "task.outputs": f"kafka.{name}-out",
        "bench.output": f"{name}-out",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "bytes",
        "systems.kafka.samza.offset.default": "oldest",
        f"systems.kafka.streams.{words}.samza.reset.offset": "true",  # every run reads all the words
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "bytes",
        "stores.counts.changelog": f"kafka.{name}-changelog",
        "job.logged.store.base.dir": str(work / name),
        "job.non-logged.store.base.dir": str(work / name),
        **dict(item.split("=", 1) for item in args.samsa_config),
    }


def bench_store(
    args: argparse.Namespace, bootstrap: str, admin: KafkaAdmin, words: str, fill_mb: int, work: Path
) -> tuple[float, list[float]]:
    """Fills one job's store with `fill_mb`, warms up, then runs commits off and on in ABBA order;
    returns (median throughput on / median off, loop stall of every timer commit: blocking
    phase plus the GIL-held checkpoint of its async phase)."""
    name = f"commitbench-{fill_mb}mb-{int(time.time())}"
    admin.ensure_topic(f"{name}-out", 1)
    admin.ensure_topic(f"{name}-fill", 1)
    base = job_config(args, name, bootstrap, words, work)
    job_dir = Path(base["job.logged.store.base.dir"]) / JobConfig(Config(base)).job_key
    store_dir = job_dir / "Partition_0" / "counts"
    t0 = time.monotonic()
    # The fill: init() writes the store before the run loop finds its (empty) input caught up.
    filler = {"bench.fill.bytes": str(fill_mb << 20), "bench.value.bytes": str(args.value_bytes)}
    run_job(base | filler | {"task.inputs": f"kafka.{name}-fill"})
    took, size = time.monotonic() - t0, dir_bytes(store_dir) / 2**30
    print(f"store filled with {fill_mb} MB in {took:.0f} s: {size:.2f} GiB on disk ({store_dir})")
    rates: dict[str, list[float]] = {"off": [], "on": []}
    commits: list[dict[str, float]] = []
    async_steps: dict[str, list[float]] = {"flush": [], "checkpoint": []}
    order = [("warm-up", args.commit_ms)]  # the first pass over the words (cold caches) is not counted
    for i in range(args.repeat):
        pair = [("off", -1), ("on", args.commit_ms)]
        order += pair if i % 2 == 0 else pair[::-1]
    for mode, commit_ms in order:
        probe = Probe()
        with probe.installed():
            run_job(base | {"task.commit.ms": str(commit_ms)})
        rate = args.messages / probe.loop_s[-1]
        totals = [c["total"] * 1000 for c in probe.commits]
        shown = f"; {len(totals)} commits, {probe.skipped} skipped" if totals else ""
        if totals:
            shown += f", blocking p50 {percentile(totals, 0.5):.1f} ms, max {max(totals):.1f} ms"
        print(f"  commits {mode:<8}{rate:>9,.0f} msg/s ({probe.loop_s[-1]:.2f} s){shown}")
        if mode != "warm-up":
            rates[mode].append(rate)
            commits += probe.commits
            for step, took in probe.async_steps.items():
                async_steps[step] += took
    print(f"  store now {dir_bytes(store_dir) / 2**30:.2f} GiB")
    admin.delete_topics([f"{name}-out", f"{name}-fill", f"{name}-changelog"])
    shutil.rmtree(job_dir, ignore_errors=True)
    ratio = statistics.median(rates["on"]) / statistics.median(rates["off"])
    print(f"  blocking commit phase, {len(commits)} commits (ms):{'p50':>9}{'p99':>8}{'max':>8}")
    for step in [*STEPS, "total"]:
        print_row(step, [c.get(step, 0.0) for c in commits])
    print(f"  async phase, off the loop thread ({len(async_steps['checkpoint'])} commits, ms):")
    print_row("rocksdb flush (GIL released)", async_steps["flush"])
    print_row("rocksdb checkpoint (GIL held)", async_steps["checkpoint"])
    # The checkpoint off the loop thread holds the GIL: the loop stalls for it as for the blocking phase.
    stalls = [c.get("stall", c["total"]) for c in commits]
    print_row("loop stall (blocking + its GIL-held checkpoint)", stalls, "   (target p99 < 50)")
    print(f"  throughput commits on / off (medians): {ratio:.3f}   (target >= 0.9)")
    return ratio, stalls


def print_row(label: str, seconds: list[float], note: str = "") -> None:
    """One line of p50 / p99 / max in milliseconds."""
    ms = [s * 1000 for s in seconds] or [0.0]
    print(f"    {label:<40}{percentile(ms, 0.5):>9.1f}{percentile(ms, 0.99):>8.1f}{max(ms):>8.1f}{note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fill-mb", type=int, action="append", help="store sizes (default 0 and 1024)")
    parser.add_argument("--value-bytes", type=int, default=1024, help="size of each filler value")
    parser.add_argument("--messages", type=int, default=2_000_000, help="words processed per run")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct words")
    parser.add_argument("--commit-ms", type=int, default=500, help="task.commit.ms of the commit runs")
    parser.add_argument("--repeat", type=int, default=4, help="run pairs (off, on) per store size")
    parser.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    parser.add_argument(
        "--broker-dir", help="the embedded broker's data under this dir (e.g. on tmpfs: not the store's disk)"
    )
    parser.add_argument("--samsa-config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--verbose", action="store_true", help="Samsa's INFO log")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s: %(message)s"
    )
    work = Path(tempfile.mkdtemp(prefix="samsa-commit-bench-"))
    broker_data = Path(tempfile.mkdtemp(prefix="samsa-commit-bench-broker-", dir=args.broker_dir or work))
    broker = None if args.bootstrap else EmbeddedBroker(data_dir=broker_data).start()
    bootstrap = args.bootstrap or (broker.bootstrap_servers if broker else "")
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    words = f"commitbench-words-{int(time.time())}"
    try:
        admin.ensure_topic(words, 1)
        t0 = time.monotonic()
        produce_words(bootstrap, words, args.messages, args.keys)
        took = time.monotonic() - t0
        print(f"produced {args.messages:,} words ({args.keys:,} distinct) to {words} in {took:.1f} s")
        results = {
            mb: bench_store(args, bootstrap, admin, words, mb, work) for mb in args.fill_mb or [0, 1024]
        }
        print(f"\nsummary: task.commit.ms={args.commit_ms}, {args.messages:,} messages per run, ", end="")
        print(f"{args.repeat} run pair(s) per store")
        print("  per commit, the loop's stall: blocking phase + its GIL-held RocksDB checkpoint")
        heads = ("commits", "p50 ms", "p99 ms", "max ms", ">50 ms", "on/off")
        print(f"  {'filled':>8}" + "".join(f"{h:>9}" for h in heads))
        for mb, (ratio, totals) in results.items():
            ms = [t * 1000 for t in totals]
            row = f"{len(ms):>9}{percentile(ms, 0.5):>9.1f}{percentile(ms, 0.99):>9.1f}{max(ms):>9.1f}"
            row += f"{sum(t > 50 for t in ms):>9}"
            print(f"  {mb:>5} MB{row}{ratio:>9.3f}")
        print("  targets: p99 < 50 ms whatever the store size; on/off >= 0.9")
        return 0
    finally:
        admin.delete_topics([t for t in admin.metadata().topics if "commitbench" in t])
        admin.close()
        if broker is not None:
            broker.stop()
        shutil.rmtree(broker_data, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
