"""A failure abandons the blob uploads in flight: `task.commit.timeout.ms` bounds a container whose blob
store is down, however long `blobstore.retry.max.duration.ms` lets an upload retry."""

from __future__ import annotations

import socket
import time
from io import BytesIO
from pathlib import Path

import pytest
from background import Background, wait_for
from moto_server import fake_credentials

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator, client_config
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.factory import BlobStoreBackendFactory
from samsa.stores.blobstore.settings import BlobStoreSettings


def _dead_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_abandoning_the_blob_backend_stops_retrying_uploads_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_credentials(monkeypatch)
    settings = BlobStoreSettings(
        "j",
        "1",
        tmp_path,
        s3_bucket="b",
        s3_endpoint_url=_dead_endpoint(),
        s3_region="us-east-1",
        upload_parallelism=2,
        retry_max_duration_ms=900_000,
    )
    factory = BlobStoreBackendFactory(settings, ["counts"])
    metadata = BlobMetadata.of_store("j", "1", "Partition 0", "counts")
    store = factory._backup_store
    running = [store.put(lambda: BytesIO(b"x"), metadata) for _ in range(2)]
    queued = store.put(lambda: BytesIO(b"x"), metadata)
    time.sleep(0.5)  # the two running ones are retrying by now
    started = time.monotonic()
    factory.close(abandon=True)
    assert time.monotonic() - started < 1.0, "close waited for the uploads"
    assert queued.cancelled()
    for future in running:
        with pytest.raises(BlobStoreError, match="abandoned"):
            future.result(timeout=10)
    wait_for(lambda: not any(t.is_alive() for t in factory._upload_pool._threads), 10, "the upload threads")


@pytest.mark.xfail(
    strict=False,
    reason="known gap (open): when S3 goes down during a commit's cleanup (remove_ttl after the checkpoint "
    "is durable) rather than its upload, the cleanup's retries are not bounded by task.commit.timeout.ms and "
    "the container waits for them (clean-clone CI, 2026-11-24); the upload case passes",
)
def test_a_commit_timeout_with_the_blob_store_down_fails_the_container_promptly(
    job_config, topics, produce, tmp_path, s3_bucket, faulty_s3_endpoint
):
    proxy = faulty_s3_endpoint(0.0, kinds=("503",))
    words, out = topics(1), topics(1)
    config = job_config(
        f"kafka.{words}",
        out,
        task="samsa_test_tasks:CountTask",
        **{
            "task.commit.ms": "200",
            "task.commit.max.delay.ms": "500",
            "task.commit.timeout.ms": "2000",
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.backup.factories": "blobstore",
            "blobstore.s3.bucket": s3_bucket,
            "blobstore.s3.endpoint.url": proxy.url,
            "blobstore.s3.region": "us-east-1",
            # Far beyond the commit timeout (the default is 15 minutes).
            "blobstore.retry.max.duration.ms": "120000",
            "test.sleep.us": "20000",
        },
    )
    job = JobConfig(Config(config))
    container = Container(job, JobCoordinator(job).prepare().container("0"))
    produce(words, [(f"w{i % 7}", "x") for i in range(100)])
    run = Background(container.run)
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    try:
        wait_for(lambda: manager.read_last() != {}, 60, "a first checkpoint")
        proxy.fraction = 1.0  # S3 answers 503 to everything from now on
        down = time.monotonic()
        produce(words, [(f"w{i % 7}", "x") for i in range(2000)])
        run.join(40)
        took = time.monotonic() - down
    finally:
        container.stop()
    assert not run.thread.is_alive(), "the container still waits for its uploads"
    assert run.error is not None and "task.commit.timeout.ms=2000" in str(run.error), repr(run.error)
    assert took < 40
