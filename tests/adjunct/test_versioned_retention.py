"""A versioned dataset whose next dataset lost its front to retention before it was read: the rest of it is
discarded up to its end-of-dataset marker, never sealed as a partial version, and the last sealed version is
served until the next complete dataset is sealed."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce, read_topic, run_in_process
from recreated_topics import delete_records_before
from versioned_datasets import lookups, produce_dataset, versioned_job

from samsa.adjunct.versioned import VersionedStore
from samsa.stores.rocksdb import RocksDbStore

__all__ = ["job_config", "produce", "read_topic"]


def _store(root: Path) -> VersionedStore:
    return VersionedStore(root, lambda path: RocksDbStore(path, name="models"), "models")


def test_records_discarded_up_to_the_next_marker_seal_nothing_and_the_next_dataset_is_built(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    store.write([(b"a", b"1"), (b"b", b"1")], 1)
    store.seal(3)  # version 1: offsets 0 and 1, its marker at 2
    store.discard_to_next_marker(6)  # offsets 3 to 5 (the next dataset's front) are gone
    store.write([(b"c", b"partial")], 7)
    assert store.seal(9) == 1  # the marker at 8 ends the incomplete dataset: nothing sealed
    assert dict(store.reader().all()) == {b"a": b"1", b"b": b"1"}
    assert store.resume_offset == 9 and not store.discarding
    store.write([(b"d", b"2")], 9)
    assert store.seal(11) == 2
    assert dict(store.reader().all()) == {b"d": b"2"}
    store.close()


def test_a_restart_while_discarding_resumes_where_the_incomplete_dataset_started(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.write([(b"a", b"1")], 0)
    store.seal(2)
    store.discard_to_next_marker(5)
    store.write([(b"c", b"partial")], 6)
    store.close()
    again = _store(tmp_path)
    # Still below the oldest offset: the start discards the rest of that dataset again.
    assert again.resume_offset == 2 and again.sealed_version == 1
    assert dict(again.reader().all()) == {b"a": b"1"}
    again.close()


def test_discarding_before_the_first_seal_serves_nothing_until_a_complete_dataset(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.discard_to_next_marker(4)
    store.write([(b"x", b"partial")], 5)
    assert store.seal(7) is None and store.sealed_version is None
    assert list(store.reader().all()) == [] and store.resume_offset == 7
    store.write([(b"y", b"1")], 7)
    assert store.seal(9) == 1
    assert dict(store.reader().all()) == {b"y": b"1"}
    store.close()


def _stored(containers: list[Any]) -> float:
    """Records the container run wrote into adjunct stores (`samsa_adjunct_records_total`)."""
    return sum(s["value"] for c in containers for s in c.registry.snapshot()["samsa_adjunct_records_total"])


def test_a_dataset_whose_front_retention_deleted_while_the_job_was_down_is_never_served(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, models, out = topics(1), topics(1), topics(1)
    config = versioned_job(job_config, orders, models, out)
    produce_dataset(kafka_bootstrap, models, "d1", range(10))  # offsets 0..9, its marker at 10
    produce(orders, [("c1", "a")])
    assert _stored(run_in_process(config)) == 10
    assert lookups(read_topic, out, "a") == ["a:d1-1"]
    # While the job is down: d2 at offsets 11..20 (its marker at 21), then retention deletes up to offset 16.
    produce_dataset(kafka_bootstrap, models, "d2", range(10))
    delete_records_before(kafka_bootstrap, models, 0, 16)
    produce(orders, [("c1", "b"), ("c9", "b")])
    caplog.set_level(logging.WARNING)
    # The discarded records are not counted as written (they were before).
    assert _stored(run_in_process(config)) == 0
    # Before: version 2 sealed with d2's offsets 16..20 only (c5..c9): c1 not found ("?"), c9 d2's.
    assert lookups(read_topic, out, "b") == ["b:d1-1", "b:d1-9"]
    assert f"topic {models} partition 0: offsets 11 to 15 were deleted" in caplog.text
    assert "discarded offsets 16 to 21" in caplog.text
    # The next complete dataset is sealed and served.
    produce_dataset(kafka_bootstrap, models, "d3", range(3))
    produce(orders, [("c1", "c"), ("c9", "c")])
    run_in_process(config)
    assert lookups(read_topic, out, "c") == ["c:?", "c:d3-1"]


def test_a_next_dataset_that_lost_only_its_first_record_is_built_warned_as_ambiguous(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    # The record right after a marker, gone: a transaction's commit record or the next dataset's first one.
    orders, models, out = topics(1), topics(1), topics(1)
    config = versioned_job(job_config, orders, models, out)
    produce_dataset(kafka_bootstrap, models, "d1", range(10))  # offsets 0..9, its marker at 10
    run_in_process(config)
    produce_dataset(kafka_bootstrap, models, "d2", range(10))  # offsets 11..20, its marker at 21
    delete_records_before(kafka_bootstrap, models, 0, 12)
    produce(orders, [("c0", "a"), ("c1", "a")])
    caplog.set_level(logging.WARNING)
    run_in_process(config)
    # Taken as a commit record: d2 from offset 12 on is built (c0, its first record, is missing).
    assert lookups(read_topic, out, "a") == ["a:?", "a:d2-1"]
    assert (
        f"topic {models} partition 0: the next version starts at offset 11, right after the end-of-dataset "
        "marker read, and the partition's oldest offset is 12: offset 11 was either a transaction's commit "
        "record"
    ) in caplog.text
    assert "discarded" not in caplog.text
