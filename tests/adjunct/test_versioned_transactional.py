"""A versioned store fed by a transactional producer: the commit record after each end-of-dataset marker is
never read (no consumer delivers it), so retention deleting a sealed dataset up to and including that record
deletes nothing the store had not read: the next dataset is built, not discarded."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce, read_topic, run_in_process
from recreated_topics import delete_records_before
from versioned_datasets import lookups, produce_dataset, versioned_job

from samsa.adjunct.versioned import POINTER_FILE, VersionedStore
from samsa.kafka.record_marks import RecordMark
from samsa.stores.rocksdb import RocksDbStore

__all__ = ["job_config", "produce", "read_topic"]


def _pointer(config: dict[str, str]) -> dict[str, Any]:
    found = list(Path(config["job.logged.store.base.dir"]).rglob(POINTER_FILE))
    assert len(found) == 1, found
    document: dict[str, Any] = json.loads(found[0].read_text())
    return document


def test_retention_deleting_a_sealed_dataset_with_its_commit_record_keeps_the_next_dataset(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, models, out = topics(1), topics(1), topics(1)
    config = versioned_job(job_config, orders, models, out)
    producer = f"datasets-{uuid.uuid4().hex[:8]}"
    # Offsets 0..9, its marker at 10, the transaction's commit record at 11.
    produce_dataset(kafka_bootstrap, models, "d1", range(10), transactional_id=producer)
    produce(orders, [("c1", "a")])
    run_in_process(config)
    assert lookups(read_topic, out, "a") == ["a:d1-1"]
    # The commit's consumer position was past the commit record: the next version starts after it.
    assert _pointer(config)["next-build-start"] == 12
    produce_dataset(kafka_bootstrap, models, "d2", range(10), transactional_id=producer)  # 12..21, marker 22
    delete_records_before(kafka_bootstrap, models, 0, 12)  # d1's segment, its commit record included
    produce(orders, [("c1", "b"), ("c7", "b")])
    caplog.set_level(logging.WARNING)
    run_in_process(config)
    # Before: offset 11 (the commit record) was taken for d2's deleted front: d2 discarded, d1 served.
    assert lookups(read_topic, out, "b") == ["b:d2-1", "b:d2-7"]
    assert "adjunct store" not in caplog.text  # no retention warning, no discard


def test_a_build_cut_short_restarts_from_its_first_record_not_the_commit_record_before_it(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, models, out = topics(1), topics(1), topics(1)
    config = versioned_job(job_config, orders, models, out)
    producer = f"datasets-{uuid.uuid4().hex[:8]}"
    # Offsets 0..9, its marker at 10, the transaction's commit record at 11.
    produce_dataset(kafka_bootstrap, models, "d1", range(10), transactional_id=producer)
    run_in_process(config)
    # d2's records (12..21, commit 22), its marker not yet sent: the job stops mid-build.
    produce_dataset(kafka_bootstrap, models, "d2", range(10), marker=False, transactional_id=producer)
    run_in_process(config)
    assert _pointer(config)["building-start"] == 12
    delete_records_before(kafka_bootstrap, models, 0, 12)
    produce_dataset(kafka_bootstrap, models, "d2", range(0), transactional_id=producer)  # marker 23
    produce(orders, [("c1", "a"), ("c7", "a")])
    caplog.set_level(logging.WARNING)
    run_in_process(config)
    assert lookups(read_topic, out, "a") == ["a:d2-1", "a:d2-7"]
    assert "adjunct store" not in caplog.text


def _store(root: Path) -> VersionedStore:
    return VersionedStore(root, lambda path: RocksDbStore(path, name="models"), "models")


def test_a_build_records_its_first_record_as_its_start(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.write([(b"a", b"1")], 9)
    store.seal(11)  # the marker at 10; a commit record at 11
    store.write([(b"b", b"2")], 21, first=12)
    store.close()
    again = _store(tmp_path)
    assert again.resume_offset == 12 and not again.resume_follows_marker
    again.close()


def test_read_past_moves_the_next_start_only_between_builds(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.write([(b"a", b"1")], 9)
    store.seal(11, RecordMark(10, 1_000))
    assert store.resume_follows_marker
    store.read_past(10)  # behind: nothing changes
    assert store.resume_offset == 11
    store.read_past(12)
    assert store.resume_offset == 12 and not store.resume_follows_marker
    store.write([(b"b", b"1")], 11)  # a replay from before the next start: skipped
    assert store.skips(11) and dict(store.reader().all()) == {b"a": b"1"}
    store.write([(b"b", b"2")], 13, first=12)
    store.read_past(20)  # a build under way records its own start
    store.close()
    again = _store(tmp_path)
    assert again.resume_offset == 12
    again.read_past(20)  # a build cut short restarts where it started
    assert again.resume_offset == 12
    again.close()
