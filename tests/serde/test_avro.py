"""Avro serdes: schemaless binary and the Confluent wire format against a fake registry over HTTP."""

import io
import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.serde.avro import AvroSerde, AvroSerdeFactory, ConfluentAvroSerde, parse_schema
from samsa.serde.exceptions import DeserializationError, SerdeConfigError, SerializationError
from samsa.serde.schema_registry import SchemaRegistryClient
from samsa.serde.testing import FakeSchemaRegistry

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "test",
    "fields": [{"name": "name", "type": "string"}, {"name": "n", "type": "int"}],
}
USER_V2 = {  # adds a field with a default: readers on v2 can read v1 data
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}
V1 = json.dumps(USER_V1)
V2 = json.dumps(USER_V2)


def factory(options: dict[str, str], name: str = "users") -> AvroSerdeFactory:
    return AvroSerdeFactory(name, options, SchemaRegistryClient)


@given(st.text(), st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_schemaless_round_trip(name: str, n: int) -> None:
    serde = AvroSerde("users", parse_schema(V1, "test"))
    assert serde.from_bytes(serde.to_bytes({"name": name, "n": n})) == {"name": name, "n": n}


def test_schemaless_bytes_are_plain_avro_binary() -> None:
    # "a" is zigzag length 1 (0x02) then 0x61; int 1 is zigzag 0x02; int -1 is 0x01
    serde = AvroSerde("users", parse_schema(V1, "test"))
    assert serde.to_bytes({"name": "a", "n": 1}) == b"\x02a\x02"
    assert serde.to_bytes({"name": "a", "n": -1}) == b"\x02a\x01"


def test_schemaless_reader_schema_resolves_old_data() -> None:
    old = AvroSerde("users", parse_schema(V1, "test"))
    new = AvroSerde("users", parse_schema(V1, "test"), parse_schema(V2, "test"))
    assert new.from_bytes(old.to_bytes({"name": "a", "n": 1})) == {"name": "a", "n": 1, "email": None}


def test_schemaless_errors_say_what_does_not_match() -> None:
    serde = AvroSerde("users", parse_schema(V1, "test"))
    with pytest.raises(SerializationError, match=r"User\.n = 'x' \(str\), but the schema says int"):
        serde.to_bytes({"name": "a", "n": "x"})
    with pytest.raises(DeserializationError, match="data ends before the record"):
        serde.from_bytes(b"\x02")
    with pytest.raises(DeserializationError, match=r"2 bytes left.*users\.schema\.registry\.url"):
        serde.from_bytes(b"\x02a\x02\x00\x00")


def test_tombstones_pass_through(fake_registry: FakeSchemaRegistry) -> None:
    client = SchemaRegistryClient(fake_registry.url)
    for serde in (
        AvroSerde("u", parse_schema(V1, "t")),
        ConfluentAvroSerde("u", client, "t-value", (V1, parse_schema(V1, "t"))),
    ):
        assert serde.to_bytes(None) is None
        assert serde.from_bytes(None) is None
    assert fake_registry.requests == []


def test_confluent_wire_format_is_exact(fake_registry: FakeSchemaRegistry) -> None:
    fake_registry.add_schema("other-value", json.dumps({"type": "string"}))  # takes id 1
    serde = factory({"schema": V1, "schema.registry.url": fake_registry.url}).get("orders", is_key=False)
    data = serde.to_bytes({"name": "a", "n": 1})
    assert data == b"\x00\x00\x00\x00\x02" + b"\x02a\x02"
    magic, schema_id = struct.unpack(">bI", data[:5])
    assert (magic, schema_id) == (0, 2)
    # an independent decoder reads what follows the header as plain Avro of the registered schema
    assert fastavro.schemaless_reader(io.BytesIO(data[5:]), USER_V1, None) == {"name": "a", "n": 1}


def test_confluent_registers_once_under_topic_subjects(fake_registry: FakeSchemaRegistry) -> None:
    serdes = factory({"schema": V1, "schema.registry.url": fake_registry.url})
    value, key = serdes.get("orders", is_key=False), serdes.get("orders", is_key=True)
    assert serdes.get("orders", is_key=False) is value
    for i in range(5):
        value.to_bytes({"name": "a", "n": i})
        key.to_bytes({"name": "k", "n": i})
    assert sorted(fake_registry.requests) == [
        ("POST", "/subjects/orders-key/versions"),
        ("POST", "/subjects/orders-value/versions"),
    ]


def test_confluent_reads_writer_schema_by_id_once(fake_registry: FakeSchemaRegistry) -> None:
    schema_id = fake_registry.add_schema("orders-value", V1)
    payload = io.BytesIO()
    fastavro.schemaless_writer(payload, USER_V1, {"name": "z", "n": 9})
    message = struct.pack(">bI", 0, schema_id) + payload.getvalue()
    serde = factory({"schema.registry.url": fake_registry.url}).get("orders", is_key=False)
    assert [serde.from_bytes(message) for _ in range(3)] == [{"name": "z", "n": 9}] * 3
    assert fake_registry.requests == [("GET", f"/schemas/ids/{schema_id}")]


def test_confluent_reader_schema_resolves_each_writer(fake_registry: FakeSchemaRegistry) -> None:
    url = fake_registry.url
    old = factory({"schema": V1, "schema.registry.url": url}).get("t", False)
    new = factory({"schema": V2, "schema.registry.url": url}).get("t", False)
    reader = factory({"reader.schema": V2, "schema.registry.url": url}).get("t", False)
    old_bytes = old.to_bytes({"name": "a", "n": 1})
    new_bytes = new.to_bytes({"name": "b", "n": 2, "email": "b@x"})
    assert old_bytes[1:5] != new_bytes[1:5]  # two schema versions, two ids
    assert reader.from_bytes(old_bytes) == {"name": "a", "n": 1, "email": None}
    assert reader.from_bytes(new_bytes) == {"name": "b", "n": 2, "email": "b@x"}


def test_confluent_bad_magic_and_unknown_id(fake_registry: FakeSchemaRegistry) -> None:
    serde = factory({"schema.registry.url": fake_registry.url}).get("t", False)
    with pytest.raises(DeserializationError, match=r"magic byte 0.*starting 0100000001"):
        serde.from_bytes(b"\x01\x00\x00\x00\x01\x02")
    with pytest.raises(DeserializationError, match="got 3 bytes"):
        serde.from_bytes(b"\x00\x00\x00")
    with pytest.raises(DeserializationError, match="unknown schema id 4242") as info:
        serde.from_bytes(struct.pack(">bI", 0, 4242) + b"\x00")
    assert "4242" in info.value.reason


def test_confluent_refuses_non_avro_schema(fake_registry: FakeSchemaRegistry) -> None:
    schema_id = fake_registry.add_schema("t-value", '{"type": "object"}', schema_type="JSON")
    serde = factory({"schema.registry.url": fake_registry.url}).get("t", False)
    with pytest.raises(DeserializationError, match=f"schema id {schema_id} is a JSON schema"):
        serde.from_bytes(struct.pack(">bI", 0, schema_id) + b"\x00")


def test_confluent_without_auto_register_only_looks_up(fake_registry: FakeSchemaRegistry) -> None:
    options = {"schema": V1, "schema.registry.url": fake_registry.url, "auto.register.schemas": "false"}
    serde = factory(options).get("t", False)
    with pytest.raises(SerializationError, match="not registered under subject 't-value'"):
        serde.to_bytes({"name": "a", "n": 1})
    schema_id = fake_registry.add_schema("t-value", V1)
    assert serde.to_bytes({"name": "a", "n": 1})[1:5] == schema_id.to_bytes(4, "big")
    assert ("POST", "/subjects/t-value/versions") not in fake_registry.requests


def test_confluent_serializing_needs_schema_and_topic(fake_registry: FakeSchemaRegistry) -> None:
    with pytest.raises(
        SerializationError, match=r"no writer schema: set serializers\.registry\.users\.schema"
    ):
        factory({"schema.registry.url": fake_registry.url}).get("t", False).to_bytes({"n": 1})
    with pytest.raises(SerdeConfigError, match=r"a store has none: give the store a schemaless avro serde"):
        factory({"schema": V1, "schema.registry.url": fake_registry.url}).get(None, False)


def test_factory_reads_schema_files(tmp_path: Path) -> None:
    (tmp_path / "v1.avsc").write_text(V1)
    (tmp_path / "v2.avsc").write_text(V2)
    options = {"schema.file": str(tmp_path / "v1.avsc"), "reader.schema.file": str(tmp_path / "v2.avsc")}
    serde = factory(options).get("t", False)
    assert isinstance(serde, AvroSerde)
    assert serde.from_bytes(serde.to_bytes({"name": "a", "n": 1}))["email"] is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, r"needs a schema: set serializers\.registry\.users\.schema"),
        ({"schema": "{"}, r"serializers\.registry\.users\.schema: not a valid Avro schema"),
        ({"schema": '{"type": "nope"}'}, r"users\.schema: not a valid Avro schema"),
        ({"schema": V1, "schema.file": "x"}, "set only one of"),
        (
            {"schema.file": "/nonexistent/x.avsc"},
            r"users\.schema\.file \(/nonexistent/x\.avsc\): cannot read",
        ),
        ({"schema": V1, "colour": "red"}, r"users\.colour: unknown avro serde option"),
        ({"schema": V1, "auto.register.schemas": "yes"}, "expected true or false"),
    ],
)
def test_factory_config_errors_name_the_key(options: dict[str, str], message: str) -> None:
    with pytest.raises(SerdeConfigError, match=message):
        factory(options)


def _record(serde: Any) -> dict[str, Any]:
    return serde.from_bytes(serde.to_bytes({"name": "a", "n": 1}))  # type: ignore[no-any-return]


def test_schemaless_serde_is_shared_across_topics() -> None:
    serdes = factory({"schema": V1})
    assert serdes.get("a", False) is serdes.get("b", True) is serdes.get(None, False)
    assert _record(serdes.get("a", False)) == {"name": "a", "n": 1}


def test_confluent_data_the_reader_schema_cannot_read_is_a_bad_message(
    fake_registry: FakeSchemaRegistry,
) -> None:
    # The writer schema comes per message (its id): one producer's incompatible schema is a bad message the
    # deserialization policy handles (skip, dlq), not a config error that ends the job.
    url = fake_registry.url
    needs_x = json.dumps({**USER_V1, "fields": [*USER_V1["fields"], {"name": "x", "type": "long"}]})
    written = (
        factory({"schema": V1, "schema.registry.url": url}).get("t", False).to_bytes({"name": "a", "n": 1})
    )
    reader = factory({"reader.schema": needs_x, "schema.registry.url": url}).get("t", False)
    with pytest.raises(DeserializationError, match=r"reader\.schema\) cannot read schema id \d+"):
        reader.from_bytes(written)
