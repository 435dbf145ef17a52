"""Produces a customers table's Debezium change events (creates, renames, deletes), then orders keyed by
customer id; returns the name each order must be enriched with.

Both topics are partitioned by customer id (`partition_of`): Debezium's key is a JSON object
(`{"id": 7}`), the order's key the bare id (`7`), so their bytes differ and a partitioner hashing the key
bytes would put a customer and its orders in different partitions, where the order's task cannot see the
customer. In production, route both through the same partitioner over the id (a Kafka Connect
partitioner or an SMT on the CDC side, a repartitioning job on the orders side).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from typing import Any

from samsa.examples.enrichment.task import UNKNOWN
from samsa.kafka import KafkaProducer

FIRST = ["Ada", "Alan", "Barbara", "Claude", "Donald", "Edsger", "Frances", "Grace", "John", "Leslie"]
LAST = ["Hopper", "Knuth", "Lamport", "Liskov", "Lovelace", "Shannon", "Turing", "Allen", "Backus", "Codd"]
CITIES = ["Lisbon", "Oslo", "Prague", "Quito", "Seoul", "Tunis"]

# Kafka Connect's JsonConverter with schemas.enable=true wraps each key and value in {schema, payload}.
_ROW_FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "string", "optional": True, "field": "email"},
    {"type": "string", "optional": True, "field": "city"},
]
_ROW = {"type": "struct", "fields": _ROW_FIELDS, "optional": True, "name": "shop.public.customers.Value"}
KEY_SCHEMA = {
    "type": "struct",
    "fields": _ROW_FIELDS[:1],
    "optional": False,
    "name": "shop.public.customers.Key",
}
VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        {**_ROW, "field": "before"},
        {**_ROW, "field": "after"},
        {
            "type": "struct",
            "fields": [
                {"type": "string", "optional": False, "field": "connector"},
                {"type": "string", "optional": False, "field": "db"},
                {"type": "string", "optional": False, "field": "table"},
                {"type": "int64", "optional": False, "field": "ts_ms"},
            ],
            "optional": False,
            "name": "io.debezium.connector.postgresql.Source",
            "field": "source",
        },
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
    "optional": False,
    "name": "shop.public.customers.Envelope",
}


@dataclass
class Dataset:
    """What the generator sent: each order's expected customer name, and counts for the summary."""

    expected: dict[str, str] = field(default_factory=dict)  # order id -> customer name or UNKNOWN
    customer_of: dict[str, int] = field(default_factory=dict)  # order id -> customer id
    names: dict[int, str] = field(default_factory=dict)  # customer id -> current name (live customers)
    renamed_ids: set[int] = field(default_factory=set)
    deleted_ids: set[int] = field(default_factory=set)
    change_events: int = 0
    created: int = 0
    renamed: int = 0  # rename events (a customer may be renamed more than once)
    deleted: int = 0


def _new_name(rng: random.Random, old: str) -> str:
    """A double-barrelled surname, never the old name: a stale name in the output cannot pass for it."""
    return f"{old.split('-')[0]}-{rng.choice([last for last in LAST if last not in old])}"


def partition_of(customer_id: int, partitions: int) -> int:
    """The partition of a customer's change events and of its orders."""
    return customer_id % partitions


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def change_event(
    op: str, row: dict[str, Any] | None, before: dict[str, Any] | None, ts_ms: int, schemas: bool = True
) -> bytes:
    """One Debezium change event (a message value) as Kafka Connect's JSON converter writes it."""
    payload = {
        "before": before,
        "after": row,
        "source": {"connector": "postgresql", "db": "shop", "table": "customers", "ts_ms": ts_ms},
        "op": op,
        "ts_ms": ts_ms,
    }
    return _json({"schema": VALUE_SCHEMA, "payload": payload} if schemas else payload)


def change_key(customer_id: int, schemas: bool = True) -> bytes:
    payload = {"id": customer_id}
    return _json({"schema": KEY_SCHEMA, "payload": payload} if schemas else payload)


def produce_dataset(
    bootstrap: str,
    customers_topic: str,
    orders_topic: str,
    partitions: int,
    customers: int,
    orders: int,
    seed: int = 7,
    schemas: bool = True,
) -> Dataset:
    """Sends `customers` customers' change events, then `orders` orders (some for deleted customers and
    some for ids that never existed); returns what the enriched orders must say."""
    rng = random.Random(seed)
    data = Dataset()
    rows: dict[int, dict[str, Any]] = {}
    ts_ms = 1_700_000_000_000
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 20})

    def emit(cid: int, op: str, row: dict[str, Any] | None, before: dict[str, Any] | None) -> None:
        nonlocal ts_ms
        ts_ms += 1
        key, part = change_key(cid, schemas), partition_of(cid, partitions)
        producer.send(customers_topic, change_event(op, row, before, ts_ms, schemas), key=key, partition=part)
        data.change_events += 1
        if op == "d":  # Debezium follows a delete with a tombstone, so compaction can drop the key
            producer.send(customers_topic, None, key=key, partition=part)
            data.change_events += 1

    try:
        for cid in range(1, customers + 1):
            row = {
                "id": cid,
                "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                "email": f"customer{cid}@example.com",
                "city": rng.choice(CITIES),
            }
            rows[cid] = row
            # The first half as the connector's initial snapshot (op r), the rest as inserts since (op c).
            emit(cid, "r" if cid <= customers // 2 else "c", row, None)
            data.created += 1
        # Changes: a third of the customers renamed (some twice), a tenth deleted.
        for _ in range(customers // 3 + customers // 10):
            cid = rng.choice(list(rows))
            if rng.random() < 0.75:
                renamed = {**rows[cid], "name": _new_name(rng, rows[cid]["name"])}
                emit(cid, "u", renamed, rows[cid])
                rows[cid] = renamed
                data.renamed += 1
                data.renamed_ids.add(cid)
            else:
                emit(cid, "d", None, rows.pop(cid))
                data.deleted += 1
                data.deleted_ids.add(cid)
        data.names = {cid: row["name"] for cid, row in rows.items()}
        never = customers + max(1, customers // 50)  # ids above `customers` never existed
        for i in range(orders):
            cid = rng.randint(1, never)
            order_id = f"o-{i}"
            order = {"order_id": order_id, "customer_id": cid, "amount_cents": rng.randint(100, 50_000)}
            producer.send(
                orders_topic, _json(order), key=str(cid).encode(), partition=partition_of(cid, partitions)
            )
            data.expected[order_id] = data.names.get(cid, UNKNOWN)
            data.customer_of[order_id] = cid
        producer.flush()
    finally:
        producer.close()
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--customers-topic", default="customers-cdc")
    parser.add_argument("--orders-topic", default="orders")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of both topics")
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--orders", type=int, default=100_000)
    args = parser.parse_args()
    data = produce_dataset(
        args.bootstrap, args.customers_topic, args.orders_topic, args.partitions, args.customers, args.orders
    )
    print(
        f"sent {data.change_events} change events to {args.customers_topic}, "
        f"{args.orders} orders to {args.orders_topic}"
    )


if __name__ == "__main__":
    main()
