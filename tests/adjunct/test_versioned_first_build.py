"""A versioned store's first build (no version pointer, an in-memory engine, versions dropped) from a
partition whose oldest offset is above 0: the first dataset found is built and sealed, with a warning that
retention may have deleted its front."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce, read_topic, run_in_process
from recreated_topics import delete_records_before
from versioned_datasets import lookups, produce_dataset, versioned_job

__all__ = ["job_config", "produce", "read_topic"]


def _warning(topic: str, low: int) -> str:
    return (
        f"topic {topic} partition 0: a first build of the store starts at the partition's oldest offset {low}"
    )


def test_a_complete_dataset_at_the_oldest_offset_is_served_by_a_first_build(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, models, out = topics(1), topics(1), topics(1)
    config = versioned_job(job_config, orders, models, out)
    produce_dataset(kafka_bootstrap, models, "d1", range(10))  # offsets 0..9, its marker at 10
    produce_dataset(kafka_bootstrap, models, "d2", range(10))  # offsets 11..20, its marker at 21
    delete_records_before(kafka_bootstrap, models, 0, 11)  # a segment rolled at d2's start, deleted
    produce(orders, [("c1", "a"), ("c7", "a")])
    caplog.set_level(logging.WARNING)
    run_in_process(config)
    # Before: d2, whole, was discarded as the rest of a dataset ("a:?" for both).
    assert lookups(read_topic, out, "a") == ["a:d2-1", "a:d2-7"]
    assert _warning(models, 11) in caplog.text
    assert "discarded" not in caplog.text


def test_a_first_build_seals_the_rest_of_a_dataset_whose_front_was_deleted_as_found_warned(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, models, out = topics(1), topics(1), topics(1)
    config = versioned_job(job_config, orders, models, out)
    produce_dataset(kafka_bootstrap, models, "d1", range(10))  # offsets 0..9, its marker at 10
    delete_records_before(kafka_bootstrap, models, 0, 5)  # d1's front gone before the job ever read it
    produce(orders, [("c1", "a"), ("c7", "a")])
    caplog.set_level(logging.WARNING)
    run_in_process(config)
    # Nothing tells the rest of a dataset from a whole one: built as found, and warned.
    assert lookups(read_topic, out, "a") == ["a:?", "a:d1-7"]
    assert _warning(models, 5) in caplog.text
    assert "keep the topic's retention longer than a dataset's lifetime" in caplog.text
    produce_dataset(kafka_bootstrap, models, "d2", range(3))  # offsets 11..13, its marker at 14
    produce(orders, [("c1", "b"), ("c7", "b")])
    run_in_process(config)
    assert lookups(read_topic, out, "b") == ["b:?", "b:d2-1"]


def test_an_in_memory_versioned_store_serves_the_topic_s_one_dataset_at_every_start(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    # Its versions die with the process: every start is a first build.
    orders, models, out = topics(1), topics(1), topics(1)
    config = versioned_job(job_config, orders, models, out, factory="inmemory")
    produce_dataset(kafka_bootstrap, models, "d1", range(10))  # offsets 0..9, its marker at 10
    produce_dataset(kafka_bootstrap, models, "d2", range(10))  # offsets 11..20, its marker at 21
    delete_records_before(kafka_bootstrap, models, 0, 11)  # the producer keeps the latest dataset only
    for tag in ("a", "b"):
        produce(orders, [("c1", tag)])
        run_in_process(config)
        assert lookups(read_topic, out, tag) == [f"{tag}:d2-1"]
