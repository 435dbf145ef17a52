"""An adjunct store's topic deleted and recreated while the job runs: the consumer's position, out of range,
is reset to the new topic's first record. The container fails naming the topic instead of laying the new
topic's rows over the deleted one's (or skipping them as replays of a sealed version); its restart
rebuilds the store from the new topic, as a start after a recreation does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from adjunct_jobs import rows_enrich_job
from background import Background, wait_for
from job_fixtures import job_config, produce, read_topic, run_in_process
from recreated_topics import recreate

from samsa.adjunct.bounded import END_OF_DATASET
from samsa.adjunct.exceptions import AdjunctStreamResetError
from samsa.adjunct.versioned import POINTER_FILE
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.stores.checkpoint_dirs import read_checked_json, write_checked_json

__all__ = ["job_config", "produce", "read_topic"]


def _table(bootstrap: str, topic: str, rows: dict[str, str], versioned: bool) -> None:
    """Produces on a new producer (the session's keeps sequence numbers of a deleted topic's partition)."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap})
    for key, name in rows.items():
        producer.send(topic, json.dumps({"name": name}).encode(), key=key.encode())
    if versioned:
        producer.send(topic, None, key=None, headers=[(END_OF_DATASET, b"")])
    producer.close()


def _outputs(read_topic: Any, out: str, prefix: str) -> list[str]:
    return sorted(v for v in (r[3].decode() for r in read_topic(out)) if v.startswith(prefix))


@pytest.mark.parametrize("versioned", [False, True], ids=["plain", "versioned"])
def test_a_store_whose_topic_is_recreated_while_the_job_runs_fails_the_container_then_is_rebuilt(
    versioned: bool,
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    kafka_admin: KafkaAdmin,
    kafka_bootstrap: str,
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    config = rows_enrich_job(
        job_config, orders, customers, out, **{"stores.customers.adstore.versioned": str(versioned).lower()}
    )
    _table(kafka_bootstrap, customers, {f"c{i}": f"old-{i}" for i in range(10)}, versioned)
    produce(orders, [("c1", "a")])
    job = JobConfig(Config(config))
    container = Container(job, JobCoordinator(job).prepare().container("0"), until_caught_up=False)
    run = Background(container.run)
    try:
        wait_for(lambda: _outputs(read_topic, out, "a") == ["a:old-1"], 60, "the first order enriched")
        recreate(kafka_admin, customers)
        _table(kafka_bootstrap, customers, {f"c{i}": f"new-{i}" for i in range(3)}, versioned)
        # Before: the container ran on; the plain store served old-3..old-9 beside the new rows, the
        # versioned one skipped the new dataset as a replay and served the deleted topic's version.
        run.join(60)
        assert not run.thread.is_alive(), "the container ran on"
    finally:
        container.stop()
        run.join(60)
    assert isinstance(run.error, AdjunctStreamResetError), repr(run.error)
    assert f"topic {customers} partition 0" in str(run.error) and "below offset" in str(run.error)
    produce(orders, [("c1", "b"), ("c5", "b")])
    run_in_process(config)
    assert _outputs(read_topic, out, "b") == ["b:?", "b:new-1"]


def test_a_versioned_store_resuming_past_the_end_of_a_recreated_topic_reads_it_from_its_start(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    kafka_admin: KafkaAdmin,
    kafka_bootstrap: str,
) -> None:
    """A version pointer of an older Samsa records no marker to check: a next version starting past the end
    of the topic tells a recreated one (its consumer would go back, failing every start)."""
    orders, customers, out = topics(1), topics(1), topics(1)
    config = job_config(
        f"kafka.{orders}",
        out,
        task="samsa_test_tasks:EnrichTask",
        **{
            "job.container.count": "1",
            f"systems.kafka.streams.{customers}.samza.msg.serde": "json",
            "stores.customers.factory": "rocksdb",
            "stores.customers.key.serde": "string",
            "stores.customers.msg.serde": "json",
            "stores.customers.adstore.input": f"kafka.{customers}",
            "stores.customers.adstore.versioned": "true",
            f"systems.kafka.streams.{customers}.samza.bootstrap": "true",
        },
    )
    _table(kafka_bootstrap, customers, {f"c{i}": f"old-{i}" for i in range(10)}, True)
    produce(orders, [("c1", "a")])
    run_in_process(config)
    (pointer,) = Path(config["job.logged.store.base.dir"]).rglob(POINTER_FILE)
    _, document, _ = read_checked_json(pointer)
    assert document is not None and document["next-build-start"] == 11
    write_checked_json(pointer, {**document, "next-build-start-mark": None})  # as an older Samsa wrote it
    recreate(kafka_admin, customers)
    _table(kafka_bootstrap, customers, {f"c{i}": f"new-{i}" for i in range(3)}, True)
    produce(orders, [("c1", "b"), ("c5", "b")])
    run_in_process(config)
    # Before: read from offset 11, past the new topic's end: version 1 served (old-1, old-5), the consumer
    # sent back to the new topic's first record, skipped as a replay (or, with the reset check alone, a
    # running container failing at every start).
    assert _outputs(read_topic, out, "b") == ["b:?", "b:new-1"]
