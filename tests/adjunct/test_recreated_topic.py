"""An adjunct store whose topic was deleted and recreated while the job was down is rebuilt from the new
topic, even when the new topic holds as many records as the store had read (its offset is in range)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from adjunct_jobs import rows_enrich_job
from job_fixtures import job_config, produce, read_topic, run_in_process
from recreated_topics import produce_fresh, recreate

from samsa.adjunct.bounded import END_OF_DATASET
from samsa.adjunct.offsets import OFFSETS_FILE, read_offsets, write_offsets
from samsa.adjunct.recovery import adjunct_start
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.record_marks import RecordMark
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.streams import SystemStreamPartition

__all__ = ["job_config", "produce", "read_topic"]


def _rows(names: dict[str, str]) -> list[tuple[str, str]]:
    return [(k, json.dumps({"name": v})) for k, v in names.items()]


def _enriched(read_topic: Any, out: str, prefix: str) -> dict[str, str]:
    values = [v.decode() for _, _, _, v in read_topic(out)]
    return dict(v.split(":") for v in values if v.startswith(prefix))


def test_a_store_whose_topic_was_recreated_with_more_records_is_rebuilt_from_the_new_topic(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    kafka_admin: KafkaAdmin,
    kafka_bootstrap: str,
    caplog: Any,
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, _rows({f"c{i}": f"old{i}" for i in range(5)}))
    produce(orders, [("c0", "first")])
    config = rows_enrich_job(job_config, orders, customers, out)
    run_in_process(config)
    assert _enriched(read_topic, out, "first") == {"first": "old0"}
    job = JobConfig(Config(config))
    store_dirs = list(Path(job.config.value("job.logged.store.base.dir")).rglob(OFFSETS_FILE))
    ssp = SystemStreamPartition("kafka", customers, 0)
    (stored,) = [read_offsets(f.parent, [ssp]) for f in store_dirs]
    assert stored is not None and stored.offsets[ssp] == 5 and stored.marks[ssp].offset == 4
    # While the job is down the topic is deleted and recreated; more rows than the store read land in it.
    recreate(kafka_admin, customers)
    produce_fresh(kafka_bootstrap, customers, _rows({f"c{i}": f"new{i}" for i in range(8)}))
    produce(orders, [(f"c{i}", f"second{i}") for i in range(8)])
    caplog.set_level("INFO", logger="samsa.runtime.container")
    run_in_process(config)
    assert _enriched(read_topic, out, "second") == {f"second{i}": f"new{i}" for i in range(8)}
    assert "the topic is not the one the store was built from" in caplog.text
    # The next start finds the store valid: the record before its offset is the one it read.
    caplog.clear()
    run_in_process(config)
    assert "store valid: continuing from its offset 8" in caplog.text


def test_a_versioned_dataset_whose_topic_was_recreated_is_read_again_from_the_new_topic(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_admin: KafkaAdmin, kafka_bootstrap: str
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)

    def dataset(names: dict[str, str]) -> None:
        producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
        for key, value in _rows(names):
            producer.send(customers, value.encode(), key=key.encode())
        producer.send(customers, None, key=b"-", headers=[(END_OF_DATASET, b"")])
        producer.close()

    dataset({"1": "old-1", "2": "old-2", "3": "old-3"})  # offsets 0..3, the marker at 3
    produce(orders, [("1", "a1")])
    config = rows_enrich_job(
        job_config, orders, customers, out, **{"stores.customers.adstore.versioned": "true"}
    )
    run_in_process(config)
    assert _enriched(read_topic, out, "a") == {"a1": "old-1"}
    # Recreated with a complete new dataset: offsets 0..6, the marker at 6. Resuming at 4 would seal a
    # partial version of it (rows 5 and 6) in place of the complete old one.
    recreate(kafka_admin, customers)
    dataset({str(i): f"new-{i}" for i in range(1, 7)})
    produce(orders, [(str(i), f"b{i}") for i in range(1, 7)])
    run_in_process(config)
    assert _enriched(read_topic, out, "b") == {f"b{i}": f"new-{i}" for i in range(1, 7)}


def test_an_offsets_file_without_marks_is_accepted_as_before(tmp_path: Path) -> None:
    ssp = SystemStreamPartition("kafka", "customers", 0)
    write_offsets(tmp_path, {ssp: 5})  # as an older Samsa wrote it: no mark
    stored = read_offsets(tmp_path, [ssp])
    assert stored is not None and stored.offsets == {ssp: 5} and stored.marks == {}
    write_offsets(tmp_path, {ssp: 5}, {ssp: RecordMark(4, 1_700_000_000_000, "ab")})
    stored = read_offsets(tmp_path, [ssp])
    assert stored is not None and stored.marks == {ssp: RecordMark(4, 1_700_000_000_000, "ab")}
    common: dict[str, Any] = {
        "persistent": True,
        "bootstrap": True,
        "exists": True,
        "stored_offset": 5,
        "stored_at_ms": 0.0,
        "now_ms": 1.0,
        "max_staleness_ms": 10_000,
        "low": 0,
        "high": 8,
    }
    assert adjunct_start(**common) == adjunct_start(**common, changed=lambda: None)
    assert not adjunct_start(**common).wipe
    recreated = adjunct_start(**common, changed=lambda: "the record at offset 4 has timestamp 2")
    assert recreated.wipe and recreated.offset == 0
    assert "not the one the store was built from" in recreated.note
