"""Blob-store snapshots record the partition counts of the job's grouped inputs, and a restore under other
counts is refused before the store is touched (its keys now belong to other tasks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.job_model import ContainerModel, JobModel, build_job_model, grouped_counts
from samsa.runtime.state import input_partitions
from samsa.stores.backend import Markers, TaskRestoreManager, TaskStoresContext
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.backup import BlobStoreBackupManager
from samsa.stores.blobstore.exceptions import SNAPSHOT_UNUSABLE, InputPartitionsChangedError
from samsa.stores.blobstore.index import DirIndex, SnapshotIndex, SnapshotMetadata
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.restore import BlobStoreRestoreManager
from samsa.stores.blobstore.tool import render_index
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import checkpoint_dir
from samsa.stores.storage_manager import StoreRestore
from samsa.streams import SystemStream, SystemStreamPartition

WORDS, CLICKS = "kafka.words", "kafka.clicks"


# -- the index ------------------------------------------------------------------------------------------
def _index(counts: dict[str, int] | None) -> SnapshotIndex:
    meta = SnapshotMetadata("1-1", "job", "1", "Partition 0", "counts", counts)
    return SnapshotIndex(1, meta, DirIndex(""))


def test_the_index_round_trips_its_input_partition_counts() -> None:
    index = _index({WORDS: 4, CLICKS: 2})

    again = SnapshotIndex.from_bytes(index.to_bytes())

    assert again == index
    assert again.metadata.input_partitions == {WORDS: 4, CLICKS: 2}
    document = json.loads(index.to_bytes())
    assert document["snapshot-metadata"]["input-partition-counts"] == {CLICKS: 2, WORDS: 4}
    assert document["schema-version"] == 1  # an optional field: an older Samsa still reads the index


def test_an_index_without_counts_is_read_as_before() -> None:
    # As an index written before the counts were recorded: no such field at all.
    index = _index(None)
    document = json.loads(index.to_bytes())
    assert "input-partition-counts" not in document["snapshot-metadata"]

    again = SnapshotIndex.from_bytes(index.to_bytes())

    assert again == index and again.metadata.input_partitions is None


@pytest.mark.parametrize("bad", [[4], "4", {WORDS: "four"}])
def test_malformed_counts_are_a_malformed_index(bad: object) -> None:
    document = json.loads(_index({WORDS: 4}).to_bytes())
    document["snapshot-metadata"]["input-partition-counts"] = bad

    with pytest.raises(SNAPSHOT_UNUSABLE, match="malformed"):
        SnapshotIndex.from_bytes(json.dumps(document).encode(), where="idx-1")


def test_show_prints_the_recorded_counts() -> None:
    assert "  input partitions: kafka.clicks 2, kafka.words 4" in render_index(
        "idx", _index({WORDS: 4, CLICKS: 2})
    )
    (line,) = [line for line in render_index("idx", _index(None)) if "input partitions" in line]
    assert "not recorded" in line


# -- the counts of the job model ------------------------------------------------------------------------
def test_every_container_carries_the_counts_of_the_whole_job_model() -> None:
    counts = {SystemStream("kafka", "words"): 4, SystemStream("kafka", "clicks"): 2}
    model = build_job_model(counts, 2)

    assert [dict(c.input_counts) for c in model.containers] == [counts, counts]
    assert [len(c.tasks) for c in model.containers] == [2, 2]  # each sees half the tasks, all the counts
    again = JobModel.from_json(model.to_json())
    assert again == model and dict(again.container("1").input_counts) == counts


def test_broadcast_partitions_are_not_grouped_inputs() -> None:
    words, config_stream = SystemStream("kafka", "words"), SystemStream("kafka", "config")
    broadcast = [SystemStreamPartition("kafka", "config", 0)]
    assert grouped_counts({words: 4, config_stream: 1}, broadcast) == {words: 4}
    # A stream with a partition grouped into a task is a grouped input, with its whole count.
    assert grouped_counts({words: 4, config_stream: 3}, broadcast) == {words: 4, config_stream: 3}


def test_the_container_state_passes_the_grouped_counts_as_stream_names() -> None:
    job = JobConfig(
        Config(
            {
                "job.name": "j",
                "task.class": "x:Y",
                "task.inputs": "kafka.words",
                "task.broadcast.inputs": "kafka.config#0",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "localhost:9092",
            }
        )
    )
    counts = {SystemStream("kafka", "words"): 4, SystemStream("kafka", "config"): 1}
    model = build_job_model(counts, 2, job.broadcast)

    assert input_partitions(job, model.container("1")) == {WORDS: 4}
    assert input_partitions(job, ContainerModel("1", ())) is None  # no job model: unknown


# -- backup and restore ---------------------------------------------------------------------------------
class Task:
    """One task's `counts` store backed up to a local-dir blob store."""

    def __init__(self, root: Path, transfer: BlobTransfer, pool: ThreadPoolExecutor) -> None:
        self.root, self.transfer, self.pool = root, transfer, pool
        self.store_dir = root / "state" / "counts"

    def context(self, counts: dict[str, int] | None) -> TaskStoresContext:
        return TaskStoresContext(
            "job-1", "Partition 0", 0, {"counts": self.store_dir}, {"counts": {}}, input_partitions=counts
        )

    def commit(self, counts: dict[str, int] | None, files: dict[str, bytes]) -> tuple[str, Markers]:
        """A commit's checkpoint dir uploaded and cleaned up under `counts`: (checkpoint id, markers)."""
        manager = BlobStoreBackupManager(
            self.context(counts), ["counts"], self.transfer, self.pool, "job", "1"
        )
        manager.init(None)
        checkpoint_id = str(CheckpointId.create())
        local = checkpoint_dir(self.store_dir, checkpoint_id)
        local.mkdir(parents=True)
        for name, data in files.items():
            (local / name).write_bytes(data)
        markers = manager.upload(checkpoint_id, {}).result()
        manager.cleanup(checkpoint_id, markers).result()
        return checkpoint_id, markers

    def restore_manager(self, counts: dict[str, int] | None) -> BlobStoreRestoreManager:
        return BlobStoreRestoreManager(self.context(counts), self.transfer, "job", "1")


@pytest.fixture
def task(tmp_path: Path) -> Iterator[Task]:
    with ThreadPoolExecutor(4) as io, ThreadPoolExecutor(2) as pool:
        yield Task(tmp_path, BlobTransfer(LocalDirBlobStore(tmp_path / "blobs", io, 3600.0)), pool)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_backup_records_the_counts_in_each_snapshot(task: Task) -> None:
    _, markers = task.commit({WORDS: 2}, {"CURRENT": b"1"})

    index = task.transfer.get_index(
        markers["counts"], BlobMetadata.of_store("job", "1", "Partition 0", "counts")
    )

    assert index.metadata.input_partitions == {WORDS: 2}


def test_a_restore_under_other_counts_is_refused_before_the_store_is_touched(task: Task) -> None:
    checkpoint_id, markers = task.commit({WORDS: 2, CLICKS: 3}, {"CURRENT": b"1", "000001.sst": b"sst"})
    task.store_dir.mkdir(parents=True, exist_ok=True)
    (task.store_dir / "000002.log").write_bytes(b"live writes")
    before = _tree(task.root / "state")

    manager = task.restore_manager({WORDS: 4, CLICKS: 3})
    with pytest.raises(InputPartitionsChangedError) as refused:
        manager.init(markers, checkpoint_id)
        manager.restore(threading.Event())

    assert _tree(task.root / "state") == before
    error = refused.value
    assert (error.store, error.task, error.changes) == ("counts", "Partition 0", {WORDS: (2, 4)})
    message = str(error)
    assert "store 'counts' of task 'Partition 0'" in message
    assert "kafka.words: 2 -> 4 partitions" in message and "kafka.clicks" not in message
    assert "new job.id" in message and "samsa state bootstrap" in message, message
    # Not an unusable snapshot (no changelog fallback), and no restart mends it.
    assert not isinstance(error, SNAPSHOT_UNUSABLE)
    assert unmendable_exit(error) == CONFIG_ERROR_EXIT


@pytest.mark.parametrize(
    "written, now",
    [
        ({WORDS: 2}, {WORDS: 2}),  # unchanged
        (None, {WORDS: 4}),  # an index written before the counts were recorded: accepted as before
        ({WORDS: 2}, None),  # no job model to compare with
        ({WORDS: 2}, {WORDS: 2, CLICKS: 8}),  # an input added to the job moves no key of the others
    ],
)
def test_a_restore_under_the_same_or_unknown_counts_goes_on(
    task: Task, written: dict[str, int] | None, now: dict[str, int] | None
) -> None:
    checkpoint_id, markers = task.commit(written, {"CURRENT": b"1"})

    manager = task.restore_manager(now)
    manager.init(markers, checkpoint_id)
    manager.restore(threading.Event())

    assert (task.store_dir / "CURRENT").read_bytes() == b"1"


def test_a_store_with_a_changelog_does_not_fall_back_to_it(task: Task) -> None:
    # The changelog holds the same state, placed by the old counts: as wrong as the snapshot.
    checkpoint_id, markers = task.commit({WORDS: 2}, {"CURRENT": b"1"})
    changelog_opened = []

    def primary() -> TaskRestoreManager:
        manager = task.restore_manager({WORDS: 4})
        manager.init(markers, checkpoint_id)
        return manager

    def changelog() -> TaskRestoreManager:
        changelog_opened.append(True)
        raise AssertionError("the changelog restore must not run")

    with pytest.raises(InputPartitionsChangedError):
        StoreRestore("counts", "Partition 0", primary, changelog).restore(threading.Event())
    assert changelog_opened == []
