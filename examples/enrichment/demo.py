"""Order enrichment: embedded broker, a customers table's change events and 100,000 orders, the job with 2
containers, every order checked against its customer's current name."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.examples.demo_kafka import demo_kafka
from samsa.examples.enrichment.generator import Dataset, produce_dataset
from samsa.examples.enrichment.task import UNKNOWN
from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer
from samsa.runtime.config.loader import load_raw

JOB = Path(__file__).with_name("job.yaml")
PARTITIONS = 4  # of all three topics: a task per partition number, 2 per container


@dataclass(frozen=True)
class Topics:
    """The demo's topics: change events of the customers table, orders, enriched orders."""

    customers: str
    orders: str
    enriched: str

    @classmethod
    def for_run(cls, run_id: str) -> Topics:
        return cls(f"customers-cdc-{run_id}", f"orders-{run_id}", f"orders-enriched-{run_id}")


@dataclass
class Outcome:
    """What a demo run sent, what the job wrote, and what is wrong with it (nothing, when it worked)."""

    dataset: Dataset
    enriched: dict[str, Any] = field(default_factory=dict)  # order id -> enriched order
    records: int = 0  # messages on the output topic
    problems: list[str] = field(default_factory=list)
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.problems


def enrichment_overrides(
    bootstrap: str, topics: Topics, job_id: str, state_dir: Path, extra: Sequence[str] = ()
) -> list[str]:
    """The KEY=VALUE overrides of job.yaml for these topics."""
    return [
        f"systems.kafka.bootstrap.servers={bootstrap}",
        f"task.inputs=kafka.{topics.orders}",
        f"task.outputs=kafka.{topics.enriched}",
        f"stores.customers.adstore.input=kafka.{topics.customers}",
        f"systems.kafka.streams.{topics.customers}.samza.bootstrap=true",
        f"enrichment.output.stream={topics.enriched}",
        f"job.id={job_id}",
        f"job.non-logged.store.base.dir={state_dir}",
        *extra,
    ]


def enrichment_command(
    bootstrap: str, topics: Topics, job_id: str, state_dir: Path, extra: Sequence[str] = ()
) -> list[str]:
    """`samsa run job.yaml --until-caught-up` for these topics, with `extra` KEY=VALUE overrides."""
    overrides = enrichment_overrides(bootstrap, topics, job_id, state_dir, extra)
    job = renamed_job(topics, state_dir.parent / f"job-{job_id}.yaml")
    return [sys.executable, "-m", "samsa.cli", "run", str(job), "--until-caught-up"] + [
        f"--config={item}" for item in overrides
    ]


def renamed_job(topics: Topics, path: Path) -> Path:
    """job.yaml written to `path` with its per-stream keys moved to these topics: an override sets a key but
    cannot drop one, and a key naming a stream the job no longer reads fails the start."""
    names = {"customers-cdc": topics.customers, "orders": topics.orders, "orders-enriched": topics.enriched}
    config = {}
    for key, value in load_raw(JOB).items():
        for old, new in names.items():
            key = key.replace(f"systems.kafka.streams.{old}.", f"systems.kafka.streams.{new}.")
        config[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    return path


def read_enriched(bootstrap: str, topic: str, partitions: int) -> tuple[dict[str, Any], int]:
    """The enriched orders on the output topic by order id, and how many messages it holds."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
    try:
        ends = {(topic, p): consumer.watermarks((topic, p))[1] for p in range(partitions)}
        consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
        enriched: dict[str, Any] = {}
        records = 0
        remaining = {tp for tp, end in ends.items() if end > 0}
        deadline = time.monotonic() + 60
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(5000, 0.5):
                value = msg.value()
                records += 1
                if value is not None:
                    order = json.loads(value)
                    enriched[order["order_id"]] = order
                tp = (msg.topic(), msg.partition())
                if msg.offset() >= ends[tp] - 1:
                    remaining.discard(tp)
        return enriched, records
    finally:
        consumer.close()


def check(dataset: Dataset, enriched: dict[str, Any], records: int) -> list[str]:
    """What is wrong with the output: missing, extra or duplicate orders, and orders whose name is not the
    customer's current one (a stale name, a deleted customer's name, or another customer's)."""
    problems = []
    if records != len(dataset.expected):
        problems.append(
            f"enriched orders on the output topic: {records}, orders sent: {len(dataset.expected)}"
        )
    missing = dataset.expected.keys() - enriched.keys()
    if missing:
        problems.append(f"orders sent that never came out: {len(missing)}, e.g. {sorted(missing)[:3]}")
    extra = enriched.keys() - dataset.expected.keys()
    if extra:
        problems.append(f"orders out that were never sent: {len(extra)}, e.g. {sorted(extra)[:3]}")
    wrong = [
        f"{oid}: {enriched[oid]['customer_name']!r}, expected {want!r}"
        for oid, want in dataset.expected.items()
        if oid in enriched and enriched[oid].get("customer_name") != want
    ]
    if wrong:
        problems.append(f"orders with a wrong customer name: {len(wrong)}, e.g. {'; '.join(wrong[:3])}")
    return problems


def _samples(data: Dataset) -> dict[str, str]:
    """One order of each kind of customer, when there is one: order id -> the kind."""
    kinds: dict[str, Callable[[int], bool]] = {
        "unchanged customer": lambda cid: cid in data.names and cid not in data.renamed_ids,
        "renamed customer": lambda cid: cid in data.renamed_ids and cid in data.names,
        "deleted customer": lambda cid: cid in data.deleted_ids,
        "never existed": lambda cid: cid not in data.names and cid not in data.deleted_ids,
    }
    out: dict[str, str] = {}
    for kind, matches in kinds.items():
        oid = next((o for o, cid in data.customer_of.items() if matches(cid)), None)
        if oid is not None:
            out[oid] = kind
    return out


def run_demo(
    bootstrap: str, topics: Topics, work_dir: Path, customers: int, orders: int, job_id: str
) -> Outcome:
    """Generates the data into existing topics (PARTITIONS each), runs the job with 2 containers until
    caught up, reads and checks what it wrote; prints as it goes."""
    started = time.monotonic()
    data = produce_dataset(bootstrap, topics.customers, topics.orders, PARTITIONS, customers, orders)
    print(
        f"produced {data.change_events} change events of {data.created} customers ({data.renamed} renames, "
        f"{data.deleted} deletes) to {topics.customers} and {orders} orders to {topics.orders} "
        f"in {time.monotonic() - started:.1f} s"
    )
    outcome = Outcome(data)
    started = time.monotonic()
    cmd = enrichment_command(bootstrap, topics, job_id, work_dir / "state")
    outcome.exit_code = subprocess.call(cmd, env=os.environ.copy())
    if outcome.exit_code != 0:
        print(f"the job failed with exit code {outcome.exit_code}")
        return outcome
    print(f"job caught up in {time.monotonic() - started:.1f} s")
    outcome.enriched, outcome.records = read_enriched(bootstrap, topics.enriched, PARTITIONS)
    print("some enriched orders:")
    for oid, what in _samples(data).items():
        order = outcome.enriched.get(oid, {})
        name = order.get("customer_name", "(missing)")
        print(f"  {oid:<8} customer {order.get('customer_id', '?'):<6} {name:<28} ({what})")
    unknown = sum(1 for name in data.expected.values() if name == UNKNOWN)
    print(f"{len(data.expected) - unknown} orders expect a customer's current name, {unknown} {UNKNOWN!r}")
    outcome.problems = check(data, outcome.enriched, outcome.records)
    for problem in outcome.problems:
        print(f"  {problem}")
    print(f"{outcome.records} of {orders} orders enriched: {'OK' if outcome.ok else 'MISMATCH'}")
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--work-dir", type=Path, default=Path(".demo"))
    parser.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    args = parser.parse_args()
    with demo_kafka(args.work_dir, args.bootstrap) as bootstrap:
        run_id = str(int(time.time()))
        topics = Topics.for_run(run_id)
        admin = KafkaAdmin({"bootstrap.servers": bootstrap})
        for topic in (topics.customers, topics.orders, topics.enriched):
            admin.ensure_topic(topic, PARTITIONS)
        admin.close()
        outcome = run_demo(bootstrap, topics, args.work_dir, args.customers, args.orders, run_id)
        return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
