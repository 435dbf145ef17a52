"""`samsa state ...` and `samsa blobstore ...` give up soon on an unreachable blob store, naming its
endpoint; the running job keeps its configured retry time."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from io import BytesIO
from typing import IO

import pytest
from moto_server import fake_credentials

from samsa import cli
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.state import blob_store_settings
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.tool import opened_store


def _job(endpoint: str, **extra: str) -> JobConfig:
    config = {
        "job.name": "tools",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.tools-in",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "stores.counts.factory": "rocksdb",
        "stores.counts.backup.factories": "blobstore",
        "blobstore.s3.bucket": "tools",
        "blobstore.s3.endpoint.url": endpoint,
        "blobstore.s3.region": "us-east-1",
    }
    return JobConfig(Config({**config, **{k.replace("__", "."): v for k, v in extra.items()}}))


def _dead_endpoint() -> str:
    """A local port nothing listens on: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_the_tools_retry_at_most_their_own_bound_and_the_job_keeps_its_setting() -> None:
    job = _job("http://127.0.0.1:1")
    assert blob_store_settings(job).retry_max_duration_ms == 900_000  # the running job's default
    assert cli._blob_settings(job).retry_max_duration_ms == cli.TOOL_RETRY_MAX_MS == 30_000
    smaller = _job("http://127.0.0.1:1", blobstore__retry__max__duration__ms="5000")
    assert cli._blob_settings(smaller).retry_max_duration_ms == 5000


@pytest.fixture
def _credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    fake_credentials(monkeypatch)
    yield


@pytest.mark.usefixtures("_credentials")
def test_a_tool_on_an_unreachable_store_gives_up_in_bounded_time_naming_the_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "TOOL_RETRY_MAX_MS", 2000)
    endpoint = _dead_endpoint()
    settings = cli._blob_settings(_job(endpoint))
    metadata = BlobMetadata.of_store("tools", "1", "Partition 0", "counts")
    blob_id = "tools-1/Partition_0/counts/snapshot-index." + "0" * 32

    def sink() -> AbstractContextManager[IO[bytes]]:
        return BytesIO()

    started = time.monotonic()
    with opened_store(settings) as store, pytest.raises(BlobStoreError) as info:
        store.get(blob_id, sink, metadata).result(timeout=60)
    took = time.monotonic() - started
    assert took < 15, f"gave up after {took:.1f} s"
    assert endpoint in str(info.value)
    assert "retry time ran out" in str(info.value)
