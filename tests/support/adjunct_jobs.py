"""The enrichment test jobs: orders enriched from an adjunct store `customers` (Debezium-fed, or fed JSON rows
as they are)."""

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


def rows_enrich_job(
    job_config: Callable[..., dict[str, str]], orders: str, customers: str, out: str, **extra: str
) -> dict[str, str]:
    """One container of `samsa_test_tasks:EnrichTask` reading `orders`, with the RocksDB adjunct store
    `customers` bootstrapped from `customers` (keys as they are, JSON rows stored as they are); it writes
    "<order value>:<name found, or ?>" to `out`."""
    return job_config(
        f"kafka.{orders}",
        out,
        task="samsa_test_tasks:EnrichTask",
        **{
            "job.container.count": "1",
            f"systems.kafka.streams.{customers}.samza.msg.serde": "json",
            f"systems.kafka.streams.{customers}.samza.bootstrap": "true",
            "stores.customers.factory": "rocksdb",
            "stores.customers.key.serde": "string",
            "stores.customers.msg.serde": "json",
            "stores.customers.adstore.input": f"kafka.{customers}",
            **extra,
        },
    )
