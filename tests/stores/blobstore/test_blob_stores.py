"""The blob store contract, on the local dir store and on S3 (moto's server over HTTP, a faulty proxy)."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from blob_clock import Clock
from blob_ledger import LedgerBlobStore
from faulty_proxy import FaultyProxy
from moto_server import FAKE_ENVIRONMENT, plain_client

from samsa.stores.blobstore.api import SNAPSHOT_INDEX_PATH, BlobMetadata
from samsa.stores.blobstore.exceptions import (
    BlobDeletedError,
    BlobStoreError,
    BucketMissingError,
    RetriableBlobError,
)
from samsa.stores.blobstore.factory import blob_store_admin
from samsa.stores.blobstore.local import SIDECAR_SUFFIX, LocalDirBlobStore
from samsa.stores.blobstore.s3 import TTL_TAG_KEY, S3BlobStore, S3BlobStoreAdmin
from samsa.stores.blobstore.settings import BlobStoreSettings

TTL_S = 3600.0
THREAD_PREFIX = "blobio"
PREFIX = "samsa/jobs"
MIB = 1 << 20


def metadata(path: str = "000012.sst", store: str = "counts", task: str = "Partition 3") -> BlobMetadata:
    return BlobMetadata(path, -1, "wordcount", "1", task, store)


@dataclass
class Kit:
    """A store under test and a way to look behind its back at a blob's TTL."""

    kind: str
    store: Any
    expiring: Callable[[str], bool]
    tmp: Path

    def put(self, data: bytes, meta: BlobMetadata | None = None) -> str:
        source = self.tmp / f"src-{uuid.uuid4().hex}"
        source.write_bytes(data)
        blob_id: str = self.store.put(_file_source(source), meta or metadata()).result()
        return blob_id

    def get(self, blob_id: str) -> bytes:
        target = self.tmp / f"dst-{uuid.uuid4().hex}"
        self.store.get(blob_id, _file_sink(target), metadata()).result()
        return target.read_bytes()


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(8, thread_name_prefix=THREAD_PREFIX) as pool:
        yield pool


def s3_store(bucket: str, endpoint: str, executor: ThreadPoolExecutor, **options: Any) -> S3BlobStore:
    settings: dict[str, Any] = {
        "endpoint_url": endpoint,
        "max_retry_duration_s": 10.0,
        "connect_timeout_s": 1.0,
        "read_timeout_s": 5.0,
        "initial_retry_delay_s": 0.01,
        "max_retry_delay_s": 0.2,
    }
    settings.update(options)
    store = S3BlobStore(bucket, PREFIX, executor, 1, **settings)
    store.init()
    return store


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["local", "s3"])
def kit(
    request: pytest.FixtureRequest, tmp_path: Path, executor: ThreadPoolExecutor, clock: Clock
) -> Iterator[Kit]:
    if request.param == "local":
        local = LocalDirBlobStore(tmp_path / "blobs", executor, TTL_S, clock)
        local.init()

        def local_expiring(blob_id: str) -> bool:
            sidecar = json.loads((local.root / (blob_id + SIDECAR_SUFFIX)).read_text())
            return sidecar["expires-at"] is not None

        yield Kit("local", local, local_expiring, tmp_path)
        local.close()
        return
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    client = plain_client(endpoint)
    s3 = s3_store(bucket, endpoint, executor)

    def s3_expiring(blob_id: str) -> bool:
        tags = client.get_object_tagging(Bucket=bucket, Key=s3.key(blob_id))["TagSet"]
        return any(t["Key"] == TTL_TAG_KEY and t["Value"] == "true" for t in tags)

    yield Kit("s3", s3, s3_expiring, tmp_path)
    s3.close()


# --- the contract, on both stores ---------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1000, 5 * MIB + 17])
def test_put_get_round_trip(kit: Kit, size: int) -> None:
    data = random.Random(size).randbytes(size)
    blob_id = kit.put(data)
    assert kit.get(blob_id) == data
    assert {b.blob_id: b.size for b in kit.store.list_blobs()} == {blob_id: size}


def test_ids_are_unique_and_readable(kit: Kit) -> None:
    meta = metadata("sub dir/000012.sst", task="Partition 3")
    first, second = kit.put(b"one", meta), kit.put(b"two", meta)
    assert first != second
    assert first.startswith("wordcount-1/Partition_3/counts/sub_dir_000012.sst.")
    assert kit.get(first) == b"one" and kit.get(second) == b"two"
    index = kit.put(b"{}", metadata(SNAPSHOT_INDEX_PATH))
    assert index.startswith("wordcount-1/Partition_3/counts/snapshot-index.")


def test_get_of_a_deleted_blob_fails_without_touching_the_sink(kit: Kit) -> None:
    blob_id = kit.put(b"data")
    kit.store.delete(blob_id, metadata()).result()
    opened: list[int] = []

    def sink() -> BinaryIO:
        opened.append(1)
        return io.BytesIO()

    with pytest.raises(BlobDeletedError) as info:
        kit.store.get(blob_id, sink, metadata()).result()
    assert info.value.blob_id == blob_id
    assert opened == []


def test_delete_is_idempotent(kit: Kit) -> None:
    blob_id = kit.put(b"data")
    kit.store.delete(blob_id, metadata()).result()
    kit.store.delete(blob_id, metadata()).result()
    kit.store.delete(blob_id.rsplit(".", 1)[0] + "." + uuid.uuid4().hex, metadata()).result()  # never was
    assert list(kit.store.list_blobs()) == []


def test_put_has_a_ttl_that_remove_ttl_drops_idempotently(kit: Kit) -> None:
    blob_id = kit.put(b"data")
    assert kit.expiring(blob_id)
    kit.store.remove_ttl(blob_id, metadata()).result()
    assert not kit.expiring(blob_id)
    kit.store.remove_ttl(blob_id, metadata()).result()
    assert not kit.expiring(blob_id)
    assert kit.get(blob_id) == b"data"


def test_remove_ttl_of_a_missing_blob_is_blob_deleted(kit: Kit) -> None:
    blob_id = kit.put(b"data")
    kit.store.delete(blob_id, metadata()).result()
    with pytest.raises(BlobDeletedError, match=blob_id):
        kit.store.remove_ttl(blob_id, metadata()).result()


def test_requests_run_on_the_given_executor(kit: Kit) -> None:
    threads: list[str] = []

    def source() -> BinaryIO:
        threads.append(threading.current_thread().name)
        return io.BytesIO(b"payload")

    blob_id = kit.store.put(source, metadata()).result()
    target = kit.tmp / "out"

    def sink() -> BinaryIO:
        threads.append(threading.current_thread().name)
        return open(target, "wb")

    kit.store.get(blob_id, sink, metadata()).result()
    assert target.read_bytes() == b"payload"
    assert len(threads) == 2
    assert all(name.startswith(THREAD_PREFIX) for name in threads), threads


@pytest.mark.parametrize("bad", ["../x.0123456789abcdef0123456789abcdef", "/etc/passwd", "a//b", "plain", ""])
def test_invalid_blob_ids_are_refused(kit: Kit, bad: str) -> None:
    for request in (
        lambda: kit.store.get(bad, lambda: io.BytesIO(), metadata()),
        lambda: kit.store.delete(bad, metadata()),
        lambda: kit.store.remove_ttl(bad, metadata()),
    ):
        with pytest.raises(BlobStoreError, match="not one this blob store makes") as info:
            request().result()
        assert not isinstance(info.value, BlobDeletedError)


def test_close_waits_for_requests_in_flight_then_refuses_new_ones(kit: Kit) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_source() -> BinaryIO:
        started.set()
        release.wait(10)
        return io.BytesIO(b"late")

    future = kit.store.put(slow_source, metadata())
    started.wait(10)
    closer = threading.Thread(target=kit.store.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and not future.done()
    release.set()
    closer.join(10)
    assert future.done() and future.exception() is None
    with pytest.raises(BlobStoreError, match="closed"):
        kit.store.put(lambda: io.BytesIO(b"x"), metadata())


# --- the local store ----------------------------------------------------------------------------------


@pytest.fixture
def local(tmp_path: Path, executor: ThreadPoolExecutor, clock: Clock) -> Iterator[LocalDirBlobStore]:
    store = LocalDirBlobStore(tmp_path / "blobs", executor, TTL_S, clock)
    store.init()
    yield store
    store.close()


def local_put(store: LocalDirBlobStore, data: bytes, path: str = "f.sst") -> str:
    return store.put(lambda: io.BytesIO(data), metadata(path)).result()


def test_local_sidecar_records_the_ttl(local: LocalDirBlobStore, clock: Clock) -> None:
    blob_id = local_put(local, b"12345")
    sidecar = json.loads((local.root / (blob_id + SIDECAR_SUFFIX)).read_text())
    assert sidecar["expires-at"] == clock.now + TTL_S
    assert sidecar["created-at"] == clock.now
    assert sidecar["size"] == 5
    assert (sidecar["payload-path"], sidecar["task"], sidecar["store"]) == ("f.sst", "Partition 3", "counts")
    assert [(b.blob_id, b.expires_at) for b in local.list_blobs()] == [(blob_id, clock.now + TTL_S)]
    # Nothing but the blob and its sidecar: no temp file left behind.
    assert sorted(p.name for p in (local.root / blob_id).parent.iterdir()) == sorted(
        [Path(blob_id).name, Path(blob_id).name + SIDECAR_SUFFIX]
    )


def test_local_remove_ttl_makes_the_sidecar_rename_durable(
    local: LocalDirBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A power loss after remove_ttl must not bring the expiring sidecar back (gc would then delete a blob
    # the committed checkpoint names): its directory is fsynced once the new sidecar is in place.
    blob_id = local_put(local, b"12345")
    synced: list[tuple[Path, bool]] = []
    sidecar = local.root / (blob_id + SIDECAR_SUFFIX)

    def fsync_dir(dir: Path) -> None:
        synced.append((dir, json.loads(sidecar.read_text())["expires-at"] is None))

    monkeypatch.setattr("samsa.stores.blobstore.local.fsync_dir", fsync_dir)
    local.remove_ttl(blob_id, metadata("f.sst")).result()
    assert synced == [(sidecar.parent, True)]


def test_local_gc_removes_expired_uncommitted_blobs_only(local: LocalDirBlobStore, clock: Clock) -> None:
    committed = local_put(local, b"keep me")
    local.remove_ttl(committed, metadata()).result()
    clock.now += TTL_S / 2
    young = local_put(local, b"young")
    clock.now -= TTL_S / 2
    doomed = [local_put(local, b"x" * 10), local_put(local, b"y" * 20)]

    assert local.gc(clock.now + TTL_S - 1).blobs_deleted == 0
    result = local.gc(clock.now + TTL_S)
    assert (result.blobs_deleted, result.bytes_deleted) == (2, 30)
    assert {b.blob_id for b in local.list_blobs()} == {committed, young}
    for blob_id in doomed:
        with pytest.raises(BlobDeletedError):
            local.get(blob_id, lambda: io.BytesIO(), metadata()).result()
        assert not (local.root / (blob_id + SIDECAR_SUFFIX)).exists()
    assert local.gc(clock.now + 100 * TTL_S).blobs_deleted == 1  # the young one, in its turn


def test_local_gc_removes_leftovers_of_crashed_writes(local: LocalDirBlobStore, clock: Clock) -> None:
    blob_id = local_put(local, b"data")
    directory = (local.root / blob_id).parent
    stale_temp = directory / "f.sst.0123456789abcdef0123456789abcdef.1a2b3c4d.part"
    stale_temp.write_bytes(b"half")
    orphan = directory / ("f.sst." + "f" * 32 + SIDECAR_SUFFIX)
    orphan.write_text("{}")
    fresh_temp = directory / "g.sst.1a2b.part"
    fresh_temp.write_bytes(b"in progress")
    old = clock.now - 2 * TTL_S
    for path in (stale_temp, orphan):
        os.utime(path, (old, old))
    for path in (fresh_temp,):
        os.utime(path, (clock.now, clock.now))

    result = local.gc()
    assert (result.blobs_deleted, result.temp_files_deleted, result.sidecars_deleted) == (0, 1, 1)
    assert not stale_temp.exists() and not orphan.exists() and fresh_temp.exists()
    assert local.get(blob_id, lambda: io.BytesIO(), metadata()).result() is None


def test_local_put_failure_leaves_nothing(local: LocalDirBlobStore) -> None:
    class Broken(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            raise OSError("disk on fire")

    with pytest.raises(BlobStoreError, match="disk on fire"):
        local.put(lambda: io.BufferedReader(Broken()), metadata()).result()  # type: ignore[arg-type]
    assert [p for p in local.root.rglob("*") if p.is_file()] == []


def test_local_put_streams_in_pieces(local: LocalDirBlobStore) -> None:
    reads: list[int] = []

    class Recording(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            reads.append(-1 if size is None else size)
            return super().read(size)

    blob_id = local.put(lambda: Recording(b"z" * (3 * MIB)), metadata()).result()
    assert reads and all(0 < n <= MIB for n in reads)
    assert (local.root / blob_id).stat().st_size == 3 * MIB


def test_local_refuses_ids_leading_out_through_a_link(local: LocalDirBlobStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / ("v." + "a" * 32)
    victim.write_bytes(b"precious")
    (local.root / "link").symlink_to(outside)
    with pytest.raises(BlobStoreError, match="outside the blob store dir"):
        local.delete("link/" + victim.name, metadata()).result()
    assert victim.exists()


def test_local_ttl_must_be_positive(tmp_path: Path, executor: ThreadPoolExecutor) -> None:
    with pytest.raises(BlobStoreError, match="must be positive"):
        LocalDirBlobStore(tmp_path, executor, 0)


# --- the S3 store -------------------------------------------------------------------------------------


def test_s3_keys_live_under_the_prefix(
    s3_bucket: str, moto_endpoint: str, s3_client: Any, executor: ThreadPoolExecutor
) -> None:
    store = s3_store(s3_bucket, moto_endpoint, executor)
    blob_id = store.put(lambda: io.BytesIO(b"abc"), metadata()).result()
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert keys == [f"{PREFIX}/{blob_id}"]
    [info] = store.list_blobs(with_ttl=True)
    assert info.blob_id == blob_id and info.size == 3
    assert info.expires_at == pytest.approx(info.created_at + 86400)
    store.remove_ttl(blob_id, metadata()).result()
    assert [b.expires_at for b in store.list_blobs(with_ttl=True)] == [None]
    store.close()


def test_s3_list_pages_through_many_blobs(
    s3_bucket: str, moto_endpoint: str, executor: ThreadPoolExecutor
) -> None:
    store = s3_store(s3_bucket, moto_endpoint, executor)
    futures = [store.put(lambda: io.BytesIO(b"."), metadata(f"f{i}")) for i in range(10)]
    ids = {f.result() for f in futures}
    assert [b.blob_id for b in store.list_blobs(page_size=3)] == sorted(ids)
    store.close()


def test_s3_retries_with_a_fresh_stream_per_attempt(
    s3_bucket: str,
    faulty_s3_endpoint: Callable[..., FaultyProxy],
    executor: ThreadPoolExecutor,
    tmp_path: Path,
) -> None:
    proxy = faulty_s3_endpoint(0.0, stall_s=1.0)
    store = s3_store(s3_bucket, proxy.url, executor, read_timeout_s=0.5)
    data = random.Random(7).randbytes(2 * MIB)
    sources: list[int] = []

    def source() -> BinaryIO:
        sources.append(1)
        return io.BytesIO(data)

    proxy.fail_next(1, "503")
    proxy.fail_next(1, "500")
    proxy.fail_next(1, "stall")
    blob_id = store.put(source, metadata()).result()
    assert len(sources) == 4
    assert proxy.injected == {"503": 1, "500": 1, "stall": 1}

    target = tmp_path / "download"
    sinks: list[int] = []

    def sink() -> BinaryIO:
        sinks.append(target.stat().st_size if target.exists() else -1)
        return open(target, "wb")

    proxy.fail_next(1, "cut")  # half the body arrives, then the connection drops
    store.get(blob_id, sink, metadata()).result()
    assert sinks == [-1, MIB]  # the second attempt reopened the half-written download
    assert target.read_bytes() == data
    store.close()


def test_s3_gives_up_on_transient_errors_when_the_retry_time_runs_out(
    s3_bucket: str, faulty_s3_endpoint: Callable[..., FaultyProxy], executor: ThreadPoolExecutor
) -> None:
    proxy = faulty_s3_endpoint(1.0, kinds=("503",))
    store = s3_store(s3_bucket, proxy.url, executor, max_retry_duration_s=0.3)
    with pytest.raises(RetriableBlobError, match=f"s3://{s3_bucket}/{PREFIX}/.*SlowDown"):
        store.put(lambda: io.BytesIO(b"x"), metadata()).result()
    assert proxy.injected["503"] >= 2
    store.close()


def test_s3_missing_bucket_fails_at_once_naming_it(
    faulty_s3_endpoint: Callable[..., FaultyProxy], executor: ThreadPoolExecutor
) -> None:
    proxy = faulty_s3_endpoint(0.0)  # only to count requests
    missing = f"samsa-missing-{uuid.uuid4().hex[:12]}"
    store = s3_store(missing, proxy.url, executor, max_retry_duration_s=30.0)
    with pytest.raises(BlobStoreError, match=f"bucket '{missing}' does not exist") as info:
        store.put(lambda: io.BytesIO(b"x"), metadata()).result()
    assert not isinstance(info.value, RetriableBlobError)
    assert proxy.forwarded == 1
    store.close()


def test_s3_remove_ttl_of_a_blob_it_put_is_one_request_else_it_reads_the_tags_first(
    s3_bucket: str,
    faulty_s3_endpoint: Callable[..., FaultyProxy],
    executor: ThreadPoolExecutor,
    s3_client: Any,
) -> None:
    proxy = faulty_s3_endpoint(0.0)  # only to count requests
    store = s3_store(s3_bucket, proxy.url, executor)
    restarted = s3_store(s3_bucket, proxy.url, executor)  # did not put them, as after a restart

    def tags(blob_id: str) -> list[dict[str, str]]:
        tag_set: list[dict[str, str]] = s3_client.get_object_tagging(
            Bucket=s3_bucket, Key=store.key(blob_id)
        )["TagSet"]
        return tag_set

    def requests(call: Callable[[], object]) -> int:
        before = proxy.forwarded
        call()
        return proxy.forwarded - before

    fresh, tagged = (store.put(_opener(b"x"), metadata()).result() for _ in range(2))
    assert requests(lambda: store.remove_ttl(fresh, metadata()).result()) == 1  # the tag set deleted
    assert tags(fresh) == []
    team = {"Key": "team", "Value": "state"}
    s3_client.put_object_tagging(
        Bucket=s3_bucket, Key=store.key(tagged), Tagging={"TagSet": [*tags(tagged), team]}
    )
    assert requests(lambda: restarted.remove_ttl(tagged, metadata()).result()) == 2  # read, then rewrite
    assert tags(tagged) == [team]
    assert requests(lambda: store.remove_ttl(fresh, metadata()).result()) == 1  # permanent: only read
    store.close()
    restarted.close()


@pytest.mark.parametrize("fraction", [0.1, 0.2])
def test_s3_round_trips_survive_a_faulty_network(
    s3_bucket: str,
    faulty_s3_endpoint: Callable[..., FaultyProxy],
    executor: ThreadPoolExecutor,
    tmp_path: Path,
    fraction: float,
) -> None:
    proxy = faulty_s3_endpoint(fraction, stall_s=1.0)
    store = s3_store(s3_bucket, proxy.url, executor, read_timeout_s=0.4, max_retry_duration_s=30.0)
    rng = random.Random(fraction)
    payloads = [rng.randbytes(rng.randrange(0, 200_000)) for _ in range(50)]
    ids = [f.result() for f in [store.put(_opener(p), metadata(f"f{i}")) for i, p in enumerate(payloads)]]
    targets = [tmp_path / f"out{i}" for i in range(len(ids))]
    gets = [store.get(b, _file_sink(t), metadata()) for b, t in zip(ids, targets, strict=True)]
    for future in gets:
        future.result()
    assert [t.read_bytes() for t in targets] == payloads
    assert sum(proxy.injected.values()) >= 5, proxy.injected
    store.close()


def _opener(data: bytes) -> Callable[[], BinaryIO]:
    return lambda: io.BytesIO(data)


def _file_sink(path: Path) -> Callable[[], BinaryIO]:
    return lambda: open(path, "wb")


def _file_source(path: Path) -> Callable[[], BinaryIO]:
    return lambda: open(path, "rb")


def test_s3_ttl_days_must_be_positive(executor: ThreadPoolExecutor) -> None:
    with pytest.raises(BlobStoreError, match="at least 1"):
        S3BlobStore("b", "p", executor, 0)


# --- the S3 admin -------------------------------------------------------------------------------------

UNRELATED_RULE = {
    "ID": "archive-logs",
    "Filter": {"Prefix": "logs/"},
    "Status": "Enabled",
    "Expiration": {"Days": 365},
}


def admin(
    bucket: str, endpoint: str, ttl_days: int = 30, prefix: str = PREFIX, job: str = "job-1"
) -> S3BlobStoreAdmin:
    return S3BlobStoreAdmin(bucket, prefix, ttl_days, endpoint_url=endpoint, job=job)


def rules(client: Any, bucket: str) -> dict[str, Any]:
    found = client.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    return {r["ID"]: r for r in found}


def test_admin_adds_the_rule_and_keeps_the_others(s3_bucket: str, moto_endpoint: str, s3_client: Any) -> None:
    s3_client.put_bucket_lifecycle_configuration(
        Bucket=s3_bucket, LifecycleConfiguration={"Rules": [UNRELATED_RULE]}
    )
    first = admin(s3_bucket, moto_endpoint)
    first.create_resources()
    found = rules(s3_client, s3_bucket)
    assert set(found) == {"archive-logs", first.rule_id}
    ours = found[first.rule_id]
    assert ours["Expiration"]["Days"] == 30 and ours["Status"] == "Enabled"
    assert ours["Filter"]["And"]["Prefix"] == f"{PREFIX}/job-1/"
    assert ours["Filter"]["And"]["Tags"] == [{"Key": TTL_TAG_KEY, "Value": "true"}]
    assert found["archive-logs"]["Expiration"]["Days"] == 365
    first.validate_resources()

    # Another TTL updates our rule in place; another prefix adds its own.
    admin(s3_bucket, moto_endpoint, ttl_days=7).create_resources()
    other = admin(s3_bucket, moto_endpoint, prefix="other")
    other.create_resources()
    found = rules(s3_client, s3_bucket)
    assert set(found) == {"archive-logs", first.rule_id, other.rule_id}
    assert found[first.rule_id]["Expiration"]["Days"] == 7
    with pytest.raises(
        BlobStoreError, match=f"'{s3_bucket}'.*expires after 7 days, not blobstore.ttl.days=30"
    ):
        first.validate_resources()


def test_admin_validate_fails_clearly_without_the_rule(
    s3_bucket: str, moto_endpoint: str, s3_client: Any
) -> None:
    checker = admin(s3_bucket, moto_endpoint)
    with pytest.raises(BlobStoreError, match=f"bucket '{s3_bucket}' has no lifecycle rule"):
        checker.validate_resources()
    s3_client.put_bucket_lifecycle_configuration(
        Bucket=s3_bucket, LifecycleConfiguration={"Rules": [UNRELATED_RULE]}
    )
    with pytest.raises(BlobStoreError, match="start the job once"):
        checker.validate_resources()


def test_admin_refuses_a_missing_bucket(moto_endpoint: str, s3_client: Any) -> None:
    bucket = f"samsa-new-{uuid.uuid4().hex[:12]}"
    checker = admin(bucket, moto_endpoint)
    for call in (checker.validate_resources, checker.create_resources):
        with pytest.raises(
            BucketMissingError, match=f"bucket '{bucket}' .*does not exist at {moto_endpoint}"
        ):
            call()
    assert bucket not in {b["Name"] for b in s3_client.list_buckets()["Buckets"]}


# --- the faulty proxy itself --------------------------------------------------------------------------


def test_proxy_forwards_chunked_request_bodies(
    s3_bucket: str, faulty_s3_endpoint: Callable[..., FaultyProxy], s3_client: Any
) -> None:
    proxy = faulty_s3_endpoint(0.0)
    parts = [os.urandom(n) for n in (1, 70_000, 3, 200_000)]
    address = urllib.parse.urlsplit(proxy.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port)
    connection.request("PUT", f"/{s3_bucket}/chunked", body=iter(parts), encode_chunked=True)
    response = connection.getresponse()
    response.read()
    connection.close()
    assert response.status == 200
    stored = s3_client.get_object(Bucket=s3_bucket, Key="chunked")["Body"].read()
    assert hashlib.sha256(stored).digest() == hashlib.sha256(b"".join(parts)).digest()
    assert proxy.forwarded == 1 and sum(proxy.injected.values()) == 0


# --- the ledger -----------------------------------------------------------------------------------------


def test_ledger_records_successful_requests_only(local: LocalDirBlobStore) -> None:
    ledger = LedgerBlobStore(local)
    first = ledger.put(lambda: io.BytesIO(b"1"), metadata()).result()
    second = ledger.put(lambda: io.BytesIO(b"2"), metadata()).result()
    ledger.get(first, lambda: io.BytesIO(), metadata()).result()
    ledger.remove_ttl(first, metadata()).result()
    ledger.delete(second, metadata()).result()
    with pytest.raises(BlobDeletedError):
        ledger.get(second, lambda: io.BytesIO(), metadata()).result()
    with pytest.raises(BlobDeletedError):
        ledger.remove_ttl(second, metadata()).result()
    assert ledger.added == {first, second} and ledger.added_list in ([first, second], [second, first])
    assert (ledger.read, ledger.ttl_removed, ledger.deleted) == ({first}, {first}, {second})
    assert [b.blob_id for b in ledger.list_blobs()] == [first]


def test_a_container_without_s3_does_not_load_boto3() -> None:
    """boto3 costs ~80 ms of every container start; only jobs with blobstore.s3.bucket load it."""
    probe = (
        "import sys, samsa.cli, samsa.runtime.container, samsa.stores.blobstore.factory; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_admin_of_a_jobs_blob_store_gives_up_after_the_configured_retry_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens on port 9 (discard): every request fails retriably. The default is 15 minutes.
    for name, value in FAKE_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    settings = BlobStoreSettings(
        "job",
        "1",
        tmp_path,
        s3_bucket="samsa-unreachable",
        s3_endpoint_url="http://127.0.0.1:9",
        s3_region="us-east-1",
        retry_max_duration_ms=300,
    )
    started = time.monotonic()
    with pytest.raises(BlobStoreError, match="still failed when its retry time ran out"):
        blob_store_admin(settings).create_resources()
    assert time.monotonic() - started < 30
