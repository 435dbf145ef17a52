"""An adjunct store is rebuilt from its stream when what turns its records into rows changed since it was
built: its extractor, its serdes, its source streams' serdes or partitions (it would keep the old rows)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce, read_topic, run_in_process

from samsa.adjunct.offsets import OFFSETS_FILE, read_offsets, write_offsets
from samsa.adjunct.recovery import adjunct_start
from samsa.streams import SystemStreamPartition

__all__ = ["job_config", "produce", "read_topic"]

# The reviewer's record (/tmp/rev-cfg/repro/setup.sh): a Debezium create of customer 7, with schemas.
_KEY = json.dumps({"schema": {"type": "struct"}, "payload": {"id": 7}})
_VALUE = json.dumps(
    {"schema": {"type": "struct"}, "payload": {"op": "c", "before": None, "after": {"id": 7, "name": "A"}}}
)


def _job(job_config: Any, orders: str, cdc: str, out: str, **extra: str) -> dict[str, str]:
    config: dict[str, str] = job_config(
        f"kafka.{orders}",
        out,
        task="samsa_test_tasks:EnrichTask",
        **{
            "job.container.count": "1",
            f"systems.kafka.streams.{cdc}.samza.msg.serde": "json",
            f"systems.kafka.streams.{cdc}.samza.bootstrap": "true",
            "stores.customers.factory": "rocksdb",
            "stores.customers.key.serde": "string",
            "stores.customers.msg.serde": "json",
            "stores.customers.adstore.input": f"kafka.{cdc}",
            **extra,
        },
    )
    return config


def _names(read_topic: Any, out: str) -> dict[str, str]:
    return dict(v.decode().split(":") for _, _, _, v in read_topic(out))


def test_a_changed_extractor_rebuilds_the_store_from_its_stream(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, caplog: Any
) -> None:
    orders, cdc, out = topics(1), topics(1), topics(1)
    produce(cdc, [(_KEY, _VALUE)])
    produce(orders, [("7", "v1")])
    v1 = _job(job_config, orders, cdc, out)  # the default extractor: the row's key is the whole JSON key
    run_in_process(v1)
    assert _names(read_topic, out) == {"v1": "?"}
    v2 = {**v1, "stores.customers.adstore.key.value.extractor.factory": "debezium"}
    produce(orders, [("7", "v2")])
    caplog.set_level("INFO", logger="samsa.runtime.container")
    run_in_process(v2)
    assert _names(read_topic, out) == {"v1": "?", "v2": "A"}, caplog.text
    assert "stores.customers.adstore.key.value.extractor.factory" in caplog.text
    assert "store valid" not in caplog.text
    # Unchanged settings: the next start continues from the store's own offset.
    caplog.clear()
    run_in_process(v2)
    assert "store valid: continuing from its offset 1" in caplog.text


def test_a_changed_store_serde_rebuilds_the_store(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, caplog: Any
) -> None:
    orders, cdc, out = topics(1), topics(1), topics(1)
    produce(cdc, [("7", json.dumps({"name": "A"}))])
    v1 = _job(job_config, orders, cdc, out, **{"stores.customers.key.serde": "bytes"})
    v1[f"systems.kafka.streams.{cdc}.samza.key.serde"] = "bytes"
    run_in_process(v1)
    v2 = {**v1, "stores.customers.key.serde": "string"}
    v2[f"systems.kafka.streams.{cdc}.samza.key.serde"] = "string"
    produce(orders, [("7", "o")])
    caplog.set_level("INFO", logger="samsa.runtime.container")
    run_in_process(v2)
    assert _names(read_topic, out) == {"o": "A"}
    assert "stores.customers.key.serde" in caplog.text and "store valid" not in caplog.text


SSP = SystemStreamPartition("kafka", "cdc", 0)
_BUILD = {"extractor": "debezium", "key.serde": "string", "msg.serde": "json", "sources": ["kafka.cdc#0"]}


def test_the_offsets_file_records_the_build_settings(tmp_path: Path) -> None:
    write_offsets(tmp_path, {SSP: 5}, build=_BUILD)
    stored = read_offsets(tmp_path, [SSP])
    assert stored is not None and stored.build == _BUILD
    assert json.loads((tmp_path / OFFSETS_FILE).read_text())["build"] == _BUILD


def test_an_offsets_file_without_build_settings_reads_as_unknown(tmp_path: Path) -> None:
    write_offsets(tmp_path, {SSP: 5})  # as an older Samsa wrote it
    stored = read_offsets(tmp_path, [SSP])
    assert stored is not None and stored.offsets == {SSP: 5} and stored.build is None


def _decide(**changes: Any):  # type: ignore[no-untyped-def]
    inputs: dict[str, Any] = {
        "persistent": True,
        "bootstrap": True,
        "exists": True,
        "stored_offset": 5,
        "stored_at_ms": 0.0,
        "now_ms": 1.0,
        "max_staleness_ms": 10_000,
        "low": 0,
        "high": 8,
    }
    return adjunct_start(**{**inputs, **changes})


def test_changed_build_settings_recreate_the_store_naming_what_changed() -> None:
    kept = _decide(build_changed=lambda: None)
    assert (kept.offset, kept.wipe) == (5, False)
    changed = _decide(build_changed=lambda: "stores.customers.msg.serde changed from 'string' to 'json'")
    assert (changed.offset, changed.wipe) == (0, True)
    assert "stores.customers.msg.serde changed from 'string' to 'json'" in changed.note
    # Asked before the record check, which reads from the broker.
    asked: list[str] = []
    _decide(build_changed=lambda: "x", changed=lambda: asked.append("read") or None)
    assert asked == []


def test_build_settings_name_each_change_by_its_key() -> None:
    from samsa.adjunct.build import SOURCES, build_change, build_settings
    from samsa.runtime.config.config import Config

    a, b = SystemStreamPartition("kafka", "cdc", 0), SystemStreamPartition("kafka", "cdc", 1)
    base = {"stores.customers.adstore.input": "kafka.cdc"}

    def settings(sources: dict[SystemStreamPartition, tuple[str, str]], **config: str) -> dict[str, Any]:
        return build_settings(Config({**base, **config}), "customers", "string", "myjson", sources)

    both = {a: ("string", "json"), b: ("string", "json")}
    built = settings(both, **{"serializers.registry.myjson.class": "json"})
    assert build_change(built, settings(both, **{"serializers.registry.myjson.class": "json"})) is None
    assert build_change(json.loads(json.dumps(built)), built) is None, "as read back from the file"
    redefined = build_change(built, settings(both, **{"serializers.registry.myjson.class": "string"}))
    assert redefined == "serializers.registry.myjson.class changed from 'json' to 'string'"
    # A broadcast store fed from one partition fewer keeps the other partition's rows otherwise.
    fewer = build_change(built, settings({a: both[a]}, **{"serializers.registry.myjson.class": "json"}))
    assert fewer is not None and fewer.startswith(f"{SOURCES} changed from 'kafka.cdc#0,kafka.cdc#1'")
    stream = build_change(built, {**built, "systems.kafka.streams.cdc.samza.msg.serde": "string"})
    assert stream == "systems.kafka.streams.cdc.samza.msg.serde changed from 'json' to 'string'"
    # An older Samsa's file records none: taken as built with the current settings (no rebuild at upgrade).
    assert build_change(None, built) is None


def test_registry_credentials_and_address_are_no_build_setting_and_never_recorded() -> None:
    from samsa.adjunct.build import build_change, build_settings
    from samsa.runtime.config.config import Config

    def settings(**registry: str) -> dict[str, str | None]:
        keys = {"serializers.registry.av.class": "avro", "serializers.registry.av.schema": '"string"'}
        keys.update({f"serializers.registry.av.{k.replace('_', '.')}": v for k, v in registry.items()})
        return build_settings(Config(keys), "customers", "string", "av", {SSP: ("string", "av")})

    one = settings(schema_registry_url="http://a:8081", basic_auth_user_info="me:secret1")
    other = settings(
        schema_registry_url="http://b:8081", basic_auth_user_info="me:secret2", auto_register_schemas="false"
    )
    assert build_change(one, other) is None, "a rotated password or a moved registry rebuilds nothing"
    assert "secret1" not in json.dumps(one)
    assert one["serializers.registry.av.schema.registry.url"] == "set"
    assert build_change(one, settings()) is not None, "turning the wire format off is a change"
