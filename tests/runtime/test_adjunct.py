"""Adjunct data stores on the real broker: CDC-fed read-only stores, bootstrap, recovery, read-only."""

from __future__ import annotations

import json

import pytest
import systems_fixtures
from adjunct_jobs import enrich_job
from count_job import run_cli

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import MessageDeserializationError
from samsa.stores.exceptions import ReadOnlyStoreError

# Every test here runs on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin


def _cdc(op: str, cid: int, name: str | None, schema: bool = False) -> tuple[str, str | None]:
    key = json.dumps({"id": cid})
    if op == "tombstone":
        return key, None
    after = None if op == "d" else {"id": cid, "name": name}
    before = {"id": cid, "name": "old"} if op in ("u", "d") else None
    payload = {"before": before, "after": after, "op": op, "ts_ms": 1}
    return key, json.dumps({"schema": {"type": "struct"}, "payload": payload} if schema else payload)


def _enriched(read_topic, out: str) -> dict[str, str]:
    return {v.decode().split(":")[0]: v.decode().split(":")[1] for _, _, _, v in read_topic(out)}


def test_a_bootstrapped_cdc_store_enriches_every_order_and_never_reaches_process(
    job_config, topics, produce, read_topic, run_job, caplog
):
    caplog.set_level("INFO", logger="samsa.stores.restore_progress")
    orders, customers, out = topics(2), topics(2), topics(2)
    # Customers 1..6 created (with and without schemas), 2 renamed, 3 deleted, 4 deleted + tombstone.
    cdc = [_cdc("c", i, f"c{i}", schema=i % 2 == 0) for i in range(1, 7)]
    cdc += [_cdc("u", 2, "c2-renamed"), _cdc("d", 3, None), _cdc("d", 4, None), _cdc("tombstone", 4, None)]
    for key, value in cdc:
        cid = json.loads(key)["id"]
        produce(customers, [(key, value)], partition=cid % 2)
    # Orders keyed by customer id on the customer's partition: the task's store holds that customer.
    for i in range(1, 8):
        produce(orders, [(str(i), f"o{i}")], partition=i % 2)
    (container,) = run_job(enrich_job(job_config, orders, customers, out))
    got = _enriched(read_topic, out)
    assert got == {"o1": "c1", "o2": "c2-renamed", "o3": "?", "o4": "?", "o5": "c5", "o6": "c6", "o7": "?"}
    # Every CDC record went to the store (the tombstone too), none to process().
    stored = container.registry.snapshot()["samsa_adjunct_records_total"]
    assert sum(s["value"] for s in stored) == len(cdc)
    processed = container.registry.snapshot()["samsa_messages_processed_total"]
    assert sum(p["value"] for p in processed) == 7 + len(cdc)
    assert f"bootstrapped 2 stores: {len(cdc)} records" in caplog.text  # the restore's progress display


@pytest.mark.parametrize(("factory", "rereads"), [("rocksdb", False), ("inmemory", True)])
def test_a_restart_continues_a_persistent_store_and_rebootstraps_an_in_memory_one(
    factory, rereads, job_config, topics, produce, read_topic, run_job
):
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [_cdc("c", i, f"c{i}") for i in range(1, 5)])
    produce(orders, [("1", "o1")])
    config = enrich_job(job_config, orders, customers, out, **{"stores.customers.factory": factory})
    run_job(config)
    produce(customers, [_cdc("u", 1, "c1-new")])
    produce(orders, [("1", "o1-again"), ("2", "o2")])
    (container,) = run_job(config)
    stored = sum(s["value"] for s in container.registry.snapshot()["samsa_adjunct_records_total"])
    assert stored == (5 if rereads else 1), "a valid persistent store reads only what is new"
    assert _enriched(read_topic, out) == {"o1": "c1", "o1-again": "c1-new", "o2": "c2"}


def test_a_stale_persistent_store_is_rebuilt(job_config, topics, produce, read_topic, run_job):
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [_cdc("c", i, f"c{i}") for i in range(1, 4)])
    config = enrich_job(
        job_config, orders, customers, out, **{"stores.customers.adstore.max.staleness.ms": "0"}
    )
    produce(orders, [("1", "o1")])
    run_job(config)
    produce(orders, [("3", "o3")])
    (container,) = run_job(config)
    stored = sum(s["value"] for s in container.registry.snapshot()["samsa_adjunct_records_total"])
    assert stored == 3, "older than max.staleness.ms: re-created and bootstrapped again"
    assert _enriched(read_topic, out) == {"o1": "c1", "o3": "c3"}


@pytest.mark.parametrize(
    "extra",
    [{"stores.customers.adstore.max.staleness.ms": "0"}, {"stores.customers.factory": "inmemory"}],
    ids=["stale-rocksdb", "inmemory"],
)
def test_a_re_created_store_of_a_stream_not_marked_bootstrap_is_rebuilt_from_the_oldest_offset(
    extra, job_config, topics, produce, run_job
):
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [_cdc("c", i, f"c{i}") for i in range(1, 4)])
    config = enrich_job(
        job_config,
        orders,
        customers,
        out,
        **{f"systems.kafka.streams.{customers}.samza.bootstrap": "false", **extra},
    )
    run_job(config)
    produce(customers, [_cdc("u", 1, "c1-new")])
    (container,) = run_job(config)
    stored = sum(s["value"] for s in container.registry.snapshot()["samsa_adjunct_records_total"])
    assert stored == 4, "an empty store is rebuilt from the whole stream, not from the checkpoint"


def _poisoned_cdc(job_config, topics, produce, policy: str) -> tuple[str, str, dict[str, str]]:
    """Customers 1 and 5 around three events the Debezium extractor cannot store: an unknown op (offset
    1), a keyless event (offset 2) and a JSON array (offset 3); then orders 1..5."""
    orders, customers, out = topics(1), topics(1), topics(1)
    _, unknown_op = _cdc("c", 2, "c2")
    produce(customers, [_cdc("c", 1, "c1"), (json.dumps({"id": 2}), unknown_op.replace('"c"', '"x"'))])
    produce(customers, [(None, _cdc("c", 3, "c3")[1]), (json.dumps({"id": 4}), "[1, 2]"), _cdc("c", 5, "c5")])
    produce(orders, [(str(i), f"o{i}") for i in range(1, 6)])
    config = enrich_job(job_config, orders, customers, out, **{"task.deserialization.error.policy": policy})
    return customers, out, config


def test_cdc_events_the_extractor_cannot_store_are_skipped_under_the_skip_policy(
    job_config, topics, produce, read_topic, run_job
):
    _, out, config = _poisoned_cdc(job_config, topics, produce, "skip")
    (container,) = run_job(config)
    assert _enriched(read_topic, out) == {"o1": "c1", "o2": "?", "o3": "?", "o4": "?", "o5": "c5"}
    errors = container.registry.snapshot()["samsa_deserialization_errors_total"]
    assert sum(e["value"] for e in errors) == 3


def test_cdc_events_the_extractor_cannot_store_go_to_the_dead_letter_topic(
    job_config, topics, produce, read_topic, run_job
):
    customers, out, config = _poisoned_cdc(job_config, topics, produce, "dlq")
    run_job(config)
    assert _enriched(read_topic, out) == {"o1": "c1", "o2": "?", "o3": "?", "o4": "?", "o5": "c5"}
    job = JobConfig(Config(config))
    dead = read_topic(f"samsa-dlq-{job.job_key}", headers=True)
    assert [d[3] for d in dead][2] == b"[1, 2]"
    headers = [dict(d[4]) for d in dead]
    assert [h["samsa.source.offset"] for h in headers] == [b"1", b"2", b"3"]
    assert all(h["samsa.source.topic"] == customers.encode() for h in headers)
    assert b"unknown change event op 'x'" in headers[0]["samsa.error"]
    assert b"no key" in headers[1]["samsa.error"]


def test_a_cdc_event_the_extractor_cannot_store_fails_naming_its_offset_until_the_policy_skips_it(
    job_config, topics, produce, read_topic, run_job
):
    customers, out, config = _poisoned_cdc(job_config, topics, produce, "fail")
    with pytest.raises(MessageDeserializationError) as failure:
        run_job(config)
    message = str(failure.value)
    assert f"topic {customers} partition 0 offset 1" in message and "unknown change event op 'x'" in message
    assert "task.deserialization.error.policy to skip or dlq" in message
    # The persistent store resumes from its own offsets file: the policy gets it past the poison events.
    run_job({**config, "task.deserialization.error.policy": "skip"})
    assert _enriched(read_topic, out) == {"o1": "c1", "o2": "?", "o3": "?", "o4": "?", "o5": "c5"}


def test_a_task_writing_to_an_adjunct_store_fails_saying_it_is_read_only(
    job_config, topics, produce, run_job
):
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(orders, [("1", "o1")])
    config = enrich_job(job_config, orders, customers, out, **{"test.write.adjunct": "true"})
    with pytest.raises(Exception, match="read-only") as failure:
        run_job(config)
    assert isinstance(failure.value.__cause__, ReadOnlyStoreError)
    assert "customers" in str(failure.value)


def test_a_broadcast_store_gives_every_task_of_every_container_the_whole_table(
    job_config, topics, produce, read_topic, run_job
):
    orders, customers, out = topics(4), topics(2), topics(4)
    for i in range(1, 9):
        produce(customers, [_cdc("c", i, f"c{i}")], partition=i % 2)
    produce(customers, [_cdc("d", 8, None)], partition=0)
    # Every order on a partition unrelated to its customer's: only a broadcast table can enrich them all.
    for i in range(1, 9):
        produce(orders, [(str(i), f"o{i}")], partition=(i + 1) % 4)
    config = enrich_job(
        job_config,
        orders,
        customers,
        out,
        **{"job.container.count": "2", "task.broadcast.inputs": f"kafka.{customers}#[0-1]"},
    )
    containers = run_job(config)
    assert [len(c.model.tasks) for c in containers] == [2, 2]  # the customers stream makes no tasks
    expected = {f"o{i}": f"c{i}" for i in range(1, 8)} | {"o8": "?"}
    assert _enriched(read_topic, out) == expected
    for container in containers:  # each container read the table once, into one store
        stored = container.registry.snapshot()["samsa_adjunct_records_total"]
        assert [s["value"] for s in stored] == [9]


def test_broadcast_inputs_name_adjunct_streams_with_valid_partitions(job_config, topics) -> None:
    from samsa.runtime.config.config import Config
    from samsa.runtime.config.job import JobConfig
    from samsa.runtime.exceptions import ConfigError

    orders, customers = topics(1), topics(1)
    base = enrich_job(job_config, orders, customers, "out")
    for value, problem in [
        (f"kafka.{customers}", "is not <system>.<stream>#<partition>"),
        (f"kafka.{customers}#[3-1]", "empty partition range"),
    ]:
        with pytest.raises(ConfigError, match=problem):
            JobConfig(Config({**base, "task.broadcast.inputs": value}))


def test_a_bounded_dataset_switches_versions_only_when_sealed_and_survives_a_restart_mid_build(
    job_config, topics, produce, read_topic, run_job, kafka_bootstrap
):
    from samsa.adjunct.bounded import END_OF_DATASET
    from samsa.kafka import KafkaProducer

    orders, customers, out = topics(1), topics(1), topics(1)

    def dataset(names: dict[str, str], seal: bool) -> None:
        producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
        for cid, name in names.items():
            producer.send(customers, json.dumps({"name": name}).encode(), key=cid.encode())
        if seal:
            producer.send(customers, None, key=b"-", headers=[(END_OF_DATASET, b"")])
        producer.flush()
        producer.close()

    config = enrich_job(
        job_config,
        orders,
        customers,
        out,
        **{
            "stores.customers.adstore.key.value.extractor.factory": "",
            "stores.customers.adstore.versioned": "true",
            f"systems.kafka.streams.{customers}.samza.msg.serde": "json",
        },
    )
    del config["stores.customers.adstore.key.value.extractor.factory"]
    dataset({"1": "v1-a", "2": "v1-b"}, seal=True)
    dataset({"1": "v2-a"}, seal=False)  # version 2 half built: still version 1 for readers
    produce(orders, [("1", "o1"), ("2", "o2")])
    run_job(config)
    assert _enriched(read_topic, out) == {"o1": "v1-a", "o2": "v1-b"}
    dataset({"3": "v2-c"}, seal=True)  # the restart rebuilt version 2 from its start, then sealed it
    produce(orders, [("1", "o1-v2"), ("2", "o2-v2"), ("3", "o3-v2")])
    run_job(config)
    got = _enriched(read_topic, out)
    assert {k: got[k] for k in ("o1-v2", "o2-v2", "o3-v2")} == {
        "o1-v2": "v2-a",
        "o2-v2": "?",
        "o3-v2": "v2-c",
    }


@pytest.mark.parametrize(
    ("factory", "after_crash"),
    [("rocksdb", "continuing from its offset"), ("inmemory", "in-memory store: bootstrapping")],
)
def test_a_kill_9_then_restart_continues_or_rebootstraps_and_enriches_everything(
    factory, after_crash, job_config, topics, produce, read_topic, tmp_path, subprocess_env
):
    orders, customers, out = topics(2), topics(2), topics(2)
    for i in range(1, 21):
        produce(customers, [_cdc("c", i, f"c{i}")], partition=i % 2)
    for i in range(1, 21):
        produce(orders, [(str(i), f"o{i}-{n}") for n in range(150)], partition=i % 2)
    config = enrich_job(
        job_config, orders, customers, out, **{"stores.customers.factory": factory, "task.commit.ms": "50"}
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    marker = tmp_path / "crashed"
    env = {**subprocess_env, "SAMSA_CRASH_AT": "after-checkpoint", "SAMSA_CRASH_ONCE": str(marker)}
    proc = run_cli(job_file, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert marker.exists() and "restarting" in proc.stderr
    # Container logs go to stdout: the first start has no store; only the restart can continue one.
    assert proc.stdout.count(after_crash) >= (1 if factory == "rocksdb" else 3), proc.stdout[-3000:]
    got = _enriched(read_topic, out)
    assert len(got) == 20 * 150 and all(v == f"c{k[1:].split('-')[0]}" for k, v in got.items())
