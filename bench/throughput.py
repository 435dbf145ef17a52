"""Throughput of Samsa's word count against a hand-written confluent-kafka + RocksDB loop doing the same work.

Prints figures; it is not a test. `python bench/throughput.py --messages 300000` (see bench/README.md).
With `--changelog`, the store is changelog-backed and the raw loop also produces one changelog record per put.
With `--guarantee exactly_once` the Samsa runs use `job.processing.guarantee=exactly_once`; with `both`, each
Samsa variant runs under both guarantees and the exactly-once/at-least-once throughput ratio is printed.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# bench/ is not part of the package, so the one-module-per-library rule does not hold here: the raw
# baseline talks to confluent_kafka and rocksdict directly, as a user writing it by hand would.
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from rocksdict import Options, Rdict

from samsa.examples.wordcount.demo import read_counts, wordcount_command
from samsa.examples.wordcount.generator import produce_words
from samsa.kafka import OFFSET_BEGINNING as FROM_START
from samsa.kafka import KafkaAdmin, KafkaConsumer
from samsa.kafka.config import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS
from samsa.kafka.embedded import EmbeddedBroker
from samsa.serde.registry import SerdeRegistry
from samsa.stores.changelog.settings import ChangelogSettings

JOB = Path(__file__).resolve().parent.parent / "examples" / "wordcount" / "job.yaml"
PARTITIONS = 4
LONG = struct.Struct(">q")  # samsa's `long` serde: 8-byte big-endian
BATCH = 2000  # messages per consume() call, as Samsa's run loop asks
EXACTLY_ONCE = "job.processing.guarantee=exactly_once"


@dataclass
class Timing:
    """One run: seconds from start to done (end-to-end) and from the first message to done (steady)."""

    end_to_end: float
    steady: float
    changelog_records: int | None = None  # with --changelog: records the run wrote to its changelog


def raw_run(bootstrap: str, topic: str, out_topic: str, db_dir: Path, changelog: str | None) -> Timing:
    """Consume every partition from the start, count each word in RocksDB, emit (word, count); flush.
    With `changelog`, each put is also sent there, to the input's partition (a hand-written changelog)."""
    started = time.monotonic()
    consumer = Consumer({**CONSUMER_DEFAULTS, "bootstrap.servers": bootstrap})
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap})
    db = Rdict(str(db_dir), Options(raw_mode=True))
    remaining = 0
    for p in range(PARTITIONS):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        remaining += high - low
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    get, put, produce, pack, unpack = db.get, db.put, producer.produce, LONG.pack, LONG.unpack
    first: float | None = None
    try:
        while remaining > 0:
            msgs = consumer.consume(BATCH, 0.1)
            if not msgs:
                continue
            if first is None:
                first = time.monotonic()
            for msg in msgs:
                if msg.error() is not None:
                    raise RuntimeError(f"consumer error: {msg.error()}")
                word = (msg.key() or b"").decode()  # the generator always sets the key
                key = word.encode()
                old = get(key)
                value = pack((0 if old is None else unpack(old)[0]) + 1)
                put(key, value)
                while changelog is not None:
                    try:
                        produce(changelog, value, key, msg.partition() or 0)
                        break
                    except BufferError:
                        producer.poll(0.1)
                while True:
                    try:
                        produce(out_topic, value, key)
                        break
                    except BufferError:  # local queue full: serve delivery reports until there is room
                        producer.poll(0.1)
            remaining -= len(msgs)
            producer.poll(0)
        if producer.flush(60) > 0:
            raise RuntimeError(f"raw producer: messages to {out_topic} still undelivered after 60 s")
    finally:
        consumer.close()
        db.close()
    done = time.monotonic()
    return Timing(done - started, done - (first or started))


def samsa_run(
    bootstrap: str,
    topic: str,
    out_topic: str,
    work: Path,
    run_id: str,
    containers: int,
    extra: list[str],
    verbose: bool,
) -> Timing:
    """`samsa run job.yaml --until-caught-up` as a user runs it (supervisor + container processes).

    Steady time: from the first container's "running tasks" log line (run loop about to start: tasks built,
    stores open, consumers assigned) to the last "container N finished" line of the supervisor.
    """
    cmd = wordcount_command(
        bootstrap, topic, out_topic, run_id, work / "state", [f"job.container.count={containers}", *extra]
    )
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    loop_start: float | None = None
    finished: float | None = None
    lines: list[str] = []
    for line in proc.stdout:
        now = time.monotonic()
        lines.append(line)
        if verbose:
            print("    " + line, end="")
        if loop_start is None and " running tasks " in line:
            loop_start = now
        elif "samsa.deploy.local: container" in line and line.rstrip().endswith("finished"):
            finished = now
    rc = proc.wait()
    done = time.monotonic()
    if rc != 0 or loop_start is None:
        sys.stdout.write("".join(lines[-40:]))
        raise RuntimeError(f"samsa run exited with {rc} (loop started: {loop_start is not None})")
    return Timing(done - started, (finished or done) - loop_start)


def output_count(bootstrap: str, topic: str) -> int:
    """Messages in `topic` (sum of high - low watermarks)."""
    consumer = Consumer({**CONSUMER_DEFAULTS, "bootstrap.servers": bootstrap})
    try:
        total = 0
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def committed_output(bootstrap: str, topic: str) -> tuple[int, dict[str, int]]:
    """Records of `topic` a read_committed consumer sees, and the last count per word among them.

    An exactly-once sink's partitions end with transaction markers, which take offsets but are never
    delivered: read up to each partition's end by the consumer's position, not by the last record's offset.
    """
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    long_serde = SerdeRegistry({}).get("long")
    try:
        ends = {(topic, p): consumer.watermarks((topic, p))[1] for p in range(PARTITIONS)}
        ends = {tp: end for tp, end in ends.items() if end > 0}
        consumer.assign({tp: FROM_START for tp in ends})
        total, counts = 0, {}
        deadline = time.monotonic() + 60
        while any(consumer.position([tp]).get(tp, -1) < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: not read to its end offsets {ends} within 60 s")
            for msg in consumer.consume(BATCH, 0.1):
                total += 1
                key, value = msg.key(), msg.value()
                if key is not None and value is not None:
                    counts[key.decode()] = long_serde.from_bytes(value)
        return total, counts
    finally:
        consumer.close()


@dataclass
class Side:
    """One measured side: its name in the output, its run (to a given output topic), its topics' prefix."""

    name: str
    run: Callable[[str], Timing]
    out_prefix: str
    committed: bool = False  # an exactly-once sink: counted and read as a read_committed consumer sees it


def measure(
    sides: list[Side],
    bootstrap: str,
    admin: KafkaAdmin,
    expected: dict[str, int],
    n: int,
    repeat: int,
) -> list[Timing]:
    """Run each side `repeat` times, each to a fresh output topic; check the output; return each side's
    median timing. Several sides take turns (run i of each before any run i + 1), so that a busy spell of
    the machine falls on all of them alike."""
    timings: list[list[Timing]] = [[] for _ in sides]
    for i in range(repeat):
        for side, done in zip(sides, timings, strict=True):
            out_topic = f"{side.out_prefix}-{i}"
            admin.ensure_topic(out_topic, PARTITIONS)
            t = side.run(out_topic)
            if side.committed:
                got, counts = committed_output(bootstrap, out_topic)
            else:
                got = output_count(bootstrap, out_topic)
                counts = read_counts(bootstrap, out_topic, PARTITIONS)
            if got != n or counts != expected:
                raise RuntimeError(
                    f"{side.name} run {i}: {got} output messages (want {n}); "
                    f"final counts ok: {counts == expected}"
                )
            logged = "" if t.changelog_records is None else f", {t.changelog_records} changelog records OK"
            print(
                f"  {side.name} run {i}: {n / t.end_to_end:>9,.0f} msg/s end-to-end ({t.end_to_end:.2f} s), "
                f"{n / t.steady:>9,.0f} msg/s steady ({t.steady:.2f} s); {got} outputs OK{logged}"
            )
            done.append(t)
    return [
        Timing(statistics.median(t.end_to_end for t in ts), statistics.median(t.steady for t in ts))
        for ts in timings
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--containers", type=int, default=1, help="Samsa containers (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side; the median is reported")
    parser.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    parser.add_argument(
        "--samsa-config", action="append", default=[], metavar="KEY=VALUE", help="extra job config for (b)"
    )
    parser.add_argument("--verbose", action="store_true", help="echo the Samsa job's log")
    parser.add_argument(
        "--changelog", action="store_true", help="changelog-backed store; the raw loop produces it too"
    )
    parser.add_argument(
        "--guarantee",
        choices=("at_least_once", "exactly_once", "both"),
        default="at_least_once",
        help="the Samsa runs' job.processing.guarantee; both: each variant under both, and their ratio",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-"))
    broker = None if args.bootstrap else EmbeddedBroker(data_dir=work / "broker").start()
    bootstrap = args.bootstrap or (broker.bootstrap_servers if broker else "")
    run_id = f"bench{int(time.time())}"
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    n = args.messages
    try:
        topic = f"words-{run_id}"
        admin.ensure_topic(topic, PARTITIONS)
        t0 = time.monotonic()
        expected = produce_words(bootstrap, topic, n)
        print(f"produced {n:,} words to {topic} ({PARTITIONS} partitions) in {time.monotonic() - t0:.1f} s")
        counter = itertools.count()

        def changelog_topic(i: int) -> str | None:
            """A fresh changelog per run, made as Samsa makes one (a used one would restore into a job)."""
            if not args.changelog:
                return None
            name = f"counts-changelog-{run_id}-{i}"
            admin.ensure_topic(name, PARTITIONS, ChangelogSettings.of("counts", {}).topic_config())
            return name

        def checked(t: Timing, changelog: str | None) -> Timing:
            """`t` with the changelog's record count, once its last value per word is the final count."""
            if changelog is None:
                return t
            if read_counts(bootstrap, changelog, PARTITIONS) != expected:
                raise RuntimeError(f"changelog {changelog}: the last value per word is not its count")
            return Timing(t.end_to_end, t.steady, output_count(bootstrap, changelog))

        def raw(out: str) -> Timing:
            i = next(counter)
            changelog = changelog_topic(i)
            return checked(raw_run(bootstrap, topic, out, work / f"raw-db-{i}", changelog), changelog)

        def samsa(extra: list[str]) -> Callable[[str], Timing]:
            def run(out: str) -> Timing:
                i = next(counter)
                (work / f"samsa-{i}").mkdir()
                changelog = changelog_topic(i)
                logged = [] if changelog is None else [f"stores.counts.changelog=kafka.{changelog}"]
                # Changelog-backed stores live in the logged store dir (default ./state): keep it in work.
                logged += [f"job.logged.store.base.dir={work / f'samsa-{i}' / 'state'}"]
                t = samsa_run(
                    bootstrap,
                    topic,
                    out,
                    work / f"samsa-{i}",
                    f"{run_id}-{i}",
                    args.containers,
                    [*extra, *logged],
                    args.verbose,
                )
                return checked(t, changelog)

            return run

        also = ", + a changelog record per put" if args.changelog else ""
        print(f"(a) raw confluent-kafka + rocksdict loop: RocksDB get + put per message{also}")
        (a,) = measure([Side("raw", raw, f"raw-out-{run_id}")], bootstrap, admin, expected, n, args.repeat)
        # (b) as a user runs it (Samza's default object cache on the store); (b0) with the cache off, so
        # every get and put reaches RocksDB as in (a): the framework's own cost, nothing saved by caching.
        base = {"b": args.samsa_config, "b0": [*args.samsa_config, "stores.counts.object.cache.size=0"]}
        # Under `both`, a variant's at-least-once and exactly-once runs take turns, so that the machine's
        # busy spells (other processes on 2 cores) fall on both guarantees alike.
        results = {}
        for label, extra in base.items():
            variants: dict[str, list[str]] = {}
            if args.guarantee in ("at_least_once", "both"):
                variants[label] = extra
            if args.guarantee in ("exactly_once", "both"):
                variants[f"{label}-eos"] = [*extra, EXACTLY_ONCE]
            for name, config in variants.items():
                shown = f" with {', '.join(config)}" if config else " (default config)"
                print(f"({name}) samsa word count, RocksDB store, {args.containers} container(s){shown}")
            sides = [
                Side(f"samsa {name}", samsa(config), f"samsa-{name}-{run_id}", EXACTLY_ONCE in config)
                for name, config in variants.items()
            ]
            medians = measure(sides, bootstrap, admin, expected, n, args.repeat)
            results.update(zip(variants, medians, strict=True))
        logged = ", changelog on" if args.changelog else ""
        width = max(9, *(len(f"samsa {k}") + 1 for k in results))
        print(f"\nmedian of {args.repeat} run(s), {n:,} messages{logged}:")
        print(f"  {'':<{width}}{'end-to-end msg/s':>18}{'steady msg/s':>16}")
        for name, t in (("raw (a)", a), *((f"samsa {k}", v) for k, v in results.items())):
            print(f"  {name:<{width}}{n / t.end_to_end:>18,.0f}{n / t.steady:>16,.0f}")
        for label, t in results.items():
            ratios = f"{a.end_to_end / t.end_to_end:>18.2f}{a.steady / t.steady:>16.2f}"
            print(f"  {label + '/a':<{width}}{ratios}   (target >= 0.7)")
        if args.guarantee == "both":
            for label in base:
                alos, eos = results[label], results[f"{label}-eos"]
                # msg/s under exactly-once divided by msg/s under at-least-once = ALOS time / EOS time.
                ratios = f"{alos.end_to_end / eos.end_to_end:>18.2f}{alos.steady / eos.steady:>16.2f}"
                print(f"  {label + '-eos/' + label:<{width}}{ratios}   (target >= 0.9)")
            b, b_eos = results["b"], results["b-eos"]
            print(f"\nexactly-once/at-least-once ratio: {b.steady / b_eos.steady:.2f}")
            print(
                f"  (steady msg/s of (b) under each guarantee, default config; end-to-end: "
                f"{b.end_to_end / b_eos.end_to_end:.2f}; target >= 0.9)"
            )
        return 0
    finally:
        names = [t for t in admin.metadata().topics if run_id in t]
        admin.delete_topics(names)
        admin.close()
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
