"""A failure abandons the blob uploads in flight: `task.commit.timeout.ms` bounds a container whose blob
store is down, however long `blobstore.retry.max.duration.ms` lets an upload or a cleanup retry."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from background import Background, wait_for
from count_job import final_counts
from moto_server import fake_credentials

from samsa.checkpoint.commit import CommitFailedError
from samsa.checkpoint.model import CheckpointV2
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager
from samsa.runtime.state import blob_store_settings
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.factory import BlobStoreBackendFactory, open_blob_store
from samsa.stores.blobstore.requests import ABANDON_WAIT_S
from samsa.stores.blobstore.s3 import TTL_TAG_KEY
from samsa.stores.blobstore.settings import BlobStoreSettings
from samsa.stores.blobstore.transfer import BlobTransfer

#: Threads of a container's commits and blob store: none may outlive a failed container.
_STATE_THREADS = ("commit_", "blob-commit", "blob-upload", "blob-download", "backup-init")

#: Which S3 requests an outage refuses, by the commit phase it then lands in (and in no other phase).
_OUTAGES: dict[str, Callable[[str, str], bool]] = {
    # PutObject (blobs and indexes; tags go with the put): uploads only.
    "upload": lambda method, path: method == "PUT" and "tagging" not in path,
    # Tag reads and removals (remove_ttl) and deletes: cleanups only, once the checkpoint is durable.
    "cleanup": lambda method, path: "tagging" in path or method == "DELETE",
}


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
    store: Any = factory._backup_store
    closed = threading.Event()
    close_client = store.client.close

    def recording_close() -> None:
        closed.set()
        close_client()

    monkeypatch.setattr(store.client, "close", recording_close)
    running = [store.put(lambda: BytesIO(b"x"), metadata) for _ in range(2)]
    queued = store.put(lambda: BytesIO(b"x"), metadata)
    time.sleep(0.5)  # the two running ones are retrying by now
    started = time.monotonic()
    factory.close(abandon=True)
    assert time.monotonic() - started < ABANDON_WAIT_S, "close waited beyond the abandoned requests"
    assert queued.cancelled()
    for future in running:
        with pytest.raises(BlobStoreError, match="abandoned"):
            future.result(timeout=0)
    pools = (factory._upload_pool, factory._download_pool, factory._commit_pool)
    assert not [t.name for pool in pools for t in pool._threads if t.is_alive()], "threads left running"
    assert closed.is_set(), "the abandoned factory left its S3 client (and its connections) open"


def _state_threads(before: set[threading.Thread]) -> list[str]:
    return [
        t.name
        for t in threading.enumerate()
        if t not in before and t.is_alive() and t.name.startswith(_STATE_THREADS)
    ]


def _bucket(client: Any, bucket: str) -> dict[str, bool]:
    """Every object key of the bucket -> whether it still carries the TTL tag."""
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    ]
    return {
        key: any(t["Key"] == TTL_TAG_KEY for t in client.get_object_tagging(Bucket=bucket, Key=key)["TagSet"])
        for key in keys
    }


def _live_keys(job: JobConfig) -> set[str]:
    """The object keys of the checkpointed snapshot: its files' blobs and its index."""
    keys: set[str] = set()
    with ThreadPoolExecutor(2) as pool:
        store: Any = open_blob_store(blob_store_settings(job), pool)
        try:
            for task, checkpoint in checkpoint_manager(job).read_last().items():
                assert isinstance(checkpoint, CheckpointV2)
                index_id = checkpoint.state_markers["blobstore"]["counts"]
                base = BlobMetadata.of_store(job.name, job.id, task, "counts")
                index = BlobTransfer(store).get_index(index_id, base)
                keys |= {store.key(b) for b in index.dir_index.present_blobs()} | {store.key(index_id)}
        finally:
            store.close()
    return keys


@pytest.mark.parametrize("phase", ["upload", "cleanup"])
@pytest.mark.parametrize("commit", ["start-up", "timer"])
def test_a_blob_store_outage_during_a_commit_fails_the_container_within_the_commit_timeout(
    job_config, topics, produce, read_topic, run_job, s3_bucket, s3_client, faulty_s3_endpoint, commit, phase
):
    """S3 refuses the requests of one commit phase from a set point on: before the start-up commit (waited
    for by the start), or once the container runs (a timer's commit). Either way the container fails
    after about task.commit.timeout.ms with nothing of it left running, and a restart once S3 is back
    redoes what the failed commit left (a cleanup) and goes on from the checkpoint."""
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
        },
    )
    sent = [f"w{i % 7}" for i in range(100)]
    produce(words, [(w, "x") for w in sent])
    job = JobConfig(Config(config))
    container = Container(job, JobCoordinator(job).prepare().container("0"))
    before = set(threading.enumerate())

    def outage() -> float:
        proxy.targets, proxy.fraction = _OUTAGES[phase], 1.0
        return time.monotonic()

    down = outage() if commit == "start-up" else None
    run = Background(container.run)
    try:
        if down is None:
            # Running: the start-up commit has ended, cleanup included; the next one is a timer's.
            wait_for(lambda: container.status()[0] == "running" or not run.thread.is_alive(), 30, "a start")
            down = outage()
        run.join(30)
        took = time.monotonic() - down
    finally:
        container.stop()
    assert not run.thread.is_alive(), "the container still waits for its blob requests"
    assert isinstance(run.error, CommitFailedError), repr(run.error)
    assert "task.commit.timeout.ms=2000" in str(run.error)
    # The commit timeout, the max delay of a timer's commit, a start's own round trips: nothing near the
    # 120 s the requests could retry for.
    assert took < 10, f"the container failed {took:.1f} s after the outage"
    assert proxy.injected["503"] > 0, "the outage was met"
    wait_for(lambda: not _state_threads(before), 2, "the commit and blob threads to end")

    if commit == "start-up":
        # The outage landed where it was meant to: before the checkpoint, or after it.
        assert bool(checkpoint_manager(job).read_last()) == (phase == "cleanup")
    if phase == "cleanup":
        assert any(_bucket(s3_client, s3_bucket).values()), "the cleanup finished despite the outage"
    proxy.targets, proxy.fraction = None, 0.0
    more = [f"w{i % 5}" for i in range(50)]
    produce(words, [(w, "x") for w in more])
    run_job(config)  # a restart, until caught up
    assert final_counts(read_topic(out)) == Counter(sent + more), "the store went on from the checkpoint"
    stored = _bucket(s3_client, s3_bucket)
    assert set(stored) == _live_keys(job), "the bucket holds the checkpointed snapshot, nothing else"
    assert not any(stored.values()), "every blob of the checkpointed snapshot is permanent"
