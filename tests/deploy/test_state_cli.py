"""`samsa state` and `samsa blobstore` as subprocesses, on a word count backed up to the blob store."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from count_job import WORDS, count_job, store_counts

INDEX_ID = re.compile(r"\S+/snapshot-index\.[0-9a-f]{32}")


def _samsa(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_state_ls_show_download_and_verify_a_blob_backed_job(
    job_config, topics, produce, run_job, tmp_path, subprocess_env
):
    words, out = topics(2), topics(2)
    sent = random.Random(11).choices(WORDS, k=400)
    produce(words, [(w, w) for w in sent])
    blobs = tmp_path / "blobs"
    config = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.backup.factories": "blobstore", "blobstore.local.dir": str(blobs)},
    )
    run_job(config)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    env, job = subprocess_env, str(job_file)

    ls = _samsa(env, "state", "ls", job)
    assert ls.returncode == 0, ls.stderr[-3000:]
    rows = {line.split("  ")[0]: line for line in ls.stdout.splitlines() if line.startswith("Partition")}
    assert set(rows) == {"Partition 0", "Partition 1"}, ls.stdout
    ids = {}
    for task, line in rows.items():
        assert "counts" in line and "blobstore" in line, line
        (ids[task],) = INDEX_ID.findall(line)

    show = _samsa(env, "state", "show", job, ids["Partition 0"])
    assert show.returncode == 0, show.stderr[-3000:]
    assert "task Partition 0, store counts" in show.stdout and "CURRENT" in show.stdout, show.stdout
    raw = _samsa(env, "state", "show", "--json", job, ids["Partition 0"])
    index = json.loads(raw.stdout)
    assert index["snapshot-metadata"]["task-name"] == "Partition 0"

    downloaded: Counter[str] = Counter()
    for task in ("Partition 0", "Partition 1"):
        target = tmp_path / "offline" / task.replace(" ", "-")
        got = _samsa(env, "state", "download", job, "--task", task, "--store", "counts", "--to", str(target))
        assert got.returncode == 0, got.stderr[-3000:]
        assert f"into {target}" in got.stdout and "file(s)" in got.stdout
        downloaded += store_counts(target)
    assert downloaded == Counter(sent), "the two tasks' snapshots hold every count"

    again = _samsa(
        env, "state", "download", job, "--task", "Partition 0", "--store", "counts", "--to", str(target)
    )
    assert again.returncode == 2 and "not an empty dir" in again.stderr
    unknown = _samsa(env, "state", "download", job, "--task", "Partition 7", "--store", "counts", "--to", "x")
    assert unknown.returncode == 2 and "tasks: Partition 0, Partition 1" in unknown.stderr, unknown.stderr

    verify = _samsa(env, "blobstore", "verify", job)
    assert verify.returncode == 0, verify.stdout + verify.stderr[-3000:]
    assert "verified 2 snapshot(s)" in verify.stdout and "all match" in verify.stdout

    current = next(f for f in index["dir-index"]["files-present"] if f["file-name"] == "CURRENT")
    (blob_id,) = [b["blob-id"] for b in current["blobs"]]
    (blobs / blob_id).write_bytes(b"MANIFEST-999999\n")
    broken = _samsa(env, "blobstore", "verify", job)
    assert broken.returncode == 1, broken.stdout + broken.stderr[-3000:]
    assert f"task Partition 0 store counts file CURRENT blob {blob_id}: CORRUPT" in broken.stdout

    gc = _samsa(env, "blobstore", "gc", "--dry-run", job)
    assert gc.returncode == 0, gc.stderr[-3000:]
    assert "would delete 0 expired blob(s)" in gc.stdout


def _offline_job(tmp_path: Path, blobs: Path) -> str:
    """A job file for commands that read only the blob store (no broker is reached)."""
    config = {
        "job.name": "offline",
        "task.class": "samsa_test_tasks:CountTask",
        "task.inputs": "kafka.words",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:1",
        "stores.counts.factory": "rocksdb",
        "stores.counts.backup.factories": "blobstore",
        "blobstore.local.dir": str(blobs),
    }
    path = tmp_path / "offline.yaml"
    path.write_text(json.dumps(config))
    return str(path)


def test_show_names_a_missing_index_or_blob_store_dir_in_one_line(tmp_path, caplog):
    from samsa.cli import main

    blobs = tmp_path / "blobs"
    job = _offline_job(tmp_path, blobs)
    missing = "offline-1/Partition_0/counts/snapshot-index." + "0" * 32
    assert main(["state", "show", job, missing]) == 2
    assert f"blobstore.local.dir={blobs} does not exist" in caplog.text
    blobs.mkdir()
    caplog.clear()
    assert main(["state", "show", job, missing]) == 2
    assert f"blob {missing!r} does not exist in the blob store" in caplog.text
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
    caplog.clear()
    assert main(["state", "show", job, "offline-1/Partition_0/counts/snapshot-indx"]) == 2
    assert "snapshot index 'offline-1/Partition_0/counts/snapshot-indx' does not exist" in caplog.text
    assert "corrupt" not in caplog.text


def test_state_and_blobstore_commands_on_a_job_that_never_ran_say_so(job_config, topics, tmp_path, caplog):
    from samsa.cli import main

    blobs = tmp_path / "blobs"
    blobs.mkdir()
    config = count_job(
        job_config,
        topics(1),
        "unused",
        **{"stores.counts.backup.factories": "blobstore", "blobstore.local.dir": str(blobs)},
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    download = [
        "state",
        "download",
        "--task",
        "Partition 0",
        "--store",
        "counts",
        "--to",
        str(tmp_path / "o"),
    ]
    for command in (["state", "ls"], download, ["blobstore", "verify"], ["blobstore", "gc"]):
        caplog.clear()
        assert main([*command, str(job_file)]) == 2, command
        assert f"job {config['job.name']} (id 1) has no checkpoints" in caplog.text, command
        assert "check job.name and job.id" in caplog.text and "UNKNOWN_PARTITION" not in caplog.text


def test_blob_commands_of_a_job_with_no_blob_backed_store_say_there_is_none(tmp_path, caplog):
    from samsa.cli import main

    config = json.loads(Path(_offline_job(tmp_path, tmp_path / "blobs")).read_text())
    del config["stores.counts.backup.factories"]
    config["stores.counts.changelog"] = "kafka.offline-counts-changelog"
    job = tmp_path / "changelog-only.yaml"
    job.write_text(json.dumps(config))
    assert main(["state", "show", str(job), "offline-1/Partition_0/counts/snapshot-index." + "0" * 32]) == 2
    assert "backs up no store to the blob store" in caplog.text
    assert "start the job once" not in caplog.text
