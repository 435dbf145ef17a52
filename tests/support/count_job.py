"""The word-count test job (`samsa_test_tasks:CountTask` with a RocksDB store `counts`) and its checks."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer
from samsa.stores.rocksdb import RocksDbStore

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "sloe"]


def committed_rows(bootstrap: str, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    """The committed records of partition 0 of `topic` (read past transaction markers to the end)."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    tp = (topic, 0)
    try:
        end = consumer.watermarks(tp)[1]
        consumer.assign({tp: OFFSET_BEGINNING})
        rows: list[tuple[int, int, bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while consumer.position([tp]).get(tp, -1) < end and time.monotonic() < deadline:
            rows += [(0, m.offset(), m.key(), m.value()) for m in consumer.consume(1000, 0.2)]
        assert consumer.position([tp]).get(tp, -1) >= end, f"could not read {topic} to its end"
        return rows
    finally:
        consumer.close()


def final_counts(rows: list[tuple[int, int, bytes, bytes]]) -> dict[str, int]:
    """The last count sent per word (outputs may repeat after a crash: the last one is the state)."""
    last: dict[str, int] = {}
    for _, _, key, value in sorted(rows, key=lambda r: (r[0], r[1])):
        last[key.decode()] = struct.unpack(">q", value)[0]
    return last


def count_job(
    job_config: Callable[..., dict[str, str]], words: str, out: str, **extra: str
) -> dict[str, str]:
    """One container counting `words` into the RocksDB store `counts`, sending each count to `out`."""
    return job_config(
        f"kafka.{words}",
        out,
        task="samsa_test_tasks:CountTask",
        **{
            "job.container.count": "1",
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.object.cache.size": "8",
            "stores.counts.write.batch.size": "4",
            **extra,
        },
    )


def store_counts(store_dir: Path) -> Counter[str]:
    """The counts a `counts` RocksDB dir holds."""
    db = RocksDbStore(store_dir, name="counts")
    try:
        return Counter({k.decode(): struct.unpack(">q", v)[0] for k, v in db.all()})
    finally:
        db.close()


def run_cli(job_file: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """`samsa run <job> --until-caught-up <extra>` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", str(job_file), "--until-caught-up", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def s3_counts_job(
    job_config: Callable[..., dict[str, str]], words: str, out: str, bucket: str, endpoint: str
) -> dict[str, str]:
    """The counting job over `words`, its counts store backed up to S3 only (moto at `endpoint`)."""
    return job_config(
        f"kafka.{words}",
        out,
        task="samsa_test_tasks:CountTask",
        **{
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.backup.factories": "blobstore",
            "blobstore.s3.bucket": bucket,
            "blobstore.s3.endpoint.url": endpoint,
            "blobstore.s3.region": "us-east-1",
        },
    )
