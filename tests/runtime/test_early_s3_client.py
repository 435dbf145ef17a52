"""The S3 client of a blob-store job is made on a thread of its own from the container's start: taken by
the restore, or closed when the start ends before it (never leaked, never closed under its taker)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from count_job import WORDS, final_counts, s3_counts_job

import samsa.runtime.container as container_module
import samsa.stores.blobstore.s3 as s3_module
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.metrics import BLOB_CLIENT_WAIT_SECONDS
from samsa.runtime.state import early_s3_client
from samsa.stores.blobstore.exceptions import BlobStoreError
from samsa.stores.blobstore.factory import PendingS3Client
from samsa.stores.blobstore.settings import BlobStoreSettings


class FakeClient:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class Maker:
    """Stands in for `make_client`: each client waits for `release` before it is made."""

    def __init__(self, error: Exception | None = None) -> None:
        self.release = threading.Event()
        self.made: list[FakeClient] = []
        self.threads: list[str] = []
        self.error = error

    def __call__(self, endpoint_url: str | None, region: str | None) -> FakeClient:
        self.threads.append(threading.current_thread().name)
        assert self.release.wait(10)
        if self.error is not None:
            raise self.error
        self.made.append(FakeClient())
        return self.made[-1]


def settings(tmp_path: Path) -> BlobStoreSettings:
    return BlobStoreSettings(
        job_name="j", job_id="1", local_dir=tmp_path, s3_bucket="b", s3_endpoint_url="http://127.0.0.1:9"
    )


@pytest.fixture
def maker(monkeypatch: pytest.MonkeyPatch) -> Maker:
    fake = Maker()
    monkeypatch.setattr(s3_module, "make_client", fake)
    return fake


def wait_closed(client: FakeClient) -> None:
    for _ in range(200):
        if client.closed:
            return
        threading.Event().wait(0.01)


def test_the_taker_gets_the_client_made_on_its_own_thread_and_owns_it(tmp_path: Path, maker: Maker) -> None:
    pending = PendingS3Client(settings(tmp_path))
    maker.release.set()
    client, waited = pending.take()
    assert client is maker.made[0] and waited >= 0
    assert maker.threads == ["s3-client"]
    pending.discard()  # a start's release after the restore took it: the client stays open
    assert client.closed == 0


@pytest.mark.parametrize("made_first", [True, False])
def test_a_start_ending_before_the_restore_closes_the_client_once(
    tmp_path: Path, maker: Maker, made_first: bool
) -> None:
    pending = PendingS3Client(settings(tmp_path))
    if made_first:
        maker.release.set()
        while not maker.made:
            threading.Event().wait(0.01)
    pending.discard()
    pending.discard()
    maker.release.set()
    while not maker.made:
        threading.Event().wait(0.01)
    wait_closed(maker.made[0])
    assert maker.made[0].closed == 1
    with pytest.raises(BlobStoreError, match="already released"):
        pending.take()


def test_the_makers_error_is_raised_where_the_client_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = Maker(ValueError("Invalid endpoint: http://bad host"))
    monkeypatch.setattr(s3_module, "make_client", failing)
    pending = PendingS3Client(settings(tmp_path))
    failing.release.set()
    with pytest.raises(ValueError, match="Invalid endpoint"):
        pending.take()
    pending.discard()  # nothing to close


def test_only_jobs_backed_up_to_s3_make_a_client_early(tmp_path: Path) -> None:
    base = {
        "job.name": "j",
        "task.class": "samsa_test_tasks:CountTask",
        "task.inputs": "kafka.words",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.consumer.bootstrap.servers": "127.0.0.1:9",
        "job.logged.store.base.dir": str(tmp_path),
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "string",
        "serializers.registry.string.class": "string",
    }
    s3 = {"blobstore.s3.bucket": "b", "blobstore.s3.endpoint.url": "http://127.0.0.1:9"}
    assert early_s3_client(JobConfig(Config({**base, **s3}))) is None  # no store backed up to the blob store
    local = {**base, "stores.counts.backup.factories": "blobstore"}
    assert early_s3_client(JobConfig(Config(local))) is None  # the local directory store
    pending = early_s3_client(JobConfig(Config({**local, **s3})))
    assert isinstance(pending, PendingS3Client)
    pending.discard()


def test_a_container_restores_with_the_client_made_while_it_read_its_checkpoints(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    run_job: Any,
    tmp_path: Path,
    s3_bucket: str,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made_on: list[str] = []
    real = s3_module.make_client

    def recording(*args: Any, **kwargs: Any) -> Any:
        made_on.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(s3_module, "make_client", recording)
    words, out = topics(2), topics(2)
    config = s3_counts_job(job_config, words, out, s3_bucket, moto_endpoint)
    sent = WORDS[:5] * 20
    produce(words, [(w, w) for w in sent])
    run_job({**config, "job.logged.store.base.dir": str(tmp_path / "host-1")})
    produce(words, [(w, w) for w in sent])
    made_on.clear()
    (container,) = run_job({**config, "job.logged.store.base.dir": str(tmp_path / "host-2")})  # a new host
    assert final_counts(read_topic(out)) == Counter(sent * 2)  # restored from S3, then counted on
    # The job's preparation checks the bucket's lifecycle rule with a client of its own; the container's
    # client, its only one, is made off its start's path.
    assert made_on == ["MainThread", "s3-client"]
    (row,) = container.registry.snapshot()[BLOB_CLIENT_WAIT_SECONDS]
    assert isinstance(row["value"], float) and row["value"] >= 0


def test_samsa_run_container_hands_the_client_it_started_making_to_the_container(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    tmp_path: Path,
    s3_bucket: str,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from samsa.cli import main

    made: list[tuple[str, Any]] = []
    real = s3_module.make_client

    def recording(*args: Any, **kwargs: Any) -> Any:
        client = real(*args, **kwargs)
        made.append((threading.current_thread().name, client))
        return client

    monkeypatch.setattr(s3_module, "make_client", recording)
    taken: list[Any] = []
    original_take = PendingS3Client.take

    def take(self: PendingS3Client) -> tuple[Any, float]:
        taken.append(original_take(self)[0])
        return taken[-1], 0.0

    monkeypatch.setattr(PendingS3Client, "take", take)

    def not_again(job: Any) -> None:
        raise AssertionError("the container started a client of its own")

    monkeypatch.setattr(container_module, "early_s3_client", not_again)
    words, out = topics(1), topics(1)
    config = s3_counts_job(job_config, words, out, s3_bucket, moto_endpoint)
    produce(words, [(w, w) for w in WORDS[:3]])
    job_file = tmp_path / "job.yaml"  # YAML holds JSON
    job_file.write_text(json.dumps(config))
    assert main(["run", "--container-id", "0", "--until-caught-up", str(job_file)]) == 0
    assert final_counts(read_topic(out)) == Counter(WORDS[:3])
    # One client made on its own thread from the process's start, taken by the container's restore (the
    # job's preparation, in this process too here, checks the bucket with a client of its own).
    ours = [client for thread, client in made if thread == "s3-client"]
    assert len(ours) == 1 and taken == ours
