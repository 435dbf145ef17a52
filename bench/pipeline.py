"""Throughput and alignment wait of a two-job exactly-once pipeline on the embedded broker.

Job 1 (split) reads lines and sends each word to an intermediate stream; job 2 (count) counts the words in
a RocksDB store and sends each new count to a sink, in Kafka transactions. Both run at once, each as
`samsa run` (supervisor + container processes). Prints figures and checks that the sink holds every word's
counts exactly once; it is not a test. `python bench/pipeline.py` (see bench/README.md).
With `--guarantee both`, the same pipeline runs at-least-once first, on the same input, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker, free_port
from samsa.serde.registry import SerdeRegistry
from samsa.stores.changelog.settings import ChangelogSettings

BENCH = Path(__file__).resolve().parent
ALIGNMENT_WAIT = "samsa_eos_alignment_wait_seconds"
VERSIONS_COMMITTED = "samsa_eos_versions_committed_total"
DUPLICATES_DROPPED = "samsa_eos_duplicates_dropped_total"
BUFFERED_MESSAGES = "samsa_eos_buffered_messages"
# A scrape every 200 ms: versions are cut every task.commit.ms (1 s by default), so a scrape window almost
# always holds at most one version per task, and the window's maximum is that version's wait. (More often
# costs the container: each scrape renders every metric, the consumer lag gauges included.)
SCRAPE_S = 0.2
SINK_POLL_S = 0.1
_STARTED = re.compile(r"samsa\.deploy\.local: started container \S+ \(pid (\d+)[,)]")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")


def make_lines(count: int, vocabulary: int, seed: int) -> tuple[list[str], Counter[str]]:
    """`count` lines of 1 to 9 words from a skewed vocabulary (a few words are common); the true counts."""
    rng = random.Random(seed)
    words = [f"w{i:05d}" for i in range(vocabulary)]
    weights = [1.0 / (rank + 1) for rank in range(vocabulary)]
    sizes = [rng.randint(1, 9) for _ in range(count)]
    drawn = rng.choices(words, weights, k=sum(sizes))
    lines, at = [], 0
    for size in sizes:
        lines.append(" ".join(drawn[at : at + size]))
        at += size
    return lines, Counter(drawn)


def produce_lines(bootstrap: str, topic: str, lines: list[str], partitions: int) -> None:
    """The lines round-robin over the partitions, without keys."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    try:
        for i, line in enumerate(lines):
            producer.send(topic, line.encode(), partition=i % partitions)
        producer.flush()
    finally:
        producer.close()


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22); None once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class Feeder(threading.Thread):
    """Produces the lines at `rate` lines/s (round-robin, as `produce_lines`) while the jobs run."""

    def __init__(self, bootstrap: str, topic: str, lines: list[str], partitions: int, rate: float) -> None:
        super().__init__(name="feeder", daemon=True)
        self.args = (bootstrap, topic, lines, partitions)
        self.rate = rate
        self.done_at: float | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        bootstrap, topic, lines, partitions = self.args
        try:
            producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            started = time.monotonic()
            for i, line in enumerate(lines):
                producer.send(topic, line.encode(), partition=i % partitions)
                if i % 100 == 99:  # on schedule, 100 lines at a time
                    ahead = started + (i + 1) / self.rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
            producer.flush()
            producer.close()
            self.done_at = time.monotonic()
        except BaseException as e:  # shown by the main thread
            self.error = e


@dataclass
class Topics:
    lines: str
    words: str
    counts: str
    changelog: str | None


def job_configs(
    bootstrap: str,
    run_id: str,
    topics: Topics,
    state: Path,
    args: argparse.Namespace,
    guarantee: str,
    metrics_port: int,
) -> tuple[dict[str, str], dict[str, str]]:
    """The split and count jobs' configs, sharing the intermediate stream."""
    common = {
        "job.id": run_id,
        "job.processing.guarantee": guarantee,
        "job.container.count": str(args.containers),
        "task.commit.ms": str(args.commit_ms),
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        # The stream linking the two jobs: marked intermediate in both (exactly-once jobs only).
        f"systems.kafka.streams.{topics.words}.samza.intermediate": str(guarantee == "exactly_once").lower(),
        "job.non-logged.store.base.dir": str(state),
        "job.logged.store.base.dir": str(state),
    }
    split = {
        **common,
        "job.name": "pipeline-split",
        "task.class": "pipeline_tasks:SplitWords",
        "task.inputs": f"kafka.{topics.lines}",
        "task.outputs": f"kafka.{topics.words}",
        "pipeline.words.stream": topics.words,
    }
    count = {
        **common,
        "job.name": "pipeline-count",
        "task.class": "pipeline_tasks:CountWords",
        "task.inputs": f"kafka.{topics.words}",
        "task.outputs": f"kafka.{topics.counts}",
        "pipeline.counts.stream": topics.counts,
        f"systems.kafka.streams.{topics.counts}.samza.msg.serde": "long",
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "metrics.prometheus.port": str(metrics_port),
    }
    if topics.changelog is not None:
        count["stores.counts.changelog"] = f"kafka.{topics.changelog}"
    for extra in args.samsa_config:
        key, _, value = extra.partition("=")
        split[key] = count[key] = value
    return split, count


class Job:
    """`samsa run <job>` in a subprocess; its log is read on a thread (kept for errors, echoed if verbose)."""

    def __init__(self, name: str, job_file: Path, env: dict[str, str], verbose: bool):
        self.name = name
        self.verbose = verbose
        self.job_file = job_file
        self.running_at: float | None = None  # the first container's "running tasks" line
        # Their pids and start times, from the supervisor's "started container" lines.
        self.containers: list[tuple[int, int | None]] = []
        self.log: deque[str] = deque(maxlen=300)
        cmd = [sys.executable, "-m", "samsa.cli", "run", str(job_file)]
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self.running_at is None and " running tasks " in line:
                self.running_at = time.monotonic()
            elif started := _STARTED.search(line):
                pid = int(started.group(1))
                self.containers.append((pid, _start_time(pid)))
            self.log.append(line)
            if self.verbose:
                print(f"    [{self.name}] {line}", end="")

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (the supervisor stops its containers); after `timeout`, SIGKILL to the supervisor and
        to its containers, which run in sessions of their own and would outlive it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            print(f"  {self.name}: no exit {timeout:.0f} s after SIGTERM; killing it and its containers")
            self.proc.kill()
            rc = self.proc.wait()
        for pid in self.live_containers():
            os.kill(pid, signal.SIGKILL)
        self._reader.join(5)
        return rc

    def live_containers(self) -> list[int]:
        """The pids of this job's containers still running (checked by start time: pids get reused, and a
        container forked by the fork server has the server's command line)."""
        return [
            pid for pid, started in self.containers if started is not None and _start_time(pid) == started
        ]

    def where(self) -> str:
        """Each live container's Python stacks (py-spy dump, when installed next to this interpreter)."""
        spy = Path(sys.executable).with_name("py-spy")
        if not spy.exists():
            return ""
        out = []
        for pid in self.live_containers():
            dump = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True)
            out.append(f"  {self.name} container pid {pid}:\n{dump.stdout}{dump.stderr}")
        return "".join(out)

    def tail(self, lines: int = 60) -> str:
        return "".join(f"    [{self.name}] {line}" for line in list(self.log)[-lines:])


class SinkReader:
    """Reads the sink incrementally as a read_committed consumer and checks each record on arrival: a
    word's counts must come as 1, 2, 3, ... (its records live on one partition, in order)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.total = 0
        self.last: dict[str, int] = {}
        self.wrong: list[str] = []  # the first out-of-sequence records: a duplicate or a gap
        self._long = SerdeRegistry({}).get("long")
        self._consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
        self._consumer.assign({(topic, p): OFFSET_BEGINNING for p in range(partitions)})

    def poll(self) -> int:
        while msgs := self._consumer.consume(10_000, 0.05):
            for msg in msgs:
                key, value = msg.key(), msg.value()
                assert key is not None and value is not None, "the count job sends words and counts"
                word, count = key.decode(), self._long.from_bytes(value)
                before = self.last.get(word, 0)
                if count != before + 1 and len(self.wrong) < 10:
                    self.wrong.append(f"{word}: {count} after {before} (partition {msg.partition()})")
                self.last[word] = count
            self.total += len(msgs)
        return self.total

    def close(self) -> None:
        self._consumer.close()


@dataclass
class Result:
    """One pipeline run: seconds from starting both jobs (end to end) or from both running (steady) to
    the sink holding every final count; whether the sink's counts were exact and both jobs exited 0."""

    total_s: float
    steady_s: float
    ok: bool


@dataclass
class TaskSeries:
    count: int = 0
    waits: list[float] = field(default_factory=list)


class AlignmentScraper(threading.Thread):
    """Scrapes job 2's /metrics every SCRAPE_S. A Timer exposes count, sum and the maximum since the
    previous scrape, no quantiles: each scrape window whose count grew by one gives that version's exact
    wait; a window holding k > 1 versions gives its maximum k times (an upper bound for those k)."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(name="alignment-scraper", daemon=True)
        self.urls = [f"http://127.0.0.1:{port}/metrics" for port in ports]
        self.tasks: dict[str, TaskSeries] = {}
        self.merged_windows = 0
        self.scrapes = 0
        self.failed = 0
        self.slowest_s = 0.0
        self.sum_seconds = 0.0
        self.gauges: dict[str, dict[str, float]] = {}  # name -> task -> last value
        self.peak_buffered = 0.0
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._halt.wait(SCRAPE_S):
            self.scrape()

    def stop(self) -> None:
        self._halt.set()
        self.join(5)
        self.scrape()

    def scrape(self) -> None:
        with self._lock:
            for url in self.urls:
                asked = time.monotonic()
                try:
                    with urllib.request.urlopen(url, timeout=10) as response:
                        text = response.read().decode()
                except OSError:
                    self.failed += self.scrapes > 0  # before the first answer: not serving yet
                    continue
                # A slow answer means the container's threads got no time (the GIL, or the machine).
                self.slowest_s = max(self.slowest_s, time.monotonic() - asked)
                self.scrapes += 1
                self._take(text, url)

    def _take(self, text: str, url: str) -> None:
        counts: dict[str, int] = {}
        maxima: dict[str, float] = {}
        sums: dict[str, float] = {}
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match is None:
                continue
            name, labels, value = match.group(1), f"{url} {match.group(2) or ''}", float(match.group(3))
            if name == ALIGNMENT_WAIT + "_count":
                counts[labels] = int(value)
            elif name == ALIGNMENT_WAIT + "_max":
                maxima[labels] = value
            elif name == ALIGNMENT_WAIT + "_sum":
                sums[labels] = value
            elif name in (VERSIONS_COMMITTED, DUPLICATES_DROPPED, BUFFERED_MESSAGES):
                self.gauges.setdefault(name, {})[labels] = value
        for labels, count in counts.items():
            series = self.tasks.setdefault(labels, TaskSeries())
            new = count - series.count
            if new > 0:
                series.waits.extend([maxima.get(labels, 0.0)] * new)
                self.merged_windows += new > 1
            series.count = count
        if sums:
            self.sum_seconds = sum(sums.values())
        self.peak_buffered = max(self.peak_buffered, sum(self.gauges.get(BUFFERED_MESSAGES, {}).values()))

    def waits(self) -> list[float]:
        return sorted(w for s in self.tasks.values() for w in s.waits)


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted `values`."""
    return values[max(0, min(len(values) - 1, int(q * len(values) + 0.999999) - 1))]


def run_pipeline(
    args: argparse.Namespace,
    bootstrap: str,
    work: Path,
    run_id: str,
    lines_topic: str | None,
    lines: list[str],
    truth: Counter[str],
    guarantee: str,
) -> Result | None:
    """Both jobs under `guarantee` on fresh topics until the sink holds every final count; prints the
    figures and the check. The input is `lines_topic`, filled beforehand, or (None, with --rate) a fresh
    topic that `lines` are fed into at the rate while the jobs run. None when a job failed or timed out."""
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    topics = Topics(
        lines_topic or f"lines-{run_id}",
        f"words-{run_id}",
        f"counts-{run_id}",
        None if args.no_changelog else f"counts-changelog-{run_id}",
    )
    words = sum(truth.values())
    jobs: list[Job] = []
    sink: SinkReader | None = None
    scraper: AlignmentScraper | None = None
    feeder: Feeder | None = None
    try:
        if lines_topic is None:
            admin.ensure_topic(topics.lines, args.partitions)
        admin.ensure_topic(topics.words, args.partitions)
        admin.ensure_topic(topics.counts, args.partitions)
        if topics.changelog is not None:
            # Made as Samsa's changelog admin makes one, before the timing.
            admin.ensure_topic(
                topics.changelog, args.partitions, ChangelogSettings.of("counts", {}).topic_config()
            )
        port = args.metrics_port or free_port()
        split, count = job_configs(bootstrap, run_id, topics, work / f"state-{run_id}", args, guarantee, port)
        files = {}
        for name, config in (("split", split), ("count", count)):
            files[name] = work / f"{name}-{run_id}.yaml"
            files[name].write_text(json.dumps(config, indent=1))  # JSON is YAML
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(BENCH), os.environ.get("PYTHONPATH")) if p),
        }
        changelog = "changelogged" if topics.changelog else "no changelog"
        print(
            f"\n[{guarantee}] job 1 split: {topics.lines} -> {topics.words} (intermediate); job 2 count: "
            f"{topics.words} -> RocksDB ({changelog}) -> sink {topics.counts}; {args.containers} "
            f"container(s) each, task.commit.ms={args.commit_ms}"
            + (f", {', '.join(args.samsa_config)}" if args.samsa_config else "")
        )
        sink = SinkReader(bootstrap, topics.counts, args.partitions)
        scraper = AlignmentScraper([port + i for i in range(args.containers)])
        scraper.start()
        started = time.monotonic()
        # Both run until the sink holds every word's final count, as a pipeline runs: job 1 goes on cutting
        # (empty) versions by the clock once it has read every line, which closes job 2's last version.
        # (With --until-caught-up, job 1's tasks would stop at versions of their own, and job 2 would wait
        # for the markers of the highest from the tasks that stopped below it.)
        jobs.append(Job("split", files["split"], env, args.verbose))
        jobs.append(Job("count", files["count"], env, args.verbose))
        if lines_topic is None:
            feeder = Feeder(bootstrap, topics.lines, lines, args.partitions, args.rate)
            feeder.start()
        deadline = started + args.timeout
        last_report = started
        while sink.poll() < words:
            now = time.monotonic()
            fed = feeder is None or feeder.error is None
            if any(job.proc.poll() is not None for job in jobs) or now > deadline or not fed:
                why = f"timed out after {args.timeout:.0f} s" if now > deadline else "a job exited"
                if feeder is not None and feeder.error is not None:
                    why = f"the feeder failed: {feeder.error!r}"
                print(f"FAILED: {why} with {sink.total:,} of {words:,} sink records committed")
                for job in jobs:
                    print(f"  {job.name}: exit code {job.proc.poll()}\n{job.tail()}{job.where()}")
                return None
            if args.progress and now - last_report >= 5:
                last_report = now
                print(f"  {now - started:5.1f} s: {sink.total:,} of {words:,} sink records committed")
            time.sleep(SINK_POLL_S)
        done = time.monotonic()
        scraper.stop()
        codes = {job.name: job.stop() for job in jobs}
        # Nothing may follow the final counts: read the sink once more after both jobs stopped.
        time.sleep(0.5)
        sink.poll()
        both_running = max((job.running_at for job in jobs if job.running_at is not None), default=started)
        result = Result(done - started, done - both_running, False)
        report(args, words, len(truth), result, scraper, guarantee == "exactly_once")
        if feeder is not None and feeder.done_at is not None:
            print(
                f"  fed at {args.rate:,.0f} lines/s for {feeder.done_at - started:.1f} s; last line fed -> "
                f"final counts committed in the sink: {done - feeder.done_at:.2f} s"
            )
        exact = sink.total == words and not sink.wrong and sink.last == dict(truth)
        bad = {w: (sink.last.get(w), n) for w, n in truth.items() if sink.last.get(w) != n}
        check = "exactly-once check" if guarantee == "exactly_once" else "count check"
        print(
            f"{check}: {'OK' if exact else 'FAILED'}: {sink.total:,} committed sink records "
            f"(want {words:,}), {len(sink.last):,} words; every word's counts 1..n with n its true count: "
            f"{'yes' if not sink.wrong and not bad else 'no'}"
        )
        if not exact:
            print(
                f"  out of sequence: {sink.wrong}; "
                f"wrong final counts (got, want): {dict(list(bad.items())[:10])}"
            )
        if any(rc != 0 for rc in codes.values()):
            print(f"job exit codes: {codes}")
            for job in jobs:
                print(job.tail())
        result.ok = exact and all(rc == 0 for rc in codes.values())
        return result
    finally:
        for job in jobs:
            if job.proc.poll() is None:
                job.stop(10)
        if scraper is not None and scraper.is_alive():
            scraper.stop()
        if sink is not None:
            sink.close()
        admin.delete_topics([t for t in admin.metadata().topics if run_id in t])
        admin.close()


def report(
    args: argparse.Namespace,
    words: int,
    distinct: int,
    result: Result,
    scraper: AlignmentScraper,
    exactly_once: bool,
) -> None:
    total_s, steady_s = result.total_s, result.steady_s
    print(f"{args.lines:,} lines, {words:,} words, {distinct:,} distinct words:")
    print(f"  end to end (both jobs started -> every final count committed in the sink): {total_s:.2f} s")
    print(f"  steady (both jobs running tasks -> every final count committed in the sink): {steady_s:.2f} s")
    paced = f" (input fed at {args.rate:,.0f} lines/s: this is not the capacity)" if args.rate else ""
    print(
        f"pipeline throughput: {words / total_s:,.0f} words/s, "
        f"{args.lines / total_s:,.0f} lines/s (end to end){paced}"
    )
    print(f"  steady: {words / steady_s:,.0f} words/s, {args.lines / steady_s:,.0f} lines/s")
    if not exactly_once:
        return
    waits = scraper.waits()
    if not waits:
        print(f"p99 alignment wait: n/a (no version aligned in job 2; {scraper.scrapes} scrapes)")
        return
    versions = sum(scraper.gauges.get(VERSIONS_COMMITTED, {}).values())
    duplicates = sum(scraper.gauges.get(DUPLICATES_DROPPED, {}).values())
    print(f"p99 alignment wait: {quantile(waits, 0.99) * 1000:.1f} ms")
    print(
        f"  job 2, {len(waits)} versions over {len(scraper.tasks)} tasks: "
        f"p50 {quantile(waits, 0.5) * 1000:.1f} ms, "
        f"mean {scraper.sum_seconds / len(waits) * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms; "
        f"{scraper.merged_windows} scrape windows held more than one version (their max counted for each)"
    )
    print(
        f"  job 2: {versions:.0f} versions committed, {duplicates:.0f} duplicates "
        f"dropped, peak {scraper.peak_buffered:.0f} early arrivals buffered on disk"
    )
    print(
        f"  {scraper.scrapes} scrapes every {SCRAPE_S * 1000:.0f} ms, slowest answer "
        f"{scraper.slowest_s * 1000:.0f} ms, {scraper.failed} failed"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=300_000, help="input lines (1 to 9 words each)")
    parser.add_argument("--vocabulary", type=int, default=1000, help="distinct words (skewed use)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of lines, words and sink")
    parser.add_argument("--containers", type=int, default=1, help="containers per job")
    parser.add_argument("--commit-ms", type=int, default=1000, help="task.commit.ms: version cut interval")
    parser.add_argument("--no-changelog", action="store_true", help="job 2's store without a changelog")
    parser.add_argument(
        "--guarantee",
        choices=("exactly_once", "at_least_once", "both"),
        default="exactly_once",
        help="both jobs' job.processing.guarantee; both: the same pipeline under each, and their ratio",
    )
    parser.add_argument(
        "--samsa-config", action="append", default=[], metavar="KEY=VALUE", help="extra config for both jobs"
    )
    parser.add_argument("--metrics-port", type=int, help="job 2's Prometheus port (default: a free one)")
    parser.add_argument(
        "--rate",
        type=float,
        default=0,
        help="feed the lines at this many lines/s while the jobs run (default: all before the start)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=600, help="give up after this many seconds")
    parser.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    parser.add_argument("--progress", action="store_true", help="print the sink's progress every 5 s")
    parser.add_argument("--verbose", action="store_true", help="echo the jobs' logs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-pipeline-"))
    broker = None if args.bootstrap else EmbeddedBroker(data_dir=work / "broker").start()
    bootstrap = args.bootstrap or (broker.bootstrap_servers if broker else "")
    run_id = f"pipe{int(time.time())}"
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    try:
        started = time.monotonic()
        lines, truth = make_lines(args.lines, args.vocabulary, args.seed)
        lines_topic: str | None = None
        if args.rate:
            print(
                f"{args.lines:,} lines ({sum(truth.values()):,} words, {len(truth):,} distinct), fed at "
                f"{args.rate:,.0f} lines/s while the jobs run ({args.partitions} partitions)"
            )
        else:
            lines_topic = f"lines-{run_id}"
            admin.ensure_topic(lines_topic, args.partitions)
            produce_lines(bootstrap, lines_topic, lines, args.partitions)
            print(
                f"produced {args.lines:,} lines ({sum(truth.values()):,} words, {len(truth):,} distinct) to "
                f"{lines_topic} ({args.partitions} partitions) in {time.monotonic() - started:.1f} s"
            )
        guarantees = ("at_least_once", "exactly_once") if args.guarantee == "both" else (args.guarantee,)
        results = {}
        for i, guarantee in enumerate(guarantees):
            result = run_pipeline(
                args, bootstrap, work, f"{run_id}_{i}", lines_topic, lines, truth, guarantee
            )
            if result is None or not result.ok:
                return 1
            results[guarantee] = result
        if len(results) == 2:
            alos, eos = results["at_least_once"], results["exactly_once"]
            print(
                f"\npipeline exactly-once/at-least-once throughput ratio: {alos.steady_s / eos.steady_s:.2f} "
                f"steady, {alos.total_s / eos.total_s:.2f} end to end"
            )
        return 0
    finally:
        admin.delete_topics([t for t in admin.metadata().topics if run_id in t])
        admin.close()
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
