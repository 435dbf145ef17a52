"""A versioned adjunct store's test job, and datasets produced to its stream (plain or in transactions)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from adjunct_jobs import rows_enrich_job

from samsa.adjunct.bounded import END_OF_DATASET
from samsa.kafka import KafkaProducer


def versioned_job(
    job_config: Callable[..., dict[str, str]], orders: str, models: str, out: str, factory: str = "rocksdb"
) -> dict[str, str]:
    """`samsa_test_tasks:EnrichTask` reading `orders`, enriched from the versioned store `customers` fed by
    `models` (bootstrapped); it writes "<order value>:<name found, or ?>" to `out`."""
    extra = {"stores.customers.factory": factory, "stores.customers.adstore.versioned": "true"}
    return rows_enrich_job(job_config, orders, models, out, **extra)


def produce_dataset(
    bootstrap: str,
    topic: str,
    tag: str,
    keys: range,
    marker: bool = True,
    transactional_id: str | None = None,
) -> None:
    """Customers `c<i>` named `<tag>-<i>`, then (`marker`) an end-of-dataset marker; in one transaction with
    `transactional_id` (its commit record follows the marker)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    producer = KafkaProducer(config)
    try:
        if transactional_id is not None:
            producer.init_transactions()
            producer.begin_transaction()
        for i in keys:
            producer.send(topic, json.dumps({"name": f"{tag}-{i}"}).encode(), key=f"c{i}".encode())
        if marker:
            producer.send(topic, None, key=None, headers=[(END_OF_DATASET, b"")])
        if transactional_id is not None:
            producer.commit_transaction()
    finally:
        producer.close()


def lookups(read_topic: Any, out: str, prefix: str) -> list[str]:
    """The job's outputs for the orders whose value starts with `prefix`, sorted."""
    return sorted(v for v in (r[3].decode() for r in read_topic(out)) if v.startswith(prefix))
