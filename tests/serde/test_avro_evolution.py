"""Avro schema evolution: reader schemas, what a schema mismatch reports, and bytes defaults."""

import json
from typing import Any

import pytest

from samsa.serde.avro import AvroSerde, parse_schema
from samsa.serde.exceptions import DeserializationError, ReaderSchemaError, SerdeConfigError

V1 = {
    "type": "record",
    "name": "R",
    "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}


def serde(writer: dict[str, Any], reader: dict[str, Any] | None = None) -> AvroSerde:
    parsed_reader = None if reader is None else parse_schema(json.dumps(reader), "reader")
    return AvroSerde("r", parse_schema(json.dumps(writer), "writer"), parsed_reader)


def test_a_reader_schema_reads_older_data() -> None:
    assert serde(V1, V2).from_bytes(serde(V1).to_bytes({"id": 1, "name": "a"})) == {
        "id": 1,
        "name": "a",
        "email": None,
    }


@pytest.mark.parametrize(
    ("reader", "reason"),
    [
        ({**V1, "fields": [*V1["fields"], {"name": "x", "type": "long"}]}, "No default value for field x"),
        ({**V1, "fields": [{"name": "id", "type": "string"}, V1["fields"][1]]}, "int is not string"),
    ],
)
def test_a_reader_schema_that_cannot_read_the_writers_data_is_a_config_error(
    reader: dict[str, Any], reason: str
) -> None:
    data = serde(V1).to_bytes({"id": 1, "name": "a"})
    with pytest.raises(
        ReaderSchemaError, match=rf"serializers\.registry\.r\.reader\.schema cannot read .*{reason}"
    ):
        serde(V1, reader).from_bytes(data)
    # not a bad message that a skip/dlq policy would swallow: the config is at fault
    assert issubclass(ReaderSchemaError, SerdeConfigError) and not issubclass(
        ReaderSchemaError, DeserializationError
    )


def test_data_of_another_writer_schema_says_how_to_evolve_a_schemaless_serde() -> None:
    old = serde(V1).to_bytes({"id": 1, "name": "a"})
    new = serde(V2).to_bytes({"id": 1, "name": "a", "email": "e"})
    hint = (
        r"written with another schema .*keep the schema it was written with "
        r".*serializers\.registry\.r\.reader\.schema"
    )
    with pytest.raises(DeserializationError, match=hint):
        serde(V2).from_bytes(old)
    with pytest.raises(DeserializationError, match=rf"bytes left after the Avro record; .*{hint}"):
        serde(V1).from_bytes(new)


def test_bytes_and_fixed_defaults_are_bytes_when_written_and_read() -> None:
    fields = [
        {"name": "id", "type": "int"},
        {"name": "b", "type": "bytes", "default": "\u00ff\u0000"},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "ab"},
    ]
    schema = {"type": "record", "name": "B", "fields": fields}
    written = serde(schema)
    assert written.from_bytes(written.to_bytes({"id": 1})) == {"id": 1, "b": b"\xff\x00", "f": b"ab"}
    older = {"type": "record", "name": "B", "fields": fields[:1]}
    assert serde(older, schema).from_bytes(serde(older).to_bytes({"id": 2})) == {
        "id": 2,
        "b": b"\xff\x00",
        "f": b"ab",
    }


def test_a_reader_schema_error_stops_the_job_even_under_a_skip_policy() -> None:
    from samsa import StreamTask
    from samsa.testing import TestRunner

    class Drop(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

    incompatible = {**V1, "fields": [*V1["fields"], {"name": "x", "type": "long"}]}
    config = {
        "serializers.registry.r.class": "avro",
        "serializers.registry.r.schema": json.dumps(V1),
        "serializers.registry.r.reader.schema": json.dumps(incompatible),
        "systems.kafka.streams.in.samza.msg.serde": "r",
        "task.deserialization.error.policy": "skip",
    }
    with TestRunner.of(Drop) as runner:
        runner.with_config(config).add_input("in", [{"id": 1, "name": "a"}])
        # Skipping would drop every message of the stream: the config is at fault, not the message.
        with pytest.raises(ReaderSchemaError, match=r"serializers\.registry\.r\.reader\.schema"):
            runner.run()
