"""An operator's review of the blob-store backend: gc of a shared dir, a missing snapshot index at start,
jobs sharing an S3 prefix, a missing bucket, and the tools' output on an unreadable index."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from blob_clock import Clock
from count_job import WORDS, count_job
from job_fixtures import job_config, produce, run_job, subprocess_env

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.exceptions import InvalidConfigError
from samsa.stores.backend import TaskStoresContext
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.exceptions import (
    SNAPSHOT_UNUSABLE,
    BlobDeletedError,
    BlobStoreError,
    SnapshotIndexMissingError,
)
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.requests import new_blob_id
from samsa.stores.blobstore.restore import BlobStoreRestoreManager
from samsa.stores.blobstore.tool import gc_local
from samsa.stores.blobstore.transfer import BlobTransfer

__all__ = ["job_config", "produce", "run_job", "subprocess_env"]

TTL_S = 3600.0


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4, "test-blobs") as executor:
        yield executor


def _samsa(env: dict[str, str], *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def _put(store: LocalDirBlobStore, job: str, job_id: str, data: bytes = b"x" * 10) -> str:
    meta = BlobMetadata("000001.sst", len(data), job, job_id, "Partition 0", "counts")
    return store.put(lambda: io.BytesIO(data), meta).result()


# -- 1. gc of a blob dir shared by several jobs ----------------------------------------------------------


def test_gc_of_a_shared_dir_touches_only_this_jobs_blobs(tmp_path, pool):
    """Jobs `a` (id 1), `a` (id 10) and `a-b` (id 1) share a dir: gc of job `a`-`1` selects by the whole
    first segment of the ids (`a-1`), never a prefix of another job's (`a-10`, `a-b-1`)."""
    clock = Clock()
    store = LocalDirBlobStore(tmp_path / "blobs", pool, TTL_S, clock=clock)
    store.init()
    mine = _put(store, "a", "1")
    others = [_put(store, "a", "10"), _put(store, "a-b", "1"), _put(store, "ab", "1")]
    # Leftovers of crashed writes of every job (a temp file, an orphan sidecar), old enough to collect.
    for job in ("a-1", "a-10", "a-b-1"):
        (tmp_path / "blobs" / job / "Partition_0" / "counts" / "x.sst.0123abcd.part").write_bytes(b"t")
    clock.now += 2 * TTL_S  # every blob expired: never committed, as far as the sidecars say

    dry = gc_local(store, set(), "a", "1", dry_run=True, now=clock.now)
    assert dry.result.blobs_deleted == 1
    report = gc_local(store, set(), "a", "1", now=clock.now + 1e9)
    assert (report.result.blobs_deleted, report.result.temp_files_deleted) == (1, 1)
    assert {b.blob_id for b in store.list_blobs()} == set(others), "another job's blob was deleted"
    assert not (tmp_path / "blobs" / mine).exists()
    for job in ("a-10", "a-b-1"):
        assert list((tmp_path / "blobs" / job).rglob("*.part")), f"job {job}'s temp file was deleted"
    assert "blobs of job a-1 only" in report.lines(str(tmp_path / "blobs"))[0]

    # A job whose blob dir does not exist (yet) has nothing to collect, whatever else the dir holds.
    assert gc_local(store, set(), "c", "1", now=clock.now + 1e9).result.blobs_deleted == 0
    store.close()


def test_gc_of_one_job_keeps_another_jobs_expired_checkpointed_snapshot(
    job_config, topics, produce, run_job, tmp_path, capsys
):
    """Two jobs share the default blob dir; B crashed after its checkpoint, before its cleanup made the
    snapshot permanent, and stayed down past the TTL: `gc` of A must leave B's snapshot alone."""
    from samsa.cli import main

    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in random.Random(1).choices(WORDS, k=50)])
    a = count_job(job_config, words, out, **{"stores.backup.factories": "blobstore"})
    b = count_job(job_config, words, out, **{"stores.backup.factories": "blobstore"})
    assert a["job.logged.store.base.dir"] == b["job.logged.store.base.dir"]
    run_job(a)
    run_job(b)
    job_a, job_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    job_a.write_text(json.dumps(a))
    job_b.write_text(json.dumps(b))
    blobs = Path(a["job.logged.store.base.dir"]) / "blobstore"
    expired = 0
    for sidecar in (blobs / f"{b['job.name']}-1").rglob("*.meta.json"):
        doc = json.loads(sidecar.read_text())
        doc["expires-at"] = 1.0  # what 30 days on the clock would do
        sidecar.write_text(json.dumps(doc))
        expired += 1
    assert expired > 0

    capsys.readouterr()
    assert main(["blobstore", "gc", str(job_a)]) == 0
    said = capsys.readouterr().out
    assert f"blobs of job {a['job.name']}-1 only" in said, said
    assert main(["blobstore", "verify", str(job_b)]) == 0, capsys.readouterr().out
    assert "all match" in capsys.readouterr().out
    # B's own gc makes its checkpointed blobs permanent, as documented.
    assert main(["blobstore", "gc", str(job_b)]) == 0
    assert f"made {expired} expired blob(s) permanent" in capsys.readouterr().out


# -- 2. a missing snapshot index at start ---------------------------------------------------------------


def _restore_manager(
    tmp_path: Path, pool: ThreadPoolExecutor, tail: bool, seed: bool = False
) -> BlobStoreRestoreManager:
    """The restore manager of store `counts`: `tail`, its changelog's tail replayed after it (the changelog
    is its fallback); `seed`, its changelog seeded from it (no fallback: the storage manager passes both)."""
    store = LocalDirBlobStore(tmp_path / "blobs", pool, TTL_S)
    store.init()
    context = TaskStoresContext(
        "job-1",
        "Partition 0",
        0,
        {"counts": tmp_path / "state" / "counts"},
        {"counts": {}},
        tail_restored=frozenset({"counts"}) if tail or seed else frozenset(),
        seeded=frozenset({"counts"}) if seed else frozenset(),
    )
    location = str(tmp_path / "blobs")
    return BlobStoreRestoreManager(context, BlobTransfer(store, 1024), "job", "1", location=location)


@pytest.mark.parametrize("seed", [False, True], ids=["no-changelog", "changelog-to-seed"])
def test_a_missing_index_without_a_fallback_is_a_config_error_naming_the_dir(seed, tmp_path, pool):
    gone = new_blob_id(BlobMetadata("snapshot-index", -1, "job", "1", "Partition 0", "counts"))
    manager = _restore_manager(tmp_path, pool, tail=False, seed=seed)
    with pytest.raises(SnapshotIndexMissingError) as info:
        manager.init({"counts": gone}, "1-1")
    text = str(info.value)
    assert str(tmp_path / "blobs") in text and gone in text and "checkpoint (1-1)" in text
    assert "blobstore.local.dir" in text and "job.logged.store.base.dir" in text and "new job.id" in text
    assert isinstance(info.value, InvalidConfigError)
    assert unmendable_exit(info.value) == CONFIG_ERROR_EXIT, "a supervisor would restart it"


def test_a_missing_index_with_a_changelog_tail_stays_the_fallback_error(tmp_path, pool):
    gone = new_blob_id(BlobMetadata("snapshot-index", -1, "job", "1", "Partition 0", "counts"))
    manager = _restore_manager(tmp_path, pool, tail=True)
    with pytest.raises(SNAPSHOT_UNUSABLE) as info:
        manager.init({"counts": gone}, "1-1")
    assert type(info.value) is BlobDeletedError  # the changelog restores the store instead, as before
    assert unmendable_exit(info.value) is None


@pytest.mark.parametrize("variant", ["moved-dir", "default-dir-new-host"])
def test_a_start_missing_its_snapshot_index_stops_without_restarts(
    variant, job_config, topics, produce, run_job, tmp_path, subprocess_env
):
    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in random.Random(1).choices(WORDS, k=30)])
    extra = {"stores.backup.factories": "blobstore", "deploy.local.max.restarts": "3"}
    if variant == "moved-dir":
        extra["blobstore.local.dir"] = str(tmp_path / "blobs")
    config = count_job(job_config, words, out, **extra)
    run_job(config)
    fresh = tmp_path / "fresh-host"
    if variant == "moved-dir":
        (tmp_path / "blobs").rename(tmp_path / "blobs-moved")
        looked_in = tmp_path / "blobs"
    else:
        looked_in = fresh / "blobstore"  # the default dir moves with job.logged.store.base.dir
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps({**config, "job.logged.store.base.dir": str(fresh)}))

    ran = _samsa(subprocess_env, "run", str(job_file), "--until-caught-up")
    text = ran.stdout + ran.stderr
    assert ran.returncode == 2, text[-3000:]
    assert "restarting" not in text, "the supervisor restarted a start that fails the same way again"
    assert "stopped on a configuration error" in text, text[-3000:]
    assert f"not in the blob store at {looked_in}" in text, text[-3000:]
    assert "blobstore.local.dir" in text and "new job.id" in text


# -- 3. jobs sharing an S3 bucket and prefix ----------------------------------------------------------------


def _s3_job(job_config, words: str, out: str, bucket: str, endpoint: str, **extra: str) -> dict[str, str]:
    return count_job(
        job_config,
        words,
        out,
        **{
            "stores.backup.factories": "blobstore",
            "blobstore.s3.bucket": bucket,
            "blobstore.s3.prefix": "shared",
            "blobstore.s3.endpoint.url": endpoint,
            "blobstore.s3.region": "us-east-1",
            **extra,
        },
    )


def _rules(client: Any, bucket: str) -> dict[str, Any]:
    return {r["ID"]: r for r in client.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]}


def test_jobs_sharing_a_prefix_keep_their_own_lifecycle_rules(
    job_config, topics, produce, run_job, moto_endpoint, s3_bucket, s3_client, tmp_path, capsys
):
    from samsa.cli import main

    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in random.Random(1).choices(WORDS, k=20)])
    a = _s3_job(job_config, words, out, s3_bucket, moto_endpoint, **{"blobstore.ttl.days": "30"})
    b = _s3_job(job_config, words, out, s3_bucket, moto_endpoint, **{"blobstore.ttl.days": "2"})
    run_job(a)
    run_job(b)
    rules = _rules(s3_client, s3_bucket)
    for job, days in ((a, 30), (b, 2)):
        rule = rules[f"samsa-expire-uncommitted/shared/{job['job.name']}-1"]
        assert rule["Expiration"]["Days"] == days
        assert rule["Filter"]["And"]["Prefix"] == f"shared/{job['job.name']}-1/"
        assert rule["Filter"]["And"]["Tags"] == [{"Key": "samsa-expiring", "Value": "true"}]
    job_a = tmp_path / "a.yaml"
    job_a.write_text(json.dumps(a))
    capsys.readouterr()
    assert main(["blobstore", "gc", str(job_a)]) == 0
    said = capsys.readouterr().out
    assert f"samsa-expire-uncommitted/shared/{a['job.name']}-1" in said and "is in place" in said


def test_an_older_samsas_per_prefix_rule_is_kept_and_accepted(moto_endpoint, s3_bucket, s3_client, caplog):
    from samsa.stores.blobstore.s3 import S3BlobStoreAdmin

    tag = {"Key": "samsa-expiring", "Value": "true"}
    legacy = {
        "ID": "samsa-expire-uncommitted/shared",
        "Filter": {"And": {"Prefix": "shared/", "Tags": [tag]}},
        "Status": "Enabled",
        "Expiration": {"Days": 2},
    }
    s3_client.put_bucket_lifecycle_configuration(Bucket=s3_bucket, LifecycleConfiguration={"Rules": [legacy]})

    def admin(ttl: int) -> S3BlobStoreAdmin:
        return S3BlobStoreAdmin(s3_bucket, "shared", ttl, endpoint_url=moto_endpoint, job="a-1")

    admin(2).validate_resources()  # a job not started since the upgrade: the older rule still covers it
    with pytest.raises(BlobStoreError) as info:
        admin(30).validate_resources()  # ... but not with another TTL
    text = str(info.value)
    assert "samsa-expire-uncommitted/shared/a-1" in text and "start the job once" in text
    assert "'shared/a-1/'" in text and "create_resources" not in text

    admin(30).create_resources()
    rules = _rules(s3_client, s3_bucket)
    assert set(rules) == {"samsa-expire-uncommitted/shared", "samsa-expire-uncommitted/shared/a-1"}
    assert rules["samsa-expire-uncommitted/shared"] == legacy, "another job may still rely on it"
    assert "expires the uncommitted blobs of every job under prefix 'shared' after 2 days" in caplog.text
    admin(30).validate_resources()


# -- 4. a missing (mistyped) S3 bucket ------------------------------------------------------------------


def test_a_start_with_a_missing_bucket_is_refused_without_creating_it(
    job_config, topics, produce, run_job, moto_endpoint, s3_bucket, s3_client, tmp_path, subprocess_env
):
    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in random.Random(1).choices(WORDS, k=20)])
    good = _s3_job(job_config, words, out, s3_bucket, moto_endpoint, **{"deploy.local.max.restarts": "3"})
    run_job(good)
    typo = f"{s3_bucket}-typo"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps({**good, "blobstore.s3.bucket": typo}))
    ran = _samsa(subprocess_env, "run", str(job_file), "--until-caught-up")
    text = ran.stdout + ran.stderr
    assert ran.returncode == 2, text[-3000:]
    assert (
        f"S3 bucket '{typo}' (blobstore.s3.bucket) does not exist at {moto_endpoint} (region us-east-1)"
        in text
    )
    assert "restarting" not in text and "create_resources" not in text
    assert typo not in {b["Name"] for b in s3_client.list_buckets()["Buckets"]}, (
        "the start created the bucket"
    )

    # The right bucket under another prefix: the checkpointed snapshot is not there, and the start says where
    # it looked, once (no restarts).
    job_file.write_text(json.dumps({**good, "blobstore.s3.prefix": "elsewhere"}))
    ran = _samsa(subprocess_env, "run", str(job_file), "--until-caught-up")
    text = ran.stdout + ran.stderr
    assert ran.returncode == 2, text[-3000:]
    assert f"not in the blob store at s3://{s3_bucket}/elsewhere" in text, text[-3000:]
    assert "blobstore.s3.prefix" in text and "stopped on a configuration error" in text
    assert "restarting" not in text


# -- 5. `samsa state ls` with an unreadable index ------------------------------------------------------------


def test_state_ls_prints_an_unreadable_index_below_the_table_and_fails(
    job_config, topics, produce, run_job, tmp_path, capsys
):
    from samsa.cli import main

    words, out = topics(1), topics(1)
    produce(words, [(w, w) for w in random.Random(1).choices(WORDS, k=20)])
    blobs = tmp_path / "blobs"
    config = count_job(
        job_config, words, out, **{"stores.backup.factories": "blobstore", "blobstore.local.dir": str(blobs)}
    )
    run_job(config)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    (index,) = blobs.rglob("snapshot-index.*[0-9a-f]")
    index.unlink()
    index.mkdir()  # reading it fails, and not as a missing blob: an unreadable index
    capsys.readouterr()

    assert main(["state", "ls", str(job_file)]) == 1
    lines = capsys.readouterr().out.splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("TASK"))
    table = lines[header : header + 2]
    assert "UNREADABLE" in table[1] and max(len(line) for line in table) < 250, table
    below = "\n".join(lines[header + 2 :])
    assert f"store counts: snapshot index {index.relative_to(blobs)} is unreadable: get of blob" in below
    assert "1 snapshot index(es) missing or unreadable" in below

    index.rmdir()  # gone: missing, and a failure as `verify` says
    assert main(["state", "ls", str(job_file)]) == 1
    assert "MISSING" in capsys.readouterr().out
