"""An S3 test double over real HTTP: moto's server on 127.0.0.1, one per session, a fresh bucket per test.

Import the fixtures into a conftest (with `tests/support` on `sys.path`):
`from moto_server import moto_endpoint, s3_bucket, s3_client`. Fake credentials are set in this process's
environment for the session only, so boto3's standard chain finds them and never a developer's real ones.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer

FAKE_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/samsa-test-aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/samsa-test-aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}
UNSET = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def fake_credentials(patch: pytest.MonkeyPatch) -> None:
    """Puts fake AWS credentials (and no profile or endpoint override) in the environment."""
    for name in UNSET:
        patch.delenv(name, raising=False)
    for name, value in FAKE_ENVIRONMENT.items():
        patch.setenv(name, value)


class MotoServer:
    """moto's S3 server in a thread on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)

    def __enter__(self) -> MotoServer:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    @property
    def url(self) -> str:
        host, port = self._server.get_host_and_port()
        return f"http://{host}:{port}"


class MotoProcess:
    """moto's S3 server in its own process on a free port of 127.0.0.1: for benchmarks, where a server in
    the measured process would take the GIL from the code measured (S3 never shares a container's process)."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self._port: int = s.getsockname()[1]
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> MotoProcess:
        moto = Path(sys.executable).with_name("moto_server")
        self._process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self._port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self._port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"{moto} did not listen on port {self._port} within 30 s")

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"


def plain_client(endpoint: str, **config: Any) -> Any:
    """A plain boto3 S3 client on `endpoint` for tests to look behind a store's back."""
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=Config(**config))


def empty_and_delete(client: Any, bucket: str) -> None:
    """Deletes every object of `bucket`, then the bucket (moto keeps everything in memory)."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=bucket)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server for the session, with fake credentials in the environment."""
    with pytest.MonkeyPatch.context() as patch:
        fake_credentials(patch)
        with MotoServer() as server:
            yield server.url


@pytest.fixture
def s3_client(moto_endpoint: str) -> Any:
    """A plain boto3 client on the moto server."""
    return plain_client(moto_endpoint)


@pytest.fixture
def s3_bucket(s3_client: Any) -> Iterator[str]:
    """A fresh, empty bucket on the moto server, emptied and deleted after the test."""
    name = f"samsa-test-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    yield name
    empty_and_delete(s3_client, name)
