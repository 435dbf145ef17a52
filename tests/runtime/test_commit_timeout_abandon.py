"""A failure abandons the blob uploads in flight: `task.commit.timeout.ms` bounds a container whose blob
store is down, however long `blobstore.retry.max.duration.ms` lets an upload retry."""

from __future__ import annotations

import socket
import time
from io import BytesIO
from pathlib import Path

import pytest
from background import wait_for
from moto_server import fake_credentials

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
