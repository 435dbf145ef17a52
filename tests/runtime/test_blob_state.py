"""Blob-store state on the real broker, RocksDB and blob store: new hosts, crashes, migration, fallback."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from count_job import WORDS, count_job, final_counts, run_cli, store_counts

from samsa.checkpoint.model import CheckpointV2
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.stores.blobstore.api import SNAPSHOT_INDEX_PATH, BlobMetadata
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.transfer import BlobTransfer


def _count_job(job_config, words: str, out: str, blobs: Path, **extra: str) -> dict[str, str]:
    return count_job(
        job_config,
        words,
        out,
        **{"stores.backup.factories": "blobstore", "blobstore.local.dir": str(blobs), **extra},
    )


def _checkpoints(config: dict[str, str]) -> dict[str, Any]:
    manager = checkpoint_manager(JobConfig(Config(config)))
    return manager.read_last()


def _snapshot_counts(config: dict[str, str], task: str, tmp: Path) -> dict[str, int]:
    """The counts store as the task's last checkpoint names it, downloaded from the blob store."""
    checkpoint = _checkpoints(config)[task]
    assert isinstance(checkpoint, CheckpointV2)
    index_id = checkpoint.state_markers["blobstore"]["counts"]
    job = JobConfig(Config(config))
    with ThreadPoolExecutor(4) as pool:
        transfer = BlobTransfer(LocalDirBlobStore(Path(config["blobstore.local.dir"]), pool, 3600.0))
        base = BlobMetadata("", -1, job.name, job.id, task, "counts")
        index = transfer.get_index(index_id, base)
        target = tmp / f"download-{task.replace(' ', '_')}-{index_id.rsplit('.', 1)[-1]}"
        transfer.restore_dir(index.dir_index, target, base)
    return dict(store_counts(target))


def _expected_at_checkpoint(config, read_topic, words: str, task: str) -> Counter[str]:
    """Counts implied by the inputs up to the task's checkpointed offsets."""
    checkpoint = _checkpoints(config)[task]
    limits = {ssp.partition: offset for ssp, offset in checkpoint.offsets.items() if ssp.stream == words}
    return Counter(
        key.decode()
        for partition, offset, key, _ in read_topic(words)
        if partition in limits and offset < limits[partition]
    )


def test_a_new_host_restores_the_store_from_the_blob_store(
    job_config, topics, produce, read_topic, run_job, tmp_path
):
    words, out = topics(2), topics(2)
    first = random.Random(1).choices(WORDS, k=300)
    produce(words, [(w, w) for w in first])
    config = _count_job(job_config, words, out, tmp_path / "blobs")
    run_job(config)
    second = random.Random(2).choices(WORDS, k=200)
    produce(words, [(w, w) for w in second])
    moved = {**config, "job.logged.store.base.dir": str(tmp_path / "other-host")}
    (container,) = run_job(moved)  # no local state: the stores come back from the blob store
    assert final_counts(read_topic(out)) == Counter(first + second)
    metrics = container.registry.snapshot()
    downloaded = metrics["samsa_blobstore_downloaded_files"]
    assert len(downloaded) == 2 and all(d["value"] > 0 for d in downloaded)
    assert sum(u["value"] for u in metrics["samsa_blobstore_uploaded_bytes_total"]) > 0
    for task in ("Partition 0", "Partition 1"):
        assert _snapshot_counts(moved, task, tmp_path) == _expected_at_checkpoint(
            moved, read_topic, words, task
        )


def test_the_same_host_reuses_its_local_checkpoint_without_downloading(
    job_config, topics, produce, read_topic, run_job, tmp_path
):
    words, out = topics(1), topics(1)
    sent = random.Random(3).choices(WORDS, k=200)
    produce(words, [(w, w) for w in sent])
    config = _count_job(job_config, words, out, tmp_path / "blobs")
    run_job(config)
    produce(words, [("fig", "fig")])
    (container,) = run_job(config)
    assert final_counts(read_topic(out)) == Counter([*sent, "fig"])
    downloaded = container.registry.snapshot()["samsa_blobstore_downloaded_files"]
    assert [d["value"] for d in downloaded] == [0]


def test_the_tasks_blob_store_round_trips_overlap_at_start_and_stop(
    job_config, topics, produce, read_topic, run_job, tmp_path, monkeypatch
):
    # Each task's snapshot index is read (restore, then the backup manager's start-up cleanup) and written
    # (the start-up and final commits) only once both tasks are at the same step: done one task after
    # the other, the first would wait at the barrier until it breaks and the job would fail.
    reads, writes = threading.Barrier(2, timeout=10), threading.Barrier(2, timeout=10)
    get, put = LocalDirBlobStore._get, LocalDirBlobStore._put

    def paired_get(self: LocalDirBlobStore, blob_id: str, sink: Any, metadata: BlobMetadata) -> None:
        if metadata.payload_path == SNAPSHOT_INDEX_PATH:
            reads.wait()
        get(self, blob_id, sink, metadata)

    def paired_put(self: LocalDirBlobStore, source: Any, metadata: BlobMetadata) -> str:
        if metadata.payload_path == SNAPSHOT_INDEX_PATH:
            writes.wait()
        return put(self, source, metadata)

    monkeypatch.setattr(LocalDirBlobStore, "_get", paired_get)
    monkeypatch.setattr(LocalDirBlobStore, "_put", paired_put)
    words, out = topics(2), topics(2)
    sent = random.Random(5).choices(WORDS, k=100)
    produce(words, [(w, w) for w in sent])
    config = _count_job(job_config, words, out, tmp_path / "blobs")
    run_job(config)
    run_job({**config, "job.logged.store.base.dir": str(tmp_path / "other-host")})  # restores both tasks
    assert final_counts(read_topic(out)) == Counter(sent)
    assert not reads.broken and not writes.broken


@pytest.mark.parametrize("crash", ["during-processing", "after-snapshot", "after-upload", "after-checkpoint"])
def test_a_kill_9_at_each_commit_step_then_a_fresh_host_restores_the_checkpoint(
    crash, job_config, topics, produce, read_topic, tmp_path, subprocess_env
):
    words, out = topics(2), topics(2)
    sent = random.Random(5).choices(WORDS, k=1000)
    produce(words, [(w, w) for w in sent])
    marker = tmp_path / "crashed"
    extra = {"task.commit.ms": "100", "test.sleep.us": "300"}
    env = dict(subprocess_env)
    if crash == "during-processing":
        extra |= {"test.kill.at.value": "250", "test.kill.marker": str(marker)}
    else:
        env |= {"SAMSA_CRASH_AT": crash, "SAMSA_CRASH_ONCE": str(marker), "SAMSA_CRASH_SKIP": "2"}
    config = _count_job(job_config, words, out, tmp_path / "blobs", **extra)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    proc = run_cli(job_file, env, "--container-id", "0")
    assert proc.returncode == -9, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert marker.exists(), f"the container did crash ({crash})"
    # What the blob store holds for the checkpoint is exactly the state of the checkpointed offsets.
    for task in ("Partition 0", "Partition 1"):
        assert _snapshot_counts(config, task, tmp_path) == _expected_at_checkpoint(
            config, read_topic, words, task
        )
    fresh = tmp_path / "fresh-host"
    proc = run_cli(job_file, env, f"--config=job.logged.store.base.dir={fresh}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Outputs may repeat (at-least-once), but the store counted every input exactly once.
    assert final_counts(read_topic(out)) == Counter(sent)


def _index(config: dict[str, str], task: str, index_id: str) -> Any:
    job = JobConfig(Config(config))
    with ThreadPoolExecutor(2) as pool:
        transfer = BlobTransfer(LocalDirBlobStore(Path(config["blobstore.local.dir"]), pool, 3600.0))
        return transfer.get_index(index_id, BlobMetadata("", -1, job.name, job.id, task, "counts"))


def _live_snapshots(config: dict[str, str]) -> tuple[set[str], set[str]]:
    """(index blob ids, file blob ids) of the snapshots the job's last checkpoints name."""
    indexes, files = set(), set()
    for task, checkpoint in _checkpoints(config).items():
        index_id = checkpoint.state_markers["blobstore"]["counts"]
        indexes.add(index_id)
        files |= set(_index(config, task, index_id).dir_index.present_blobs())
    return indexes, files


def test_samzas_ledger_checks_hold_over_restarts_and_a_new_host(
    job_config, topics, produce, read_topic, run_job, tmp_path, monkeypatch
):
    from blob_ledger import LedgerBlobStore

    import samsa.stores.blobstore.factory as factory

    ledgers: list[LedgerBlobStore] = []
    opened = factory.open_blob_store

    def recorded(settings, executor, s3_client=None):
        ledger = LedgerBlobStore(opened(settings, executor, s3_client))
        ledgers.append(ledger)
        return ledger

    monkeypatch.setattr(factory, "open_blob_store", recorded)
    words, out = topics(2), topics(2)
    sent: list[str] = []
    config = _count_job(job_config, words, out, tmp_path / "blobs", **{"task.commit.ms": "200"})
    for run in range(3):
        batch = random.Random(10 + run).choices(WORDS, k=300)
        sent += batch
        produce(words, [(w, w) for w in batch])
        run_job(config)
    index_ids, file_blobs = _live_snapshots(config)
    produce(words, [("fig", "fig")])
    sent.append("fig")
    ledgers.clear()
    moved = {**config, "job.logged.store.base.dir": str(tmp_path / "new-host")}
    run_job(moved)
    assert final_counts(read_topic(out)) == Counter(sent)
    backup_ledger, restore_ledger = ledgers  # the factory opens the backup store, then the restore store
    # 1. A new host reads exactly the last snapshot's blobs and its index, each once; anything else read
    # is an index. The cleanup re-run at start takes the index the restore read: it reads nothing.
    assert restore_ledger.read - index_ids == file_blobs
    assert sorted(restore_ledger.read_list) == sorted(restore_ledger.read)
    assert backup_ledger.read == set()
    # 2 and 3, over the whole history: the blob store holds exactly the live snapshots, all permanent.
    final_indexes, final_files = _live_snapshots(moved)
    stored = {info.blob_id: info for info in LocalDirBlobStore(tmp_path / "blobs", None, 1).list_blobs()}
    assert set(stored) == final_indexes | final_files
    assert all(info.expires_at is None for info in stored.values())


def test_migration_changelog_to_dual_to_blob_restore_and_back(
    job_config, topics, produce, read_topic, run_job, tmp_path, kafka_admin
):
    words, out = topics(2), topics(2)
    changelog = f"{words}-counts-changelog"
    base = _count_job(
        job_config, words, out, tmp_path / "blobs", **{"stores.counts.changelog": f"kafka.{changelog}"}
    )
    del base["stores.backup.factories"]  # step 0: the changelog alone (the default)
    dual = {**base, "stores.backup.factories": "changelog,blobstore"}
    steps: list[tuple[str, dict[str, str], str]] = [
        ("changelog only", base, "changelog"),
        ("dual backup, restore from the changelog", dual, "changelog"),
        ("restore from the blob store", {**dual, "stores.restore.factories": "blobstore,changelog"}, "blob"),
        (
            "switch restore back to the changelog",
            {**dual, "stores.restore.factories": "changelog"},
            "changelog",
        ),
        ("blob store only", {**base, "stores.backup.factories": "blobstore"}, "blob"),
    ]
    sent: list[str] = []
    try:
        for step, (name, config, source) in enumerate(steps):
            batch = random.Random(20 + step).choices(WORDS, k=150)
            sent += batch
            produce(words, [(w, w) for w in batch])
            host = {**config, "job.logged.store.base.dir": str(tmp_path / f"host-{step}")}
            (container,) = run_job(host)
            assert final_counts(read_topic(out)) == Counter(sent), name
            metrics = container.registry.snapshot()
            downloaded = sum(d["value"] for d in metrics.get("samsa_blobstore_downloaded_files", []))
            replayed = sum(r["value"] for r in metrics.get("samsa_store_restored_records", []))
            if step == 0:
                continue  # nothing to restore yet
            if source == "blob":
                assert downloaded > 0 and replayed == 0, (name, downloaded, replayed)
            else:
                assert downloaded == 0 and replayed > 0, (name, downloaded, replayed)
    finally:
        kafka_admin.delete_topics([changelog])


def _delete_a_file_blob(config: dict[str, str], task: str) -> str:
    checkpoint = _checkpoints(config)[task]
    index_id = checkpoint.state_markers["blobstore"]["counts"]
    victim = sorted(_index(config, task, index_id).dir_index.present_blobs())[0]
    with ThreadPoolExecutor(1) as pool:
        store = LocalDirBlobStore(Path(config["blobstore.local.dir"]), pool, 3600.0)
        store.delete(victim, BlobMetadata("x", -1, "j", "1", task, "counts")).result()
    return victim


def test_a_missing_blob_falls_back_to_the_changelog_and_says_so(
    job_config, topics, produce, read_topic, run_job, tmp_path, kafka_admin, caplog
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    config = _count_job(
        job_config,
        words,
        out,
        tmp_path / "blobs",
        **{
            "stores.counts.changelog": f"kafka.{changelog}",
            "stores.backup.factories": "changelog,blobstore",
            "stores.restore.factories": "blobstore,changelog",
        },
    )
    sent = random.Random(30).choices(WORDS, k=200)
    produce(words, [(w, w) for w in sent])
    try:
        run_job(config)
        victim = _delete_a_file_blob(config, "Partition 0")
        produce(words, [("kiwi", "kiwi")])
        caplog.set_level("WARNING")
        run_job({**config, "job.logged.store.base.dir": str(tmp_path / "new-host")})
        assert final_counts(read_topic(out)) == Counter([*sent, "kiwi"])
        assert "restoring from its changelog instead of the blob store" in caplog.text
        assert victim in caplog.text
    finally:
        kafka_admin.delete_topics([changelog])


def test_a_missing_blob_without_a_changelog_fails_naming_store_file_and_blob(
    job_config, topics, produce, read_topic, run_job, tmp_path
):
    from samsa.stores.blobstore.exceptions import BlobDeletedError, SnapshotUnusableError

    words, out = topics(1), topics(1)
    config = _count_job(job_config, words, out, tmp_path / "blobs")
    produce(words, [(w, w) for w in random.Random(31).choices(WORDS, k=100)])
    run_job(config)
    victim = _delete_a_file_blob(config, "Partition 0")
    # No changelog to fall back on: every restart meets it again, so not a restartable BlobDeletedError.
    with pytest.raises(SnapshotUnusableError) as failure:
        run_job({**config, "job.logged.store.base.dir": str(tmp_path / "new-host")})
    assert isinstance(failure.value.__cause__, BlobDeletedError)
    message = str(failure.value)
    file_name = victim.rsplit("/", 1)[-1].rsplit(".", 1)[0]  # blob ids end in .<uuid>
    assert victim in message and "store counts" in message and f"{file_name} of store" in message
