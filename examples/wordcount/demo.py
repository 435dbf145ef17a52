"""The quick start: embedded broker, 100,000 words, word count with 2 containers, checked totals."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from samsa.examples.demo_kafka import demo_kafka
from samsa.examples.wordcount.generator import produce_words
from samsa.examples.wordcount.task import OUTPUT_STREAM
from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer
from samsa.serde.registry import SerdeRegistry

JOB = Path(__file__).with_name("job.yaml")


def wordcount_command(
    bootstrap: str, words: str, counts: str, job_id: str, state_dir: Path, extra: Sequence[str] = ()
) -> list[str]:
    """`samsa run job.yaml --until-caught-up` for these topics, with `extra` KEY=VALUE overrides."""
    overrides = [
        f"systems.kafka.bootstrap.servers={bootstrap}",
        f"task.inputs=kafka.{words}",
        f"task.outputs=kafka.{counts}",
        # The job.yaml's serde key moves to the renamed output; left set, it names no stream of the job (a
        # start-up warning). A blank value unsets it.
        f"systems.kafka.streams.{OUTPUT_STREAM}.samza.msg.serde=",
        f"systems.kafka.streams.{counts}.samza.msg.serde=long",
        f"wordcount.output.stream={counts}",
        f"job.id={job_id}",
        f"job.non-logged.store.base.dir={state_dir}",
        *extra,
    ]
    return [sys.executable, "-m", "samsa.cli", "run", str(JOB), "--until-caught-up"] + [
        f"--config={item}" for item in overrides
    ]


def read_counts(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    """The last count per word on the output topic."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
    long_serde = SerdeRegistry({}).get("long")
    try:
        ends = {(topic, p): consumer.watermarks((topic, p))[1] for p in range(partitions)}
        consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
        counts: dict[str, int] = {}
        remaining = {tp for tp, end in ends.items() if end > 0}
        deadline = time.monotonic() + 60
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(5000, 0.5):
                key, value = msg.key(), msg.value()
                if key is not None and value is not None:
                    counts[key.decode()] = long_serde.from_bytes(value)
                tp = (msg.topic(), msg.partition())
                if msg.offset() >= ends[tp] - 1:
                    remaining.discard(tp)
        return counts
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--words", type=int, default=100_000)
    parser.add_argument("--work-dir", type=Path, default=Path(".demo"))
    parser.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    args = parser.parse_args()
    with demo_kafka(args.work_dir, args.bootstrap) as bootstrap:
        run_id = str(int(time.time()))
        words, counts_topic = f"words-{run_id}", f"wordcount-counts-{run_id}"
        admin = KafkaAdmin({"bootstrap.servers": bootstrap})
        admin.ensure_topic(words, 4)
        admin.ensure_topic(counts_topic, 4)
        admin.close()
        started = time.monotonic()
        expected = produce_words(bootstrap, words, args.words)
        print(f"produced {args.words} words to {words} in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        cmd = wordcount_command(bootstrap, words, counts_topic, run_id, args.work_dir / "state")
        rc = subprocess.call(cmd, env=os.environ.copy())
        if rc != 0:
            print(f"the job failed with exit code {rc}")
            return rc
        print(f"job caught up in {time.monotonic() - started:.1f} s")
        counts = read_counts(bootstrap, counts_topic, 4)
        print("top words:")
        for word, n in sorted(counts.items(), key=lambda kv: -kv[1])[:10]:
            print(f"  {word:<10} {n}")
        total = sum(counts.values())
        ok = counts == expected and total == args.words
        print(f"total {total} of {args.words} words: {'OK' if ok else 'MISMATCH'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
