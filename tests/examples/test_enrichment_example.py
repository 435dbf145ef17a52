"""The enrichment example end to end on the real broker: the demo's own run and check, on a small dataset."""

from __future__ import annotations

import uuid
from pathlib import Path

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.examples.enrichment.demo import JOB, PARTITIONS, Topics, check, enrichment_overrides, run_demo
from samsa.examples.enrichment.task import UNKNOWN
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw
from samsa.runtime.coordinator import coordinator_topic


def _delete_internal_topics(kafka_admin, kafka_bootstrap: str, topics: Topics, job_id: str, state: Path):
    overrides = dict(o.split("=", 1) for o in enrichment_overrides(kafka_bootstrap, topics, job_id, state))
    job = JobConfig(Config({**load_raw(JOB), **overrides}))
    internal = [checkpoint_topic(job.name, job.id), coordinator_topic(job), f"samsa-dlq-{job.job_key}"]
    existing = kafka_admin.partition_counts(internal)
    kafka_admin.delete_topics([t for t, n in existing.items() if n is not None])


def test_the_demo_enriches_every_order_with_its_customers_current_name(
    kafka_bootstrap, kafka_admin, topics, tmp_path: Path
):
    names = Topics(topics(PARTITIONS), topics(PARTITIONS), topics(PARTITIONS))
    job_id = uuid.uuid4().hex[:8]
    try:
        outcome = run_demo(kafka_bootstrap, names, tmp_path, customers=120, orders=1500, job_id=job_id)
    finally:
        _delete_internal_topics(kafka_admin, kafka_bootstrap, names, job_id, tmp_path / "state")
    data = outcome.dataset
    # The data covers every case: snapshot reads and inserts, renames, deletes, ids that never existed.
    assert data.renamed_ids - data.deleted_ids and data.deleted_ids
    assert any(cid > 120 for cid in data.customer_of.values())
    assert outcome.exit_code == 0
    assert outcome.problems == [], outcome.problems
    assert outcome.records == 1500
    for oid, cid in data.customer_of.items():
        order = outcome.enriched[oid]
        assert order["customer_id"] == cid
        if cid in data.deleted_ids:
            assert order["customer_name"] == UNKNOWN
        elif cid in data.renamed_ids:
            assert order["customer_name"] == data.names[cid] and "-" in order["customer_name"]
    # The check the demo prints fails on a stale name, a deleted customer's name and a lost order.
    renamed = next(o for o, c in data.customer_of.items() if c in data.renamed_ids and c in data.names)
    deleted = next(o for o, c in data.customer_of.items() if c in data.deleted_ids)
    bad = {oid: dict(order) for oid, order in outcome.enriched.items()}
    bad[renamed]["customer_name"] = data.names[data.customer_of[renamed]].split("-")[0]
    bad[deleted]["customer_name"] = "Ada Lovelace"
    assert len(check(data, bad, outcome.records)) == 1
    assert "orders with a wrong customer name: 2" in check(data, bad, outcome.records)[0]
    del bad[renamed]
    assert check(data, bad, outcome.records - 1) == [
        "enriched orders on the output topic: 1499, orders sent: 1500",
        f"orders sent that never came out: 1, e.g. {[renamed]}",
        f"orders with a wrong customer name: 1, e.g. {deleted}: 'Ada Lovelace', expected {UNKNOWN!r}",
    ]
