"""Scale-out of the word count on Spark: throughput per container count, against the local deployment.

Prints figures; it is not a test: `python bench/spark_scale.py --containers 1,2,4,8` (see bench/README.md).
Each container count runs the example word count (examples/wordcount/job.yaml) over the same filled topic,
from the start to the end, once with `job.deploy=local` (a supervisor and N container processes) and once
on Spark (`local[N,1]`: the driver in this process, a Spark task per container). Spark's own start is
timed apart: a job's steady state, not the driver's JVM start, is what scales.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from samsa.deploy.spark import Spark, spark_conf
from samsa.deploy.spark_supervisor import SparkSupervisor
from samsa.examples.wordcount.demo import read_counts
from samsa.examples.wordcount.generator import produce_words
from samsa.kafka import KafkaAdmin
from samsa.kafka.embedded import EmbeddedBroker
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw

JOB = Path(__file__).resolve().parent.parent / "examples" / "wordcount" / "job.yaml"


def job_config(
    bootstrap: str, words: str, counts: str, containers: int, deploy: str, work: Path
) -> dict[str, str]:
    """The example word count on these topics, a fresh job id (so no checkpoint is reused), N containers."""
    run = uuid.uuid4().hex[:8]
    return {
        **{k: str(v) for k, v in load_raw(JOB).items()},
        "systems.kafka.bootstrap.servers": bootstrap,
        "task.inputs": f"kafka.{words}",
        "task.outputs": f"kafka.{counts}",
        f"systems.kafka.streams.{counts}.samza.msg.serde": "long",
        "wordcount.output.stream": counts,
        "job.id": f"{deploy}_{containers}_{run}",  # no '-' in a job.id
        "job.container.count": str(containers),
        "job.deploy": deploy,
        "job.non-logged.store.base.dir": str(work / "state"),
        "job.logged.store.base.dir": str(work / "state"),
    }


def run_local(config: dict[str, str], work: Path) -> float:
    """`samsa run --until-caught-up` (the local supervisor and its container processes): wall seconds."""
    job_file = work / f"{config['job.id']}.yaml"
    job_file.write_text(json.dumps(config))  # JSON is YAML
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "samsa.cli",
            "--log-level",
            "WARNING",
            "run",
            str(job_file),
            "--until-caught-up",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"local run failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return elapsed


def run_spark(config: dict[str, str], spark: Spark) -> float:
    """The Spark driver in this process on a running Spark: wall seconds of the job (coordinator, Spark
    jobs, containers' start, processing, final commits)."""
    started = time.monotonic()
    rc = SparkSupervisor(JobConfig(Config(config)), until_caught_up=True, spark=spark).run()
    elapsed = time.monotonic() - started
    if rc != 0:
        raise SystemExit("spark run failed: see the log above")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--containers", default="1,2,4,8", help="comma list of container counts")
    parser.add_argument("--messages", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=8, help="input partitions (>= the most containers)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side and count; medians reported")
    parser.add_argument("--bootstrap", help="use this Kafka instead of the embedded broker")
    args = parser.parse_args()
    counts_list = [int(c) for c in args.containers.split(",")]
    if max(counts_list) > args.partitions:
        parser.error("--partitions must be at least the largest container count")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = Path(tempfile.mkdtemp(prefix="samsa-spark-scale-"))
    broker = None if args.bootstrap else EmbeddedBroker(work / "broker").start()
    bootstrap = args.bootstrap or (broker.bootstrap_servers if broker else "")
    words, counts = f"words-{uuid.uuid4().hex[:8]}", f"counts-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    try:
        admin.create_topic(words, args.partitions)
        admin.create_topic(counts, 1)
        expected = produce_words(bootstrap, words, args.messages)
        print(f"{args.messages} words in {args.partitions} partitions; {os.cpu_count()} cores")
        header = ("containers", "local msg/s", "spark msg/s", "spark/local", "spark start s")
        print(" ".join(f"{h:>14}" for h in header))
        rates: dict[int, tuple[float, float]] = {}
        for n in counts_list:
            local_s, spark_s = [], []
            started = time.monotonic()
            config = JobConfig(Config(job_config(bootstrap, words, counts, n, "spark", work)))
            spark = Spark(f"samsa-bench-{n}", f"local[{n},1]", spark_conf(config))
            spark.warm_up(n)  # a Spark application starts once and runs its containers for days
            spark_start = time.monotonic() - started
            try:
                for _ in range(args.repeat):
                    local_s.append(run_local(job_config(bootstrap, words, counts, n, "local", work), work))
                    spark_s.append(run_spark(job_config(bootstrap, words, counts, n, "spark", work), spark))
            finally:
                spark.stop()
            local_rate = args.messages / statistics.median(local_s)
            spark_rate = args.messages / statistics.median(spark_s)
            rates[n] = (local_rate, spark_rate)
            row = (f"{n}", f"{local_rate:,.0f}", f"{spark_rate:,.0f}", f"{spark_rate / local_rate:.2f}")
            print(" ".join(f"{c:>14}" for c in (*row, f"{spark_start:.1f}")))
        got = read_counts(bootstrap, counts, 1)
        if got != expected:
            wrong = {w: (got.get(w), n) for w, n in expected.items() if got.get(w) != n}
            raise SystemExit(f"the last run's counts differ from the words sent (got, sent): {wrong}")
        base = counts_list[0]
        for n in counts_list[1:]:
            print(
                f"scale-out {n} vs {base} container(s): spark {rates[n][1] / rates[base][1]:.2f}x, "
                f"local {rates[n][0] / rates[base][0]:.2f}x"
            )
    finally:
        admin.delete_topics([words, counts])
        admin.close()
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
