"""Blob-store state on S3 (moto's server over HTTP, behind a proxy failing 10% of requests)."""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from count_job import WORDS, final_counts

from samsa.checkpoint.model import CheckpointV2
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.s3 import TTL_TAG_KEY, S3BlobStore
from samsa.stores.blobstore.transfer import BlobTransfer


def test_commits_and_restores_on_s3_succeed_through_faults_and_leak_nothing(
    job_config,
    topics,
    produce,
    read_topic,
    run_job,
    tmp_path,
    s3_bucket,
    s3_client,
    moto_endpoint,
    faulty_s3_endpoint,
):
    proxy = faulty_s3_endpoint(0.1, seed=7)
    words, out = topics(2), topics(2)
    config = job_config(
        f"kafka.{words}",
        out,
        task="samsa_test_tasks:CountTask",
        **{
            "task.commit.ms": "200",
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.backup.factories": "blobstore",
            "blobstore.s3.bucket": s3_bucket,
            "blobstore.s3.prefix": "jobs/counts",
            "blobstore.s3.endpoint.url": proxy.url,
            "blobstore.s3.region": "us-east-1",
            "blobstore.chunk.size": "4096",  # SST files span several blobs
        },
    )
    sent: list[str] = []
    for run in range(3):
        batch = random.Random(40 + run).choices(WORDS, k=300)
        sent += batch
        produce(words, [(w, w) for w in batch])
        host = {**config, "job.logged.store.base.dir": str(tmp_path / f"host-{run}")}  # a new host each time
        run_job(host)
        assert final_counts(read_topic(out)) == Counter(sent)
    assert sum(proxy.injected.values()) > 0, "faults were injected"

    # The bucket holds exactly the last snapshots (files and indexes), every object permanent.
    job = JobConfig(Config(config))
    live: set[str] = set()
    with ThreadPoolExecutor(4) as pool:
        store = S3BlobStore(
            s3_bucket, "jobs/counts", pool, 30, endpoint_url=moto_endpoint, region="us-east-1"
        )
        store.init()
        transfer = BlobTransfer(store)
        for task, checkpoint in checkpoint_manager(job).read_last().items():
            assert isinstance(checkpoint, CheckpointV2)
            index_id = checkpoint.state_markers["blobstore"]["counts"]
            index = transfer.get_index(index_id, BlobMetadata("", -1, job.name, job.id, task, "counts"))
            live |= {store.key(b) for b in index.dir_index.present_blobs()} | {store.key(index_id)}
    stored = set()
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket):
        stored |= {item["Key"] for item in page.get("Contents", [])}
    assert stored == live
    for key in stored:
        tags = s3_client.get_object_tagging(Bucket=s3_bucket, Key=key)["TagSet"]
        assert TTL_TAG_KEY not in {t["Key"] for t in tags}, key
    rules = s3_client.get_bucket_lifecycle_configuration(Bucket=s3_bucket)["Rules"]
    assert any(rule["Expiration"]["Days"] == 30 for rule in rules)
