"""A container's start and stop with its stores on S3, against its task count: does a restart grow with it?

Prints figures; it is not a test: `python bench/s3_start.py` (see bench/README.md).
Each restart of an S3-backed job makes round trips per task: at start, read each snapshot index, download
the files, finish the checkpointed snapshot's cleanup (read tags, delete dropped blobs), then the start-up
commit (upload the reopened store's new files and index, make them permanent, delete the dropped ones);
at stop, the final commit again. Against S3 each round trip is tens of milliseconds, so what matters is
whether the tasks make theirs at the same time or one after the other.

Set-up: the embedded broker; moto's S3 server in a subprocess behind a proxy (`tests/support`) that holds
every request `--latency-ms` before forwarding it (a remote store's round trip); a word count whose
counts store is backed up to the blob store only. Per task count (`--tasks`, one topic partition per
task, one container): a first run fills and commits the stores, then `--repeat` restarts, each on a new
host (an empty state dir: every store comes back from S3), timed: `Container.start()` (restore + start-up
commit) and `finish()` (final commit). The baseline is the first task count, measured in the same run.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

# bench/ is not part of the package: moto, boto3 and the test proxy are used directly.
import boto3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from faulty_proxy import FaultyProxy
from moto_server import FAKE_ENVIRONMENT, UNSET, MotoProcess
from testrunner import job_config

from samsa.examples.wordcount.generator import WORDS
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator

BUCKET = "samsa-bench-start"


def s3_job_config(bootstrap: str, endpoint: str, topic: str, state: Path) -> dict[str, str]:
    """The word count of `testrunner.py` over `topic`, its counts store backed up to S3 only."""
    config = job_config(bootstrap, topic, f"{topic}-counts", state)
    return {
        **config,
        "stores.counts.backup.factories": "blobstore",
        "blobstore.s3.bucket": BUCKET,
        "blobstore.s3.prefix": f"bench/{config['job.id']}",
        "blobstore.s3.endpoint.url": endpoint,
        "blobstore.s3.region": "us-east-1",
    }


def run_once(config: dict[str, str]) -> tuple[float, float]:
    """One container from start to finish over the inputs; returns (start seconds, finish seconds)."""
    job = JobConfig(Config(config))
    (model,) = JobCoordinator(job).prepare().containers
    container = Container(job, model, until_caught_up=True)
    t0 = time.monotonic()
    loop = container.start()
    started = time.monotonic() - t0
    assert loop is not None
    loop.run()
    t1 = time.monotonic()
    container.finish()
    return started, time.monotonic() - t1


def bench_tasks(
    args: argparse.Namespace, bootstrap: str, proxy: FaultyProxy, tasks: int, work: Path
) -> tuple[float, float, float]:
    """Median (start s, finish s, requests per restart) over `--repeat` restarts on new hosts."""
    topic = f"s3start-{tasks}-{uuid.uuid4().hex[:6]}"
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(topic, tasks)
        admin.create_topic(f"{topic}-counts", 1)
    try:
        producer = KafkaProducer({"bootstrap.servers": bootstrap})
        rng = random.Random(tasks)
        for _ in range(args.words):
            word = rng.choice(WORDS).encode()
            producer.send(topic, word, key=word)
        producer.close()
        config = s3_job_config(bootstrap, proxy.url, topic, work / f"host-{tasks}-first")
        run_once(config)  # fills and commits the stores
        starts, finishes, requests = [], [], []
        for i in range(args.repeat):
            host = work / f"host-{tasks}-{i}"
            before = proxy.forwarded
            start_s, finish_s = run_once({**config, "job.logged.store.base.dir": str(host)})
            starts.append(start_s)
            finishes.append(finish_s)
            requests.append(proxy.forwarded - before)
            shutil.rmtree(host)
        print(
            f"  {tasks:>3} task(s): start {statistics.median(starts):.3f} s "
            f"(runs {', '.join(f'{x:.3f}' for x in starts)}), finish {statistics.median(finishes):.3f} s, "
            f"{statistics.median(requests):.0f} S3 requests per restart"
        )
        return statistics.median(starts), statistics.median(finishes), statistics.median(requests)
    finally:
        with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
            admin.delete_topics([topic, f"{topic}-counts"])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", default="1,4,8", help="task counts; the first is the baseline")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added to every S3 request (20)")
    parser.add_argument("--repeat", type=int, default=3, help="restarts per task count; medians reported")
    parser.add_argument("--words", type=int, default=2000, help="input messages per task count (2000)")
    args = parser.parse_args()
    counts = [int(x) for x in args.tasks.split(",")]
    for name in UNSET:
        os.environ.pop(name, None)
    os.environ.update(FAKE_ENVIRONMENT)
    logging.basicConfig(level=logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-s3start-"))
    try:
        with (
            MotoProcess() as moto,
            EmbeddedBroker(work / "broker") as broker,
            FaultyProxy(moto.url, 0.0, latency_s=args.latency_ms / 1000) as proxy,
        ):
            boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1").create_bucket(Bucket=BUCKET)
            print(
                f"restart on a new host, stores on S3 (moto + {args.latency_ms:g} ms per request), "
                f"{args.words} words, medians of {args.repeat}:"
            )
            figures = {n: bench_tasks(args, broker.bootstrap_servers, proxy, n, work) for n in counts}
        base_start, base_finish, _ = figures[counts[0]]
        for n in counts[1:]:
            start_s, finish_s, _ = figures[n]
            print(
                f"  {n} tasks vs {counts[0]}: start {start_s / base_start:.2f}x, finish "
                f"{finish_s / base_finish:.2f}x (one task after the other would be about {n / counts[0]:g}x)"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
