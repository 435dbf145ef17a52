"""State bootstrap on Spark against loading the same rows through the changelog: rows/s of each, and ratio.

The headline is a blob-store-backed store (the embedded local-dir blob store): the bootstrap ingests the
SST files and uploads the store as its snapshot. The changelog-backed bootstrap, which must also write
every row to the changelog, is the second line. The baseline produces the rows to a changelog and
restores every task's store from it, as a container start would.

Prints figures; it is not a test: `python bench/bootstrap.py --rows 1000000` (see bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from samsa.deploy.bootstrap import BootstrapRequest, _TaskStates, bootstrap_state
from samsa.deploy.spark import Spark, run_bootstrap
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker
from samsa.kafka.partitioner import partition_for
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator
from samsa.stores.rocksdb import RocksDbStore

STORE = "bench"


def rows(n: int, width: int) -> list[tuple[str, str]]:
    """(key-<i>, a value of `width` random letters); the same rows on both sides."""
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    pool = "".join(rng.choice(letters) for _ in range(width + 4096))
    return [(f"key-{i:010d}", pool[i % 4096 : i % 4096 + width]) for i in range(n)]


def job_config(bootstrap: str, work: Path, inputs: str, backend: str = "changelog") -> dict[str, str]:
    """The bench job; `backend`: `changelog` (the store's changelog topic) or `blobstore` (a local dir)."""
    run = uuid.uuid4().hex[:8]
    backed = (
        {f"stores.{STORE}.changelog": f"kafka.{inputs}-changelog-{run}"}
        if backend == "changelog"
        else {
            f"stores.{STORE}.backup.factories": "blobstore",
            "blobstore.local.dir": str(work / run / "blobs"),
        }
    )
    return {
        "job.name": f"bench-bootstrap-{run}",
        "task.class": "samsa.examples.wordcount.task:WordCount",
        "task.inputs": f"kafka.{inputs}",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "job.logged.store.base.dir": str(work / run / "state"),
        "job.non-logged.store.base.dir": str(work / run / "state"),
        f"stores.{STORE}.factory": "rocksdb",
        f"stores.{STORE}.key.serde": "string",
        f"stores.{STORE}.msg.serde": "string",
        **backed,
    }


def spark_side(spark: Spark, config: dict[str, str], source: str, label: str) -> float:
    """`samsa state bootstrap` as the command runs it, the Spark session already up: seconds."""
    job = JobConfig(Config(config))
    request = BootstrapRequest(STORE, source, "parquet", "key", ("value",), "earliest")
    started = time.perf_counter()
    summary = bootstrap_state(
        job, request, lambda plan, done: run_bootstrap(spark, plan, done), lambda _: None
    )
    took = time.perf_counter() - started
    print(f"  {label}: {summary.rows:,} rows in {took:.2f} s")
    return took


def changelog_side(config: dict[str, str], data: list[tuple[str, str]], partitions: int) -> float:
    """The rows produced to the store's changelog (each to its key's task partition), then restored into
    every task's store as a container start restores them: seconds for both."""
    job = JobConfig(Config(config))
    coordinator = JobCoordinator(job)
    model = coordinator.prepare()  # creates the changelog, untimed
    topic = config[f"stores.{STORE}.changelog"].split(".", 1)[1]
    started = time.perf_counter()
    producer = KafkaProducer(
        {
            "bootstrap.servers": config["systems.kafka.bootstrap.servers"],
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    send = producer.send
    for key, value in data:
        k = key.encode()
        send(topic, value.encode(), k, partition_for(k, partitions))
    producer.flush(300)
    producer.close()
    produced = time.perf_counter()
    with _TaskStates(job, list(model.tasks)):
        pass  # entering restores every task's stores from the changelog (no checkpoint: all of it)
    took = time.perf_counter() - started
    print(f"  changelog: produce {produced - started:.2f} s + restore {took - (produced - started):.2f} s")
    return took


def check(config: dict[str, str], data: list[tuple[str, str]], partitions: int) -> None:
    """Every row in the store of the task owning its key's partition, with its value."""
    job = JobConfig(Config(config))
    held = 0
    sample = dict(random.Random(2).sample(data, min(2000, len(data))))
    for p in range(partitions):
        db = RocksDbStore(job.logged_store_dir / job.job_key / f"Partition_{p}" / STORE, name=STORE)
        try:
            for key, value in db.all():
                assert partition_for(key, partitions) == p
                held += 1
                want = sample.get(key.decode())
                assert want is None or want == value.decode()
        finally:
            db.close()
    assert held == len(data), f"{held} rows held, {len(data)} expected"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4, help="input partitions = tasks")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--master", default="local[*]", help="Spark master (default: every core)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: an embedded broker)")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="bench-bootstrap-"))
    broker = None if args.bootstrap else EmbeddedBroker(data_dir=work / "broker").start()
    servers = args.bootstrap or broker.bootstrap_servers  # type: ignore[union-attr]
    admin = KafkaAdmin({"bootstrap.servers": servers})
    inputs = f"bench-input-{uuid.uuid4().hex[:8]}"
    admin.create_topic(inputs, args.partitions)
    made = [inputs]
    try:
        data = rows(args.rows, args.value_bytes)
        started = time.perf_counter()
        spark = Spark("samsa-bench-bootstrap", args.master, {"spark.sql.shuffle.partitions": "8"})
        session_s = time.perf_counter() - started
        source = str(work / "rows.parquet")
        spark.sql().createDataFrame(data, "key string, value string").write.parquet(source)
        print(
            f"{args.rows:,} rows x {args.value_bytes} B values, {args.partitions} tasks; "
            f"Spark session up in {session_s:.1f} s (master {args.master})"
        )
        # The first bootstrap of a session pays for the Python workers' start and the JVM's warm-up.
        config = job_config(servers, work, inputs, "blobstore")
        cold = spark_side(spark, config, source, "spark, blob store, first run (cold, not counted)")
        check(config, data, args.partitions)
        sides: dict[str, list[float]] = {"blobstore": [], "spark-changelog": [], "changelog": []}
        for turn in range(args.repeat):
            order = list(sides) if turn % 2 == 0 else list(reversed(sides))
            for side in order:
                backend = "blobstore" if side == "blobstore" else "changelog"
                config = job_config(servers, work, inputs, backend)
                if side != "blobstore":
                    made.append(config[f"stores.{STORE}.changelog"].split(".", 1)[1])
                if side == "changelog":
                    sides[side].append(changelog_side(config, data, args.partitions))
                else:
                    sides[side].append(spark_side(spark, config, source, f"spark, {side}"))
                check(config, data, args.partitions)
        spark.stop()
        b, s, c = (statistics.median(sides[side]) for side in ("blobstore", "spark-changelog", "changelog"))
        n = args.rows
        print(f"\nmedians of {args.repeat}:")
        print(f"  spark bootstrap, blob-store-backed store   {n / b:>10,.0f} rows/s  ({b:.2f} s)")
        print(f"  spark bootstrap, changelog-backed store    {n / s:>10,.0f} rows/s  ({s:.2f} s)")
        print(f"  through the changelog (produce + restore)  {n / c:>10,.0f} rows/s  ({c:.2f} s)")
        print(f"  blob-store bootstrap / changelog           {c / b:>10.2f} x  (target >= 10x)")
        print(f"  changelog bootstrap / changelog            {c / s:>10.2f} x")
        print(
            f"  blob-store bootstrap, first run of the session (cold): {n / cold:,.0f} rows/s "
            f"({cold:.2f} s); with the session start: {n / (cold + session_s):,.0f} rows/s "
            f"({c / (cold + session_s):.2f} x)"
        )
    finally:
        admin.delete_topics(made)
        admin.close()
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
