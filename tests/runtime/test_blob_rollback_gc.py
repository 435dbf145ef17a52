"""`samsa blobstore gc` and the committed snapshots no checkpoint names, on the local dir and on S3 (moto's
server over HTTP), with the real broker: what a rollback to changelog-only leaves goes; what a checkpoint
still names stays, shared blobs included."""

from __future__ import annotations

import io
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from count_job import WORDS, count_job, store_counts
from job_files import write_job_file

from samsa.checkpoint.model import CheckpointV2
from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.runtime.state import blob_store_settings
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.index import FileBlob, FileIndex, FileMetadata, SnapshotIndex
from samsa.stores.blobstore.tool import opened_store
from samsa.stores.blobstore.transfer import BlobTransfer

PREFIX = "jobs"


def _location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    if backend == "local":
        return {"blobstore.local.dir": str(tmp_path / "blobs")}
    return {
        "blobstore.s3.bucket": request.getfixturevalue("s3_bucket"),
        "blobstore.s3.prefix": PREFIX,
        "blobstore.s3.endpoint.url": request.getfixturevalue("moto_endpoint"),
        "blobstore.s3.region": "us-east-1",
    }


def _stored(config: dict[str, str], request: pytest.FixtureRequest) -> dict[str, int]:
    """Every file of the blob store (blob ids, sidecars too in the local dir) -> its size."""
    if "blobstore.s3.bucket" not in config:
        root = Path(config["blobstore.local.dir"])
        return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}
    client = request.getfixturevalue("s3_client")
    stored = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=config["blobstore.s3.bucket"]):
        stored |= {item["Key"][len(PREFIX) + 1 :]: item["Size"] for item in page.get("Contents", [])}
    return stored


def _of_store(stored: dict[str, int], store: str) -> dict[str, int]:
    return {name: size for name, size in stored.items() if f"/{store}/" in name}


def _gc(job_file: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    status = main(["blobstore", "gc", *extra, str(job_file)])
    said = capsys.readouterr().out
    assert status == 0, said
    return said


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_gc_deletes_the_last_snapshot_a_rollback_to_changelog_only_left(
    backend, job_config, topics, produce, run_job, tmp_path, kafka_admin, capsys, request
):
    words, out = topics(2), topics(2)
    changelog = f"{words}-counts-changelog"
    base = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.changelog": f"kafka.{changelog}", **_location(backend, tmp_path, request)},
    )
    dual = {**base, "stores.backup.factories": "changelog,blobstore"}
    rolled_back = {**base, "stores.backup.factories": "changelog"}
    try:
        for step, config in enumerate([dual, dual, rolled_back]):
            produce(words, [(w, w) for w in random.Random(80 + step).choices(WORDS, k=100)])
            run_job(config)
        job = JobConfig(Config(rolled_back))
        last = checkpoint_manager(job).read_last()
        assert all(isinstance(c, CheckpointV2) and "blobstore" not in c.state_markers for c in last.values())
        left = _of_store(_stored(rolled_back, request), "counts")
        assert left, "the blob-store commits left a snapshot"
        indexes = sorted(name for name in left if "/snapshot-index." in name and "meta.json" not in name)
        assert len(indexes) == 2, indexes  # one per task: the last committed one
        blobs = {name: size for name, size in left.items() if not name.endswith(".meta.json")}
        job_file = write_job_file(tmp_path, rolled_back)

        said = _gc(job_file, capsys, "--dry-run")
        expected = f"would delete 2 snapshot(s), {len(blobs)} blob(s), {sum(blobs.values())} bytes"
        assert expected in said, said
        for index in indexes:
            assert f"would delete snapshot {index} of task Partition " in said, said
        assert _of_store(_stored(rolled_back, request), "counts") == left, "a dry run deletes nothing"

        said = _gc(job_file, capsys)
        assert f"deleted 2 snapshot(s), {len(blobs)} blob(s), {sum(blobs.values())} bytes" in said, said
        remaining = _of_store(_stored(rolled_back, request), "counts")
        assert remaining == {}, f"gc left of store counts: {sorted(remaining)}"
        assert "deleted 0 snapshot(s)" in _gc(job_file, capsys)

        # The job runs on from its changelog.
        produce(words, [("fig", "fig")] * 3)
        run_job(rolled_back)
    finally:
        kafka_admin.delete_topics([changelog])


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_gc_keeps_what_the_last_checkpoints_use_and_deletes_only_the_blobs_a_left_snapshot_alone_uses(
    backend, job_config, topics, produce, run_job, tmp_path, capsys, request
):
    words, out = topics(2), topics(2)
    config = count_job(
        job_config,
        words,
        out,
        **{"stores.backup.factories": "blobstore", **_location(backend, tmp_path, request)},
    )
    sent: list[str] = []
    for step in range(3):
        batch = random.Random(90 + step).choices(WORDS, k=100)
        sent += batch
        produce(words, [(w, w) for w in batch])
        run_job(config)
    job = JobConfig(Config(config))
    checkpoint = checkpoint_manager(job).read_last()["Partition 0"]
    assert isinstance(checkpoint, CheckpointV2)
    named = checkpoint.state_markers["blobstore"]["counts"]
    base = BlobMetadata.of_store(job.name, job.id, "Partition 0", "counts")
    with opened_store(blob_store_settings(job)) as store:
        transfer = BlobTransfer(store)
        index = transfer.get_index(named, base)
        # A committed snapshot no checkpoint names (as a crash before a commit's cleanup leaves the one
        # before): every file of the checkpointed snapshot, and one only it has.
        own = _put_permanent(store, base, b"left alone" * 10)
        left_id = _index(transfer, index, "000777.sst", own, 100)
        store.remove_ttl(left_id, replace(base, payload_path="snapshot-index")).result()
        # A commit in flight: its blob and index still carry their TTL.
        fresh = store.put(lambda: io.BytesIO(b"fresh"), replace(base, payload_path="000888.sst")).result()
        fresh_id = _index(transfer, index, "000888.sst", fresh, 5)
    before = _stored(config, request)
    assert {left_id, own, fresh, fresh_id} <= set(before)
    job_file = write_job_file(tmp_path, config)
    shared = len(set(index.dir_index.present_blobs()))

    said = _gc(job_file, capsys, "--dry-run")
    assert "would delete 1 snapshot(s), 2 blob(s)" in said, said
    assert f"would delete snapshot {left_id} of task Partition 0 store counts" in said, said
    assert f"kept {shared} blob(s) a checkpointed snapshot uses" in said, said
    said = _gc(job_file, capsys)
    assert f"deleted 1 snapshot(s), 2 blob(s), {before[own] + before[left_id]} bytes" in said, said

    after = _stored(config, request)
    gone = {own, left_id}
    if backend == "local":
        gone |= {f"{own}.meta.json", f"{left_id}.meta.json"}
    assert set(before) - set(after) == gone, sorted(set(before) - set(after))
    assert main(["blobstore", "verify", str(job_file)]) == 0, capsys.readouterr().out
    restored: Counter[str] = Counter()
    for task in ("Partition 0", "Partition 1"):
        target = tmp_path / "restored" / task.replace(" ", "-")
        args = ["state", "download", str(job_file), "--task", task, "--store", "counts", "--to", str(target)]
        assert main(args) == 0
        restored += store_counts(target)
    assert restored == Counter(sent)


def _put_permanent(store: Any, base: BlobMetadata, data: bytes) -> str:
    meta = replace(base, payload_path="000777.sst", payload_size=len(data))
    blob_id = str(store.put(lambda: io.BytesIO(data), meta).result())
    store.remove_ttl(blob_id, meta).result()
    return blob_id


def _index(transfer: BlobTransfer, index: SnapshotIndex, name: str, blob_id: str, size: int) -> str:
    """A copy of `index` with one more file, `name` in blob `blob_id`, put (with its TTL)."""
    extra = FileIndex(name, (FileBlob(blob_id, 0),), FileMetadata(0, 0, size, 0o644), 0)
    files = (*index.dir_index.files_present, extra)
    return transfer.put_index(replace(index, dir_index=replace(index.dir_index, files_present=files)))


def test_gc_keeps_a_snapshot_the_last_v2_record_names_when_the_job_writes_v1_only_since(
    job_config, topics, produce, run_job, tmp_path, kafka_admin, capsys, request
):
    """Rolled back to changelog-only and to V1 checkpoints: the job now resumes from its V1 records, but
    its last V2 records, which name the snapshots, are the ones it resumes from again as soon as it reads
    V2 again: gc keeps them."""
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    base = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.changelog": f"kafka.{changelog}", **_location("local", tmp_path, request)},
    )
    dual = {**base, "stores.backup.factories": "changelog,blobstore"}
    v1_only = {
        **base,
        "stores.backup.factories": "changelog",
        "task.checkpoint.write.versions": "1",
        "task.checkpoint.read.versions": "1",
    }
    try:
        for step, config in enumerate([dual, v1_only]):
            produce(words, [(w, w) for w in random.Random(70 + step).choices(WORDS, k=50)])
            run_job(config)
        left = _of_store(_stored(v1_only, request), "counts")
        said = _gc(write_job_file(tmp_path, v1_only), capsys)
        assert "deleted 0 snapshot(s)" in said, said
        assert _of_store(_stored(v1_only, request), "counts") == left
    finally:
        kafka_admin.delete_topics([changelog])


def test_gc_refuses_without_the_jobs_checkpoints(job_config, topics, tmp_path, caplog, request):
    config = count_job(
        job_config,
        topics(1),
        "unused",
        **{"stores.counts.backup.factories": "blobstore", **_location("local", tmp_path, request)},
    )
    Path(config["blobstore.local.dir"]).mkdir()
    assert main(["blobstore", "gc", str(write_job_file(tmp_path, config))]) == 2
    assert (
        "cannot be read, so gc cannot tell which snapshots they still need and deletes nothing" in caplog.text
    )
    assert f"job {config['job.name']} (id 1) has no checkpoints" in caplog.text
