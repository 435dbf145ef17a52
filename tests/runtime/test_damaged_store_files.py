"""Damaged RocksDB files of a store's local copy, on the real broker: a store with a changelog is restored
from it at the restart the failure asks for (its local copy and checkpoint dirs never reused); a store no
backup can replace stops the job once, with a clear error and without restarts."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from adjunct_jobs import enrich_job
from count_job import WORDS, count_job, final_counts, run_cli, store_counts
from job_fixtures import job_config, produce, read_topic, run_job, subprocess_env

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.stores.blobstore.diff import SMALL_FILE_BYTES

__all__ = ["job_config", "produce", "read_topic", "run_job", "subprocess_env"]


def damage_ssts(task_dir: Path, store: str) -> list[Path]:
    """Flips 200 bytes of every SST file of `store`'s live and checkpoint dirs, once per file (the
    checkpoint dirs hard-link the live dir's files: flipping a link twice would undo it)."""
    seen: set[tuple[int, int]] = set()
    damaged = []
    for sst in sorted(task_dir.glob(f"{store}*/*.sst")):
        stat = sst.stat()
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        data = bytearray(sst.read_bytes())
        end = min(len(data), 300)
        data[100:end] = bytes(b ^ 0x5A for b in data[100:end])
        sst.write_bytes(data)
        damaged.append(sst)
    return damaged


def _task_dir(config: dict[str, str]) -> Path:
    job = JobConfig(Config(config))
    return Path(config["job.logged.store.base.dir"]) / job.job_key / "Partition_0"


# Small: RocksDB meets the damage when the restore opens the store. Big (many data blocks): the open
# reads only the index and filter blocks at the file's end, and the damage (in the first block) is met by
# a read in process(). Huge: an SST over 1 MiB, which a blob-store restore reuses without reading it
# through (a smaller one's checksum is checked, and a damaged one downloaded again).
SIZES = {
    "small": (WORDS, "open failed"),
    "big": ([f"word-{i:05d}-{'x' * 40}" for i in range(3000)], "read failed"),
    "huge": ([f"word-{i:05d}-{random.Random(i).randbytes(40).hex()}" for i in range(20000)], "read failed"),
}


@pytest.mark.parametrize(
    ("backup", "size"), [("changelog", "small"), ("changelog", "big"), ("blobstore", "huge")]
)
def test_a_damaged_store_with_a_backup_is_restored_from_it_with_exact_counts(
    backup, size, job_config, topics, produce, read_topic, run_job, tmp_path, kafka_admin, subprocess_env
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    backed_up = (
        {"stores.counts.changelog": f"kafka.{changelog}"}
        if backup == "changelog"
        else {"stores.counts.backup.factories": "blobstore", "blobstore.local.dir": str(tmp_path / "blobs")}
    )
    config = count_job(job_config, words, out, **{**backed_up, "task.commit.ms": "500"})
    vocabulary, met_at = SIZES[size]
    sent = [*vocabulary, *random.Random(7).choices(vocabulary, k=120)]
    try:
        produce(words, [(w, w) for w in sent])
        # One commit, at the end: a commit part-way through would flush the first keys to an SST of their
        # own, below the size at which a blob-store restore reuses a file unread, and the damage would be
        # repaired by a download instead of met by a read.
        run_job({**config, "task.commit.ms": "600000"})
        task_dir = _task_dir(config)
        damaged = damage_ssts(task_dir, "counts")
        assert damaged, "the first run left no SST file to damage"
        if size == "huge":
            assert [p.stat().st_size > SMALL_FILE_BYTES for p in damaged] == [True], damaged
        more = [vocabulary[0], *random.Random(8).choices(vocabulary, k=40)]  # one key of the first block
        produce(words, [(w, w) for w in more])
        job_file = tmp_path / "job.yaml"
        job_file.write_text(json.dumps(config))

        ran = run_cli(job_file, subprocess_env)

        text = ran.stdout + ran.stderr
        assert ran.returncode == 0, text[-4000:]
        assert "it is locked" not in text, text[-4000:]
        (warning,) = [line for line in text.splitlines() if "WARNING" in line and "is damaged" in line]
        assert "store counts of task Partition 0" in warning and str(task_dir / "counts") in warning
        assert "Corruption:" in warning and ".sst" in warning and met_at in warning, warning
        assert ("its changelog" if backup == "changelog" else "its blob-store snapshot") in warning
        assert "process() failed" not in text and "Traceback" not in text, text[-4000:]
        assert text.count("restarting in") == 1, text[-4000:]
        assert "deleting its local copy" in text, "the restart did not discard the damaged copy"
        expected = Counter(sent + more)
        assert final_counts(read_topic(out)) == expected
        assert store_counts(task_dir / "counts") == expected
        assert not (task_dir / "counts.damaged").exists()
    finally:
        if backup == "changelog":
            kafka_admin.delete_topics([changelog])


def _cdc(cid: int, name: str) -> tuple[str, str]:
    payload = {"before": None, "after": {"id": cid, "name": name}, "op": "c", "ts_ms": 1}
    return json.dumps({"id": cid}), json.dumps(payload)


def test_a_damaged_store_without_a_backup_stops_the_job_once_and_is_kept(
    job_config, topics, produce, run_job, tmp_path, subprocess_env
):
    """An adjunct store is kept from run to run, and no backend can restore it: its damage is a clear error
    naming the store, dir and file, with no restart, and its files stay."""
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [_cdc(i, f"c{i}") for i in range(1, 200)])
    produce(orders, [("1", "o1")])
    config = enrich_job(job_config, orders, customers, out)
    config["deploy.local.max.restarts"] = "3"
    run_job(config)
    task_dir = _task_dir(config)
    damaged = damage_ssts(task_dir, "customers")
    assert damaged, "the first run left no SST file to damage"
    produce(orders, [("2", "o2")])
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))

    ran = run_cli(job_file, subprocess_env)

    text = ran.stdout + ran.stderr
    assert ran.returncode == 1 and "restarting in" not in text, text[-4000:]
    assert "stopped on a store whose local files are damaged" in text, text[-4000:]
    assert "process() failed" not in text and "Traceback" not in text, text[-4000:]
    assert "it is locked" not in text, text[-4000:]
    assert "store 'customers' of task 'Partition 0'" in text and str(task_dir / "customers") in text
    assert "is damaged" in text and "no backup to restore it from" in text, text[-4000:]
    assert any(str(path.name) in text for path in damaged), "the error names no damaged file"
    assert f"delete {task_dir / 'customers'}" in text, "the error does not say what to do"
    assert all(path.exists() for path in damaged), "a copy without a backup was deleted"
