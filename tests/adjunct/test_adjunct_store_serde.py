"""An adjunct store whose serde cannot take what its extractor produces: a configuration error when no
record fits (every record would fail: no restart), a bad record under the job's policy when others fit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from adjunct_jobs import enrich_job
from job_fixtures import job_config, produce, read_topic, run_in_process, subprocess_env

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.exceptions import InvalidConfigError
from samsa.runtime.exceptions import MessageDeserializationError

__all__ = ["job_config", "produce", "read_topic", "subprocess_env"]


def _event(i: int, name: str) -> tuple[str, str]:
    after = {"id": i, "name": name}
    return json.dumps({"id": i}), json.dumps({"before": None, "after": after, "op": "c", "ts_ms": 1})


def test_a_store_serde_that_fits_no_record_is_a_config_error_naming_the_key(
    job_config: Any, topics: Any, produce: Any
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [_event(i, f"c{i}") for i in range(5)])
    produce(orders, [("1", "o1")])
    # The reviewer's f7: the Debezium extractor stores dicts, the store's values are strings.
    config = enrich_job(job_config, orders, customers, out, **{"stores.customers.msg.serde": "string"})
    with pytest.raises(InvalidConfigError) as raised:
        run_in_process(config)
    text = str(raised.value)
    assert "stores.customers.msg.serde" in text
    assert "'string'" in text and "dict" in text
    assert f"topic {customers} partition 0 offset 0" in text
    assert "json" in text and "extractor" in text
    assert unmendable_exit(raised.value) == CONFIG_ERROR_EXIT  # `--container-id` exits 78, no restart


def test_the_default_extractor_with_a_store_serde_that_fits_no_record_is_a_config_error(
    job_config: Any, topics: Any, produce: Any
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [("1", json.dumps({"name": "A"}))])
    config = enrich_job(
        job_config,
        orders,
        customers,
        out,
        **{
            f"systems.kafka.streams.{customers}.samza.msg.serde": "json",
            "stores.customers.msg.serde": "string",
        },
    )
    del config["stores.customers.adstore.key.value.extractor.factory"]  # the envelope's value: a dict
    with pytest.raises(InvalidConfigError, match=r"stores\.customers\.msg\.serde"):
        run_in_process(config)


@pytest.mark.parametrize("policy", ["skip", "fail"])
def test_one_record_the_serde_cannot_take_among_good_ones_follows_the_policy(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, policy: str
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [("1", json.dumps({"name": "A"})), ("2", json.dumps({"name": "odd"}))])
    produce(customers, [("3", json.dumps({"name": "C"}))])
    produce(orders, [("1", "o1"), ("2", "o2"), ("3", "o3")])
    config = job_config(
        f"kafka.{orders}",
        out,
        task="adjunct_lookup_tasks:LookupTask",
        **{
            "job.container.count": "1",
            "task.deserialization.error.policy": policy,
            f"systems.kafka.streams.{customers}.samza.msg.serde": "json",
            f"systems.kafka.streams.{customers}.samza.bootstrap": "true",
            "stores.customers.factory": "rocksdb",
            "stores.customers.key.serde": "string",
            "stores.customers.msg.serde": "string",
            "stores.customers.adstore.input": f"kafka.{customers}",
            "stores.customers.adstore.key.value.extractor.factory": (
                "adjunct_test_extractors:NameOrRecordExtractor"
            ),
        },
    )
    if policy == "fail":
        with pytest.raises(MessageDeserializationError, match=f"topic {customers} partition 0 offset 1"):
            run_in_process(config)
        return
    run_in_process(config)
    assert [v.decode() for _, _, _, v in read_topic(out)] == ["o1='A'", "o2=None", "o3='C'"]


def _writer_over(rows: dict[str, str]) -> tuple[Any, Any]:
    from samsa.adjunct.extractors import EnvelopeExtractor
    from samsa.adjunct.writer import AdjunctWriter
    from samsa.runtime.metrics import Counter
    from samsa.serde.builtin import StringSerde
    from samsa.stores.memory import InMemoryStore
    from samsa.stores.serialized import SerializedStore

    store = SerializedStore(InMemoryStore(), StringSerde(), StringSerde())
    store.put_all(list(rows.items()))
    return AdjunctWriter("customers", "Partition 0", store, EnvelopeExtractor(), Counter({})), store


def _env(offset: int, key: str, value: Any) -> Any:
    from samsa.runtime.task import IncomingMessageEnvelope

    return IncomingMessageEnvelope("kafka", "cdc", 0, offset, key, value, 0, None)


def test_a_refused_record_is_a_bad_record_when_the_store_already_holds_rows() -> None:
    from samsa.adjunct.exceptions import ExtractionError, StoreSerdeMismatchError

    # Its rows show the serde fits the stream: one refused record among them is that record's problem.
    writer, store = _writer_over({"1": "A"})
    with pytest.raises(ExtractionError) as caught:
        writer.write([_env(5, "2", {"name": "B"})])
    assert not isinstance(caught.value, StoreSerdeMismatchError) and caught.value.offset == 5
    assert "stores.customers.msg.serde" in caught.value.reason
    # An empty store and a chunk of which no record fits: the configuration.
    writer, store = _writer_over({})
    with pytest.raises(StoreSerdeMismatchError) as config:
        writer.write([_env(5, "2", {"name": "B"}), _env(6, None, "x"), _env(7, "3", None)])
    assert config.value.key == "stores.customers.msg.serde"
    assert "systems.kafka.streams.cdc.samza.msg.serde" in str(config.value)
    assert list(store.all()) == []


def test_samsa_run_stops_on_the_mismatch_without_restarts(
    job_config: Any, topics: Any, produce: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    import subprocess

    orders, customers, out = topics(1), topics(1), topics(1)
    produce(customers, [_event(1, "c1")])
    config = enrich_job(
        job_config,
        orders,
        customers,
        out,
        **{"stores.customers.msg.serde": "string", "deploy.local.max.restarts": "2"},
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    run = subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", "--until-caught-up", str(job_file)],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = run.stdout + run.stderr
    assert run.returncode == 2, text
    assert "restarting in" not in text, "the container was restarted"
    assert "stores.customers.msg.serde" in text and f"topic {customers} partition 0 offset 0" in text
