"""An end-of-dataset marker is taken by its header: its key and value, which the stream's serdes may not
read, are ignored (never a bad message that, skipped, would merge two datasets)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce, read_topic, run_in_process

from samsa.adjunct.bounded import END_OF_DATASET
from samsa.kafka import KafkaProducer

__all__ = ["job_config", "produce", "read_topic"]


@pytest.mark.parametrize("policy", ["fail", "skip"])
def test_a_marker_whose_key_and_value_do_not_decode_seals_its_dataset(
    policy: str, job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str
) -> None:
    orders, models, out = topics(1), topics(1), topics(1)
    config = job_config(
        f"kafka.{orders}",
        out,
        task="samsa_test_tasks:EnrichTask",
        **{
            "job.container.count": "1",
            "task.deserialization.error.policy": policy,
            f"systems.kafka.streams.{models}.samza.key.serde": "json",
            f"systems.kafka.streams.{models}.samza.msg.serde": "json",
            f"systems.kafka.streams.{models}.samza.bootstrap": "true",
            "stores.customers.factory": "rocksdb",
            "stores.customers.key.serde": "json",
            "stores.customers.msg.serde": "json",
            "stores.customers.adstore.input": f"kafka.{models}",
            "stores.customers.adstore.versioned": "true",
        },
    )

    def dataset(rows: dict[str, str]) -> None:
        producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
        for key, name in rows.items():
            producer.send(models, json.dumps({"name": name}).encode(), key=json.dumps(key).encode())
        # Neither "end" nor "-" is JSON: the stream's serdes cannot decode this marker's key or value.
        producer.send(models, b"-", key=b"end", headers=[(END_OF_DATASET, b"1")])
        producer.close()

    dataset({"c1": "v1", "c2": "v2"})
    produce(orders, [("c1", "a")])
    # Before: policy fail stopped the job on the marker's key (MessageDeserializationError); policy skip
    # dropped the marker, so nothing was sealed ("a:?") and the next dataset merged with this one.
    run_in_process(config)
    dataset({"c2": "w2"})
    produce(orders, [("c1", "b"), ("c2", "b")])
    run_in_process(config)
    outputs = sorted(v.decode() for _, _, _, v in read_topic(out))
    assert outputs == ["a:v1", "b:?", "b:w2"]
