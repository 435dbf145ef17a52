"""A blob-store-only job restarted after its input gained partitions is refused at start (its keys moved to
other tasks, its snapshots hold them in the old ones), on the real broker, RocksDB and local blob store."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from count_job import WORDS, count_job, final_counts
from topic_growth import grow, produce_new

from samsa.checkpoint.model import CheckpointV2
from samsa.deploy.bootstrap import (
    BootstrapPlan,
    BootstrapRequest,
    PartitionResult,
    bootstrap_state,
    row_encoder,
    write_partition,
)
from samsa.kafka.partitioner import partition_for
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.exceptions import InputPartitionsChangedError
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.transfer import BlobTransfer


def _blob_job(job_config: Callable[..., dict[str, str]], words: str, out: str, blobs: Path) -> dict[str, str]:
    return count_job(
        job_config,
        words,
        out,
        **{"stores.backup.factories": "blobstore", "blobstore.local.dir": str(blobs)},
    )


def _checkpoints(config: dict[str, str]) -> dict[str, Any]:
    return dict(checkpoint_manager(JobConfig(Config(config))).read_last())


def _recorded_counts(config: dict[str, str], task: str) -> dict[str, int] | None:
    """The input partition counts recorded in the snapshot of `counts` the task's checkpoint names."""
    checkpoint = _checkpoints(config)[task]
    assert isinstance(checkpoint, CheckpointV2)
    job = JobConfig(Config(config))
    with ThreadPoolExecutor(2) as pool:
        transfer = BlobTransfer(LocalDirBlobStore(Path(config["blobstore.local.dir"]), pool, 3600.0))
        base = BlobMetadata.of_store(job.name, job.id, task, "counts")
        index = transfer.get_index(checkpoint.state_markers["blobstore"]["counts"], base)
    return index.metadata.input_partitions


def test_a_restart_after_the_input_grew_is_refused_and_processes_nothing(
    broker_bootstrap, job_config, topics, produce, read_topic, run_job, tmp_path
):
    words, out = topics(2), topics(1)
    sent = random.Random(5).choices(WORDS, k=100)
    produce(words, [(w, w) for w in sent])
    config = _blob_job(job_config, words, out, tmp_path / "blobs")
    run_job(config)
    assert _recorded_counts(config, "Partition 0") == {f"kafka.{words}": 2}
    produce(words, [("fig", "fig")])
    run_job(config)  # the same counts: restored from its snapshots, and goes on
    assert final_counts(read_topic(out)) == Counter([*sent, "fig"])
    outputs, checkpoints = read_topic(out), _checkpoints(config)

    grow(broker_bootstrap, words, 4)
    produce_new(broker_bootstrap, words, ["kiwi"], partition=3)
    with pytest.raises(InputPartitionsChangedError) as refused:
        run_job(config)

    message = str(refused.value)
    assert "store 'counts' of task 'Partition " in message, message
    assert f"kafka.{words}: 2 -> 4 partitions" in message, message
    assert "new job.id" in message and "samsa state bootstrap" in message, message
    assert read_topic(out) == outputs  # nothing processed
    assert _checkpoints(config) == checkpoints  # nothing committed


def _run_partitions(rows: list[tuple[str, int]]) -> Callable[..., list[PartitionResult]]:
    """The bootstrap's batch job without Spark: each task partition's rows, sorted, as Spark writes them."""

    def run(plan: BootstrapPlan, on_done: Callable[[PartitionResult], None]) -> list[PartitionResult]:
        encode = row_encoder(plan)
        entries = sorted(encode(row) for row in rows)
        results = []
        for p in range(plan.partitions):
            result = write_partition(
                plan, p, [e for e in entries if partition_for(e[0], plan.partitions) == p]
            )
            on_done(result)
            results.append(result)
        return results

    return run


def test_a_state_bootstrap_records_the_counts_it_bootstraps_for(
    broker_bootstrap, job_config, topics, produce, read_topic, run_job, tmp_path
):
    words, out = topics(2), topics(1)
    config = _blob_job(job_config, words, out, tmp_path / "blobs")
    job = JobConfig(Config(config))
    request = BootstrapRequest("counts", "rows", key="word", values=("count",), offsets="earliest")
    rows = [("apple", 10), ("pear", 20), ("plum", 30)]

    bootstrap_state(job, request, _run_partitions(rows), lambda line: None)

    assert _recorded_counts(config, "Partition 1") == {f"kafka.{words}": 2}
    produce(words, [("apple", "apple")])
    run_job(config)  # the bootstrapped snapshots restore under the counts they recorded
    assert final_counts(read_topic(out)) == {"apple": 11}
    # Grown since: a bootstrap adds its rows to the state restored first, which is refused too.
    grow(broker_bootstrap, words, 3)
    with pytest.raises(InputPartitionsChangedError, match=rf"kafka\.{words}: 2 -> 3 partitions"):
        bootstrap_state(job, request, _run_partitions(rows), lambda line: None)
