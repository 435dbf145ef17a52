"""A store backed up to the blob store only, renamed or removed between two starts, on the broker, RocksDB and
a local blob store: a rename is refused touching nothing (renaming back keeps the state), `samsa checkpoint
forget-store` gives the old state up on purpose, a removed store's snapshot is kept until `samsa blobstore
gc`, and a store new to the checkpoint starts empty instead of from a local dir an older run left."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from count_job import final_counts, run_cli

from samsa.checkpoint.model import CheckpointV2
from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.stores.blobstore.exceptions import StoreRenamedError


def _store(name: str) -> dict[str, str]:
    return {
        f"stores.{name}.factory": "rocksdb",
        f"stores.{name}.key.serde": "string",
        f"stores.{name}.msg.serde": "long",
    }


def _job(
    job_config: Callable[..., dict[str, str]], words: str, out: str, blobs: Path, *extra_stores: str
) -> dict[str, str]:
    """Counting into store `counts` (and defining `extra_stores`), all backed up to the blob store only."""
    stores = {k: v for name in ("counts", *extra_stores) for k, v in _store(name).items()}
    return job_config(
        f"kafka.{words}",
        out,
        task="named_store_tasks:NamedStoreCountTask",
        **{
            "job.container.count": "1",
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
            "stores.backup.factories": "blobstore",
            "blobstore.local.dir": str(blobs),
            "test.store": "counts",
            **stores,
        },
    )


def _renamed(config: dict[str, str], old: str, new: str) -> dict[str, str]:
    """The same job with store `old` called `new`, the task counting into it."""
    out = {k.replace(f"stores.{old}.", f"stores.{new}."): v for k, v in config.items()}
    return {**out, "test.store": new}


def _without(config: dict[str, str], store: str, counting: str) -> dict[str, str]:
    """The same job without store `store`, the task counting into store `counting`."""
    return {
        **{k: v for k, v in config.items() if not k.startswith(f"stores.{store}.")},
        "test.store": counting,
    }


def _checkpoints(config: dict[str, str]) -> dict[str, Any]:
    return checkpoint_manager(JobConfig(Config(config))).read_last()


def _snapshots(config: dict[str, str], store: str) -> dict[str, str]:
    """Task -> the index blob id of `store`'s snapshot in its last checkpoint (tasks with one)."""
    out = {}
    for task, checkpoint in _checkpoints(config).items():
        assert isinstance(checkpoint, CheckpointV2)
        blob_id = checkpoint.state_markers.get("blobstore", {}).get(store)
        if blob_id is not None:
            out[task] = blob_id
    return out


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Each file under `root` (but lock files), with its size and modification time."""
    return {
        str(f): (f.stat().st_size, f.stat().st_mtime_ns)
        for f in root.rglob("*")
        if f.is_file() and f.suffix != ".lock"
    }


def test_a_renamed_blob_backed_store_is_refused_and_renaming_it_back_keeps_its_state(
    job_config, topics, produce, read_topic, run_job, tmp_path, subprocess_env
):
    words, out = topics(2), topics(1)
    produce(words, [("a", "a"), ("b", "b"), ("a", "a")], partition=0)
    produce(words, [("c", "c")], partition=1)
    blobs = tmp_path / "blobs"
    v1 = _job(job_config, words, out, blobs)
    v2 = _renamed(v1, "counts", "tally")
    run_job(v1)
    assert final_counts(read_topic(out)) == {"a": 2, "b": 1, "c": 1}
    indexes = _snapshots(v1, "counts")
    assert set(indexes) == {"Partition 0", "Partition 1"}
    ids = {task: str(cp.checkpoint_id) for task, cp in _checkpoints(v1).items()}
    state, stored, sent = _files(tmp_path / "state"), _files(blobs), len(read_topic(out))

    with pytest.raises(StoreRenamedError) as refused:
        run_job(v2)
    message = str(refused.value)
    for task in ("Partition 0", "Partition 1"):
        assert f"task {task!r}: its last checkpoint ({ids[task]})" in message, message
        assert repr(indexes[task]) in message, message
    assert "store(s) 'counts'" in message and "store(s) 'tally'" in message, message
    assert "rename the store back" in message, message
    assert "samsa checkpoint forget-store <job config> --store counts" in message, message
    # `samsa run`: a config error, exit 2, not restarted.
    job_file = tmp_path / "v2.yaml"
    job_file.write_text(json.dumps(v2))
    proc = run_cli(job_file, subprocess_env)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "forget-store" in said and "restarting in" not in said, said[-3000:]
    # Nothing restored, written or deleted: local dirs, blob store, checkpoints and outputs as they were.
    assert _files(tmp_path / "state") == state
    assert _files(blobs) == stored
    assert _snapshots(v1, "counts") == indexes
    assert len(read_topic(out)) == sent

    # Renamed back, the store has all of its state.
    produce(words, [("a", "a")], partition=0)
    run_job(v1)
    assert final_counts(read_topic(out))["a"] == 3


def test_forget_store_gives_the_old_state_up_and_the_renamed_store_starts_empty(
    job_config, topics, produce, read_topic, run_job, tmp_path
):
    words, out = topics(1), topics(1)
    produce(words, [("a", "a"), ("b", "b"), ("a", "a")])
    blobs = tmp_path / "blobs"
    v1 = _job(job_config, words, out, blobs)
    v2 = _renamed(v1, "counts", "tally")
    run_job(v1)
    (old_index,) = _snapshots(v1, "counts").values()
    with pytest.raises(StoreRenamedError):
        run_job(v2)

    job_file = tmp_path / "v2.yaml"
    job_file.write_text(json.dumps(v2))
    # A mistyped store: neither the job's nor in a checkpoint; nothing is written.
    assert main(["checkpoint", "forget-store", str(job_file), "--store", "cuonts"]) == 2
    assert _snapshots(v2, "counts") == {"Partition 0": old_index}
    assert main(["checkpoint", "forget-store", str(job_file), "--store", "counts"]) == 0
    assert _snapshots(v2, "counts") == {}
    assert (blobs / old_index).is_file(), "the snapshot stays in the blob store until `samsa blobstore gc`"

    sent = len(read_topic(out))
    produce(words, [("a", "a"), ("c", "c")])
    run_job(v2)
    assert final_counts(read_topic(out)[sent:]) == {"a": 1, "c": 1}
    assert set(_snapshots(v2, "tally")) == {"Partition 0"}


def test_a_removed_store_keeps_its_snapshot_for_gc_and_starts_empty_when_defined_again(
    job_config, topics, produce, read_topic, run_job, tmp_path, caplog
):
    words, out = topics(1), topics(1)
    blobs = tmp_path / "blobs"
    # Store `other` is backed up too: the job still backs a store up to the blob store when counts goes.
    v1 = _job(job_config, words, out, blobs, "other")
    removed = _without(v1, "counts", counting="other")
    produce(words, [("a", "a"), ("b", "b"), ("a", "a")])
    run_job(v1)
    assert final_counts(read_topic(out)) == {"a": 2, "b": 1}
    (old_index,) = _snapshots(v1, "counts").values()

    produce(words, [("b", "b")])
    with caplog.at_level(logging.WARNING, "samsa.stores.blobstore.renamed"):
        run_job(removed)  # not refused: no store new to the checkpoint
    warned = [r.getMessage() for r in caplog.records if r.name == "samsa.stores.blobstore.renamed"]
    assert len(warned) == 1 and "store counts:" in warned[0] and old_index in warned[0], warned
    assert "samsa blobstore gc" in warned[0], warned
    assert _snapshots(removed, "counts") == {}
    assert (blobs / old_index).is_file(), "kept: the job's commits do not delete a removed store's snapshot"

    # Defined again: the checkpoint has no snapshot of it, so it starts empty, here as on another host; the
    # local dir the first run left is not taken for its state.
    sent = len(read_topic(out))
    produce(words, [("a", "a")])
    run_job(v1)
    assert final_counts(read_topic(out)[sent:]) == {"a": 1}

    job_file = tmp_path / "v1.yaml"
    job_file.write_text(json.dumps(v1))
    assert main(["blobstore", "gc", str(job_file)]) == 0
    assert not (blobs / old_index).exists(), "gc deletes the snapshot no checkpoint names"
