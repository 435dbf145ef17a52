"""The word count over 100,000 messages as a test: on the TestRunner against the embedded broker.

Prints figures; it is not a test: `python bench/testrunner.py --messages 100000` (see bench/README.md).
Both sides do what a test of the word count does, from nothing to checked counts: the broker side starts
the embedded broker, creates the topics, produces the words, runs the job's container in this process
until caught up and reads the counts back; the TestRunner side builds the same job on the in-memory
system, feeds the same words, runs it and reads the counts.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from samsa.examples.wordcount.demo import read_counts
from samsa.examples.wordcount.generator import WORDS
from samsa.examples.wordcount.task import WordCount
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.testing import TestRunner

PARTITIONS = 4


def words(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


def job_config(bootstrap: str, topic: str, out: str, work: Path) -> dict[str, str]:
    return {
        "job.name": "wordcount",
        "job.id": uuid.uuid4().hex[:8],
        "task.class": "samsa.examples.wordcount.task:WordCount",
        "task.inputs": f"kafka.{topic}",
        "task.outputs": f"kafka.{out}",
        "wordcount.output.stream": out,
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "systems.kafka.samza.offset.default": "oldest",
        f"systems.kafka.streams.{out}.samza.msg.serde": "long",
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "job.non-logged.store.base.dir": str(work / "state"),
        "job.logged.store.base.dir": str(work / "state"),
    }


def broker_side(sent: list[str], work: Path) -> float:
    """A test of the word count against the embedded broker: seconds from nothing to checked counts."""
    started = time.monotonic()
    with EmbeddedBroker(work / f"broker-{uuid.uuid4().hex[:6]}") as broker:
        bootstrap = broker.bootstrap_servers
        topic, out = "words", "counts"
        with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topic(topic, PARTITIONS)
            admin.create_topic(out, 1)
        producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        for word in sent:
            producer.send(topic, word.encode(), key=word.encode())
        producer.close()
        job = JobConfig(Config(job_config(bootstrap, topic, out, work)))
        model = JobCoordinator(job).prepare()
        for container in model.containers:
            Container(job, container, until_caught_up=True).run()
        counts = read_counts(bootstrap, out, 1)
    elapsed = time.monotonic() - started
    check(counts, sent)
    return elapsed


def testrunner_side(sent: list[str], work: Path) -> float:
    """The same test on the TestRunner: seconds from nothing to checked counts."""
    started = time.monotonic()
    with TestRunner.of(WordCount, state_dir=work / f"runner-{uuid.uuid4().hex[:6]}") as runner:
        result = (
            runner.with_config(
                {
                    "wordcount.output.stream": "counts",
                    "systems.kafka.streams.counts.samza.msg.serde": "long",
                    "stores.counts.factory": "rocksdb",
                    "stores.counts.key.serde": "string",
                    "stores.counts.msg.serde": "long",
                    "systems.kafka.samza.key.serde": "string",
                    "systems.kafka.samza.msg.serde": "string",
                }
            )
            .add_input("words", sent, partitions=PARTITIONS)
            .add_output("counts")
            .run(timeout=600)
        )
        counts: dict[str, int] = {}
        for m in result.messages("counts"):
            counts[m.key] = m.value
    elapsed = time.monotonic() - started
    check(counts, sent)
    return elapsed


def check(counts: dict[str, int], sent: list[str]) -> None:
    if counts != dict(Counter(sent)):
        raise SystemExit("the word counts differ from the words sent")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1, help="runs per side; medians reported")
    parser.add_argument("--small", type=int, default=1000, help="also time a unit-test-sized input (0: skip)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-testrunner-"))
    try:
        sizes = [args.messages] + ([args.small] if args.small else [])
        for size in sizes:
            sent = words(size)
            broker_s, runner_s = [], []
            for _ in range(args.repeat):
                broker_s.append(broker_side(sent, work))
                runner_s.append(testrunner_side(sent, work))
            b, r = statistics.median(broker_s), statistics.median(runner_s)
            print(
                f"word count over {size:,} messages, {PARTITIONS} partitions, from nothing to checked counts"
            )
            print(f"  embedded broker: {b:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in broker_s)})")
            print(f"  TestRunner:      {r:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in runner_s)})")
            target = " (expected >= 10x)" if size == args.messages else ""
            print(f"  TestRunner is {b / r:.1f}x faster{target}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
