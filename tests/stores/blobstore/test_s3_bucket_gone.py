"""S3 errors a running container meets: a bucket deleted under it stops it as a config error (no restart
loop); an unreachable endpoint's retries say how long they go on and which key bounds them."""

from __future__ import annotations

import io
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto_server import empty_and_delete

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.exceptions import InvalidConfigError
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.exceptions import BlobStoreError, BucketGoneError
from samsa.stores.blobstore.s3 import S3BlobStore, failure


def _store(bucket: str, endpoint: str, executor: ThreadPoolExecutor, retry_s: float = 5.0) -> S3BlobStore:
    store = S3BlobStore(
        bucket,
        "p",
        executor,
        1,
        endpoint_url=endpoint,
        max_retry_duration_s=retry_s,
        connect_timeout_s=1.0,
        read_timeout_s=5.0,
        initial_retry_delay_s=0.05,
        max_retry_delay_s=0.2,
    )
    store.init()
    return store


META = BlobMetadata("000012.sst", -1, "wordcount", "1", "Partition 0", "counts")


def test_no_such_bucket_on_any_request_is_a_config_error_a_restart_cannot_mend() -> None:
    error = ClientError(
        {
            "Error": {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist"},
            "ResponseMetadata": {"HTTPStatusCode": 404},
        },
        "PutObject",
    )
    mapped = failure("put", "gone-bucket", "p/job-1/blob", error)
    assert isinstance(mapped, BucketGoneError) and isinstance(mapped, InvalidConfigError)
    assert "blobstore.s3.bucket" in str(mapped) and "'gone-bucket'" in str(mapped)
    wrapped = RuntimeError("commit failed")
    wrapped.__cause__ = mapped
    assert unmendable_exit(wrapped) == CONFIG_ERROR_EXIT


def test_a_put_to_a_bucket_deleted_while_the_job_runs_fails_as_a_config_error(
    moto_endpoint: str, s3_client: Any
) -> None:
    bucket = f"samsa-gone-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=bucket)
    with ThreadPoolExecutor(2) as executor:
        store = _store(bucket, moto_endpoint, executor)
        try:
            store.put(lambda: io.BytesIO(b"before"), META).result()
            empty_and_delete(s3_client, bucket)
            with pytest.raises(BucketGoneError, match=f"S3 bucket '{bucket}' does not exist"):
                store.put(lambda: io.BytesIO(b"after"), META).result()
        finally:
            store.close()


def test_retries_of_an_unreachable_endpoint_say_when_they_give_up_and_which_key_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with ThreadPoolExecutor(2) as executor:
        store = _store("any-bucket", "http://127.0.0.1:9", executor, retry_s=1.0)
        try:
            with (
                caplog.at_level(logging.WARNING, logger="samsa.retrying"),
                pytest.raises(BlobStoreError, match="retry time ran out"),
            ):
                store.put(lambda: io.BytesIO(b"x"), META).result()
        finally:
            store.close()
    retries = [r.getMessage() for r in caplog.records if r.name == "samsa.retrying"]
    assert retries
    assert all("giving up in" in m and "(blobstore.retry.max.duration.ms)" in m for m in retries), retries
