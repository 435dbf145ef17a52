"""The Avro serdes refuse values that do not fit the writer schema instead of coercing or dropping them."""

import datetime
import decimal
import enum
import json
import math
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.serde.avro import AvroSerde, AvroSerdeFactory, parse_schema
from samsa.serde.exceptions import SerializationError
from samsa.serde.schema_registry import SchemaRegistryClient
from samsa.serde.testing import FakeSchemaRegistry

ADDRESS = {"type": "record", "name": "Address", "fields": [{"name": "zip", "type": "string"}]}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "amount", "type": "long"},
        {"name": "price", "type": "double", "default": 0},
        {"name": "ratio", "type": "float", "default": 0},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "attrs", "type": {"type": "map", "values": "long"}, "default": {}},
        {"name": "address", "type": ["null", ADDRESS], "default": None},
        {"name": "digest", "type": ["null", {"type": "fixed", "name": "Digest", "size": 2}], "default": None},
    ],
}
GOOD = {"id": 1, "amount": 2, "paid": True, "currency": "EUR"}


def serde(schema: dict[str, Any] = ORDER) -> AvroSerde:
    return AvroSerde("orders", parse_schema(json.dumps(schema), "test"))


def round_trip(record: dict[str, Any], schema: dict[str, Any] = ORDER) -> dict[str, Any]:
    s = serde(schema)
    return s.from_bytes(s.to_bytes(record))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"amount": 2.9}, r"Order\.amount = 2\.9 \(float\), but the schema says long"),
        ({"amount": 2.0}, r"Order\.amount = 2\.0 \(float\), but the schema says long"),
        ({"id": 2**40}, r"Order\.id = 1099511627776 \(int\).*outside Avro int's range .*use long"),
        ({"amount": 2**63}, r"Order\.amount = 9223372036854775808 \(int\).*outside Avro long's range"),
        ({"paid": "false"}, r"Order\.paid = 'false' \(str\), but the schema says boolean"),
        ({"paid": 1}, r"Order\.paid = 1 \(int\), but the schema says boolean"),
        ({"id": True}, r"Order\.id = True \(bool\), but the schema says int"),
        ({"price": "1.5"}, r"Order\.price = '1\.5' \(str\), but the schema says double"),
        ({"price": True}, r"Order\.price = True \(bool\), but the schema says double"),
        ({"ratio": 1e300}, r"Order\.ratio = 1e\+300 \(float\).*float.*infinity; use a double"),
        ({"ratio": -(2**200)}, r"Order\.ratio = .*\(int\).*infinity"),
        (
            {"amuont": 7},
            r"Order has fields the schema does not declare: 'amuont' \(did you mean 'amount'\?\)",
        ),
        ({"note": 5}, r"Order\.note = 5 \(int\), but the schema says one of null \| string"),
        ({"currency": "JPY"}, r"Order\.currency = 'JPY' \(str\), but the schema says enum shop\.Currency"),
        ({"tags": ["a", 3]}, r"Order\.tags\[1\] = 3 \(int\), but the schema says string"),
        ({"tags": "ab"}, r"Order\.tags = 'ab' \(str\), but the schema says array of string"),
        ({"attrs": {"k": 1.5}}, r"Order\.attrs\['k'\] = 1\.5 \(float\), but the schema says long"),
        ({"attrs": {1: 1}}, r"Order\.attrs = 1 \(int\), but the schema says string: map keys are strings"),
        ({"address": {"zip": 1}}, r"Order\.address\.zip = 1 \(int\), but the schema says string"),
        ({"address": {"zip": "1", "city": "x"}}, r"Order\.address has fields .*'city'; declared: zip"),
        (
            {"digest": b"abc"},
            r"Order\.digest = b'abc' \(bytes\), but the schema says "
            r"one of null \| fixed shop\.Digest \(2 bytes",
        ),
    ],
)
def test_a_value_that_does_not_fit_is_refused_naming_path_value_and_type(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(SerializationError, match=message) as info:
        serde().to_bytes({**GOOD, **change})
    assert info.value.serde == "orders"
    assert str(info.value).startswith(
        "orders serde cannot serialize: record does not match the writer schema"
    )


def test_a_missing_field_without_default_is_refused_and_a_nullable_one_written_as_null() -> None:
    with pytest.raises(SerializationError, match=r"Order\.paid is missing and has no default.*boolean"):
        serde().to_bytes({"id": 1, "amount": 2, "currency": "EUR"})
    nullable = {**ADDRESS, "fields": [*ADDRESS["fields"], {"name": "city", "type": ["null", "string"]}]}
    assert round_trip({"zip": "1"}, nullable) == {"zip": "1", "city": None}


def test_a_record_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(
        SerializationError, match=r"Order = \[1, 2\] \(list\), but the schema says record shop\.Order"
    ):
        serde().to_bytes([1, 2])


class Colour(enum.StrEnum):
    RED = "EUR"


@pytest.mark.parametrize(
    ("change", "read_back"),
    [
        ({"price": 3}, {"price": 3.0}),  # int to double: Avro's promotion
        ({"ratio": 2}, {"ratio": 2.0}),
        ({"ratio": 0.5}, {"ratio": 0.5}),
        ({"ratio": math.inf}, {"ratio": math.inf}),  # asked for: not an overflow
        ({"ratio": 3.4028234e38}, {"ratio": 3.4028234663852886e38}),  # rounds to FLT_MAX, not infinity
        ({"id": 2**31 - 1, "amount": -(2**63)}, {"id": 2**31 - 1, "amount": -(2**63)}),
        ({"note": "gift", "tags": ("a", "b")}, {"note": "gift", "tags": ["a", "b"]}),
        ({"attrs": {"k": 5}, "address": {"zip": "9"}}, {"attrs": {"k": 5}, "address": {"zip": "9"}}),
        ({"currency": Colour.RED}, {"currency": "EUR"}),  # a str subclass is a str
        ({"digest": b"ab"}, {"digest": b"ab"}),
        ({"address": {"-type": "shop.Address", "zip": "9"}}, {"address": {"zip": "9"}}),  # fastavro's hint
        ({"note": ("string", "x")}, {"note": "x"}),  # fastavro's union tuple notation
    ],
)
def test_values_that_fit_are_written(change: dict[str, Any], read_back: dict[str, Any]) -> None:
    record = round_trip({**GOOD, **change})
    assert {key: record[key] for key in read_back} == read_back


def test_float_just_past_the_32_bit_range_is_refused() -> None:
    limit = 2.0**128 - 2.0**103  # half way between FLT_MAX and 2**128: rounds to infinity
    with pytest.raises(SerializationError, match="infinity"):
        serde().to_bytes({**GOOD, "ratio": limit})
    assert round_trip({**GOOD, "ratio": math.nextafter(limit, 0)})["ratio"] == 3.4028234663852886e38


def test_logical_types_take_their_python_types_and_their_underlying_ones() -> None:
    schema = {
        "type": "record",
        "name": "L",
        "fields": [
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "cost", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        ],
    }
    at = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    ident = uuid.uuid4()
    record = {"at": at, "day": datetime.date(2024, 1, 2), "id": ident, "cost": decimal.Decimal("12.34")}
    assert round_trip(record, schema) == {**record, "id": ident}
    assert round_trip({**record, "at": 1}, schema)["at"] == datetime.datetime(
        1970, 1, 1, 0, 0, 0, 1000, datetime.UTC
    )
    with pytest.raises(
        SerializationError, match=r"L\.at = 'soon' \(str\), but the schema says long \(timestamp-millis\)"
    ):
        serde(schema).to_bytes({**record, "at": "soon"})


def test_recursive_types_are_checked_at_every_depth() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}],
    }
    assert round_trip({"v": 1, "next": {"v": 2, "next": None}}, node)["next"]["v"] == 2
    with pytest.raises(SerializationError, match=r"Node\.next\.next\.v = 'x' \(str\)"):
        serde(node).to_bytes({"v": 1, "next": {"v": 2, "next": {"v": "x"}}})


def test_the_confluent_serde_checks_too(fake_registry: FakeSchemaRegistry) -> None:
    options = {"schema": json.dumps(ORDER), "schema.registry.url": fake_registry.url}
    confluent = AvroSerdeFactory("orders", options, SchemaRegistryClient).get("t", False)
    with pytest.raises(SerializationError, match=r"Order\.amount = 2\.9 \(float\)"):
        confluent.to_bytes({**GOOD, "amount": 2.9})
    assert confluent.from_bytes(confluent.to_bytes(GOOD))["amount"] == 2


SMALL = {
    "type": "record",
    "name": "S",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "s", "type": "string"},
        {"name": "n", "type": ["null", "long"]},
        {"name": "a", "type": {"type": "array", "items": "int"}},
    ],
}
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.one_of(st.integers(max_value=2**40), st.text(max_size=1)), max_size=3),
)
VALID = {"i": 1, "l": 2, "d": 0.5, "b": False, "s": "s", "n": None, "a": [3]}


@given(st.sampled_from([*VALID, "x", "ii"]), ANY_VALUE)
def test_whatever_is_written_reads_back_as_given(field: str, value: Any) -> None:
    """No silent coercion: a record with one field set to anything is refused, or reads back as given (same
    values of the same types; an int in a double reads as a float, Avro's promotion); an undeclared field
    is always refused."""
    s = serde(SMALL)
    record = {**VALID, field: value}
    try:
        data = s.to_bytes(record)
    except SerializationError:
        return
    assert field in VALID
    expected = {**record, "d": float(record["d"])}
    assert [(type(v), v) for v in s.from_bytes(data).values()] == [(type(v), v) for v in expected.values()]


def test_the_confluent_serde_refuses_before_touching_the_registry() -> None:
    options = {"schema": json.dumps(ORDER), "schema.registry.url": "http://127.0.0.1:9"}  # nothing listens
    confluent = AvroSerdeFactory("orders", options, SchemaRegistryClient).get("t", False)
    with pytest.raises(SerializationError, match=r"Order\.id = True \(bool\)"):
        confluent.to_bytes({**GOOD, "id": True})
