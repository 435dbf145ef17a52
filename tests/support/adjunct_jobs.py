"""The enrichment test job: orders enriched from a Debezium-fed adjunct store `customers`."""

from __future__ import annotations

from collections.abc import Callable


def enrich_job(
    job_config: Callable[..., dict[str, str]], orders: str, customers: str, out: str, **extra: str
) -> dict[str, str]:
    """One container of `samsa_test_tasks:EnrichTask`, with the RocksDB adjunct store `customers`
    bootstrapped from `customers` (Debezium JSON), reading `orders`."""
    return job_config(
        f"kafka.{orders}",
        out,
        task="samsa_test_tasks:EnrichTask",
        **{
            "job.container.count": "1",
            "stores.customers.factory": "rocksdb",
            "stores.customers.key.serde": "string",
            "stores.customers.msg.serde": "json",
            "stores.customers.adstore.input": f"kafka.{customers}",
            "stores.customers.adstore.key.value.extractor.factory": "debezium",
            f"systems.kafka.streams.{customers}.samza.bootstrap": "true",
            **extra,
        },
    )
