"""Spark's Python workers are warmed for containers: the runtime imported, boto3's S3 models parsed."""

from __future__ import annotations

import pytest

from samsa.deploy import spark
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.state import uses_s3
from samsa.stores.blobstore import s3


def test_a_worker_warmed_for_an_s3_job_makes_its_clients_from_the_parsed_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(s3, "_warm_loader", None)
    spark._import_container_runtime(False, 0)
    assert s3._warm_loader is None, "nothing parsed for a job without S3"
    spark._import_container_runtime(True, 0)
    assert s3._warm_loader is not None
    client = s3.make_client("http://127.0.0.1:9", "us-east-1")
    try:
        assert client._loader is s3._warm_loader  # type: ignore[attr-defined]
    finally:
        client.close()


def _job(**extra: str) -> JobConfig:
    return JobConfig(
        Config(
            {
                "job.name": "warm",
                "task.class": "samsa_test_tasks:Echo",
                "task.inputs": "kafka.in",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "127.0.0.1:1",
                "stores.s.factory": "rocksdb",
                **extra,
            }
        )
    )


def test_only_a_job_backing_stores_up_to_s3_warms_s3() -> None:
    assert not uses_s3(_job())
    assert not uses_s3(_job(**{"stores.s.backup.factories": "blobstore"}))  # the local directory store
    assert not uses_s3(_job(**{"blobstore.s3.bucket": "b"}))  # no store backed up to it
    assert uses_s3(_job(**{"stores.s.backup.factories": "blobstore", "blobstore.s3.bucket": "b"}))
