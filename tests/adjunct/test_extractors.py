"""Key/value extractors of adjunct stores: the envelope default, Debezium change events, user factories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from samsa.adjunct.exceptions import AdjunctConfigError, AdjunctError, ExtractionError
from samsa.adjunct.extractors import (
    DebeziumExtractor,
    EnvelopeExtractor,
    extractor_factory_key,
    extractor_for,
    extractor_options,
)
from samsa.exceptions import SamsaError
from samsa.runtime.task import IncomingMessageEnvelope
from samsa.serde.base import Serde
from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde

WHERE = "topic customers partition 3 offset 42"
ROW = {"id": 7, "name": "Ada", "city": "London"}
OLD_ROW = {"id": 7, "name": "Ada", "city": "Paris"}
KEY_SCHEMA = {"type": "struct", "fields": [{"field": "id", "type": "int32", "optional": False}]}
VALUE_SCHEMA = {"type": "struct", "name": "dbserver1.inventory.customers.Envelope", "fields": []}


def envelope(key: Any, value: Any) -> IncomingMessageEnvelope:
    return IncomingMessageEnvelope("kafka", "customers", 3, 42, key, value)


def change(op: str, before: Any = None, after: Any = None) -> dict[str, Any]:
    return {
        "before": before,
        "after": after,
        "source": {"connector": "postgresql", "table": "customers"},
        "op": op,
        "ts_ms": 1700000000000,
    }


def as_record(payload: Any, schema: dict[str, Any] | None, form: str) -> Any:
    """`payload` as Kafka Connect's JsonConverter writes it (with `schema` unless None), in `form`."""
    doc = payload if schema is None else {"schema": schema, "payload": payload}
    if form == "bytes":
        return json.dumps(doc).encode("utf-8")
    if form == "str":
        return json.dumps(doc)
    return doc


def extract(extractor: Any, key: Any, value: Any) -> list[tuple[Any, Any]]:
    return list(extractor.extract(envelope(key, value)))


SCHEMAS = pytest.mark.parametrize("with_schema", [True, False], ids=["schema", "bare"])
FORMS = pytest.mark.parametrize("form", ["bytes", "str", "dict"])


# -- Debezium: values ------------------------------------------------------------------------------


@SCHEMAS
@FORMS
@pytest.mark.parametrize(
    ("op", "before"), [("c", None), ("r", None), ("u", OLD_ROW)], ids=["create", "read", "update"]
)
def test_debezium_stores_after_for_upserts(with_schema: bool, form: str, op: str, before: Any) -> None:
    extractor = extractor_for("customers", "debezium", StringSerde())
    key = as_record({"id": 7}, KEY_SCHEMA if with_schema else None, form)
    value = as_record(change(op, before, ROW), VALUE_SCHEMA if with_schema else None, form)

    assert extract(extractor, key, value) == [("7", ROW)]


@SCHEMAS
@FORMS
def test_debezium_delete_op_deletes_the_key(with_schema: bool, form: str) -> None:
    extractor = extractor_for("customers", "debezium", StringSerde())
    key = as_record({"id": 7}, KEY_SCHEMA if with_schema else None, form)
    value = as_record(change("d", before=OLD_ROW), VALUE_SCHEMA if with_schema else None, form)

    assert extract(extractor, key, value) == [("7", None)]


@SCHEMAS
@FORMS
def test_debezium_tombstone_deletes_the_key(with_schema: bool, form: str) -> None:
    extractor = extractor_for("customers", "debezium", LongSerde())
    key = as_record({"id": 7}, KEY_SCHEMA if with_schema else None, form)

    assert extract(extractor, key, None) == [(7, None)]


@pytest.mark.parametrize(
    "value",
    [
        {"payload": change("c", after=ROW)},  # the converter's nesting without the schema
        {"schema": None, "payload": change("c", after=ROW)},
        change("c", after=ROW) | {"payload": "a column of the change event itself"},
    ],
    ids=["payload-only", "null-schema", "op-beside-payload"],
)
def test_debezium_reads_the_payload_nesting(value: dict[str, Any]) -> None:
    extractor = DebeziumExtractor("customers", StringSerde())
    assert extract(extractor, {"id": 7}, value) == [("7", ROW)]


def test_debezium_null_payload_in_a_schema_envelope_deletes() -> None:
    extractor = DebeziumExtractor("customers", StringSerde())
    assert extract(extractor, b'{"id":7}', b'{"schema":null,"payload":null}') == [("7", None)]


# -- Debezium: keys --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key_payload", "serde", "expected"),
    [
        ({"id": 7}, StringSerde(), "7"),
        ({"id": 7}, LongSerde(), 7),
        ({"id": 7}, IntegerSerde(), 7),
        ({"id": 7}, JsonSerde(), 7),
        ({"id": 7}, BytesSerde(), b"7"),
        ({"id": -12}, LongSerde(), -12),
        ({"id": "42"}, LongSerde(), 42),
        ({"id": "7"}, StringSerde(), "7"),
        ({"email": "ada@example.org"}, StringSerde(), "ada@example.org"),
        ({"email": "ada@example.org"}, BytesSerde(), b"ada@example.org"),
        ({"email": "ada@example.org"}, JsonSerde(), "ada@example.org"),
        ({"code": "Zürich"}, BytesSerde(), "Zürich".encode()),
        ({"rate": 1.5}, StringSerde(), "1.5"),
        ({"active": True}, StringSerde(), "true"),
        (7, StringSerde(), "7"),  # a scalar key payload needs no unwrapping
        ({"tenant": "eu", "id": 7}, JsonSerde(), {"tenant": "eu", "id": 7}),
        ({"tenant": "eu", "id": 7}, StringSerde(), '{"id":7,"tenant":"eu"}'),
        ({"tenant": "eu", "id": 7}, BytesSerde(), b'{"id":7,"tenant":"eu"}'),
        ({"tenant": "é", "id": 7}, StringSerde(), '{"id":7,"tenant":"é"}'),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Serde) else None,
)
@SCHEMAS
@FORMS
def test_debezium_key_is_rendered_for_the_store_key_serde(
    key_payload: Any, serde: Serde[Any], expected: Any, with_schema: bool, form: str
) -> None:
    extractor = extractor_for("customers", "debezium", serde)
    key = as_record(key_payload, KEY_SCHEMA if with_schema else None, form)

    [(store_key, value)] = extract(extractor, key, change("c", after=ROW))

    assert store_key == expected
    assert type(store_key) is type(expected)
    assert value == ROW
    assert serde.to_bytes(store_key)  # the store's own key serde accepts the rendered key


# -- Debezium: bad messages ------------------------------------------------------------------------


BAD_MESSAGES = [
    ({"id": 7}, change("x", after=ROW), StringSerde(), "unknown change event op 'x'"),
    ({"id": 7}, change("t"), StringSerde(), "unknown change event op 't'"),
    ({"id": 7}, change("c"), StringSerde(), "op 'c' but no 'after'"),
    ({"id": 7}, change("u", before=OLD_ROW), StringSerde(), "op 'u' but no 'after'"),
    ({"id": 7}, {"id": 7, "name": "Ada"}, StringSerde(), "no 'op' field"),
    ({"id": 7}, b'{"op": "c", "after": ', StringSerde(), "the value is not a JSON document"),
    ({"id": 7}, "not json at all", StringSerde(), "the value is not a JSON document"),
    ({"id": 7}, b"\xff\xfe\x00garbage", StringSerde(), "the value is not a JSON document"),
    ({"id": 7}, b"[1, 2]", StringSerde(), "the value is a JSON list"),
    (b"{id: 7}", change("c", after=ROW), StringSerde(), "the key is not a JSON document"),
    (None, change("c", after=ROW), StringSerde(), "the message has no key"),
    (None, None, StringSerde(), "the message has no key"),
    ({"schema": KEY_SCHEMA, "payload": None}, None, StringSerde(), "the key's payload is null"),
    ({"tenant": "eu", "id": 7}, change("c", after=ROW), LongSerde(), "not an integer"),
    ({"id": "abc"}, change("c", after=ROW), IntegerSerde(), "not an integer"),
    ({"id": 1.5}, change("c", after=ROW), LongSerde(), "not an integer"),
    ({"flag": True}, change("c", after=ROW), LongSerde(), "not an integer"),
]


@pytest.mark.parametrize(
    ("key", "value", "serde", "what"), BAD_MESSAGES, ids=[case[-1] for case in BAD_MESSAGES]
)
def test_debezium_bad_message_names_where_and_what(
    key: Any, value: Any, serde: Serde[Any], what: str
) -> None:
    extractor = extractor_for("customers", "debezium", serde)

    with pytest.raises(ExtractionError) as caught:
        extract(extractor, key, value)

    message = str(caught.value)
    assert WHERE in message
    assert "adjunct store 'customers'" in message
    assert what in message
    error = caught.value
    assert (error.system, error.stream, error.partition, error.offset) == ("kafka", "customers", 3, 42)
    assert isinstance(error, AdjunctError)
    assert isinstance(error, SamsaError)


def test_debezium_bad_json_keeps_the_parser_error_as_cause() -> None:
    extractor = DebeziumExtractor("customers", StringSerde())
    with pytest.raises(ExtractionError) as caught:
        extract(extractor, b'{"id": 7}', b"{")
    assert isinstance(caught.value.__cause__, json.JSONDecodeError)


def test_debezium_events_apply_in_order_to_a_table() -> None:
    # A CDC stream replayed into a dict is the table: what the adjunct store manager will do with a store.
    extractor = extractor_for("customers", "debezium", StringSerde())
    events = [
        ({"id": 1}, change("r", after={"id": 1, "name": "Ada"})),
        ({"id": 2}, change("c", after={"id": 2, "name": "Bob"})),
        ({"id": 1}, change("u", before={"id": 1, "name": "Ada"}, after={"id": 1, "name": "Ada L."})),
        ({"id": 2}, change("d", before={"id": 2, "name": "Bob"})),
        ({"id": 2}, None),
        ({"id": 3}, change("c", after={"id": 3, "name": "Cy"})),
    ]
    table: dict[Any, Any] = {}
    for key, value in events:
        for store_key, row in extractor.extract(envelope(key, value)):
            if row is None:
                table.pop(store_key, None)
            else:
                table[store_key] = row

    assert table == {"1": {"id": 1, "name": "Ada L."}, "3": {"id": 3, "name": "Cy"}}


# -- the default extractor ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("user-1", {"name": "Ada"}, [("user-1", {"name": "Ada"})]),
        (b"k", b"v", [(b"k", b"v")]),
        (7, "seven", [(7, "seven")]),
        ("user-1", None, [("user-1", None)]),  # a tombstone deletes
        (None, {"name": "Ada"}, []),  # nowhere to put it
        (None, None, []),
    ],
)
def test_default_extractor_stores_the_envelope_key_and_value(key: Any, value: Any, expected: Any) -> None:
    extractor = extractor_for("customers", None, StringSerde())
    assert isinstance(extractor, EnvelopeExtractor)
    assert extract(extractor, key, value) == expected


@pytest.mark.parametrize("factory", ["debezium", " Debezium ", "DEBEZIUM"])
def test_debezium_is_named_by_the_factory_key(factory: str) -> None:
    assert isinstance(extractor_for("customers", factory, StringSerde()), DebeziumExtractor)


# -- user extractors ------------------------------------------------------------------------------


@pytest.fixture
def support_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))


@pytest.mark.usefixtures("support_on_path")
@pytest.mark.parametrize(
    "path",
    [
        "adjunct_test_extractors:UpperNameExtractor",  # a class
        "adjunct_test_extractors.UpperNameExtractor",
        "adjunct_test_extractors:make_upper_name_extractor",  # a function
        "adjunct_test_extractors:ready_extractor",  # an instance
    ],
)
def test_user_extractor_is_loaded_from_its_path(path: str) -> None:
    extractor = extractor_for("customers", path, StringSerde())
    entries = extract(extractor, "ignored", {"id": 7, "name": "Ada"})
    assert entries == [(7, "ADA")]


@pytest.mark.usefixtures("support_on_path")
@pytest.mark.parametrize(
    "path", ["adjunct_test_extractors:FieldExtractor", "adjunct_test_extractors:make_field_extractor"]
)
def test_a_user_extractor_taking_an_argument_is_given_its_own_keys(path: str) -> None:
    config = {
        "stores.customers.adstore.key.value.extractor.factory": path,
        "stores.customers.adstore.key.value.extractor.field": "city",
        "stores.customers.adstore.input": "kafka.customers",  # the store's, not the extractor's
    }
    options = extractor_options(config, "customers")
    assert options == {"field": "city"}
    extractor = extractor_for("customers", path, StringSerde(), options)
    assert extract(extractor, "ignored", {"id": 7, "city": "Oslo"}) == [(7, "Oslo")]


@pytest.mark.usefixtures("support_on_path")
def test_an_extractor_with_an_optional_argument_keeps_its_default() -> None:
    # Written before extractors were given their options: handing it the (empty) options dict would put
    # a dict where its `field` default is.
    extractor = extractor_for("customers", "adjunct_test_extractors:DefaultFieldExtractor", StringSerde(), {})
    assert extractor.field == "name"  # type: ignore[attr-defined]
    assert extract(extractor, "ignored", {"id": 7, "name": "Ada"}) == [(7, "Ada")]


@pytest.mark.usefixtures("support_on_path")
def test_options_set_for_an_extractor_that_would_not_get_them_are_refused() -> None:
    with pytest.raises(AdjunctConfigError) as caught:
        extractor_for(
            "customers", "adjunct_test_extractors:DefaultFieldExtractor", StringSerde(), {"field": "city"}
        )
    message = str(caught.value)
    assert "stores.customers.adstore.key.value.extractor.field set them" in message
    assert "make its first parameter required" in message


@pytest.mark.usefixtures("support_on_path")
@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("no_such_module_for_adjunct:Thing", "cannot import module 'no_such_module_for_adjunct'"),
        ("adjunct_test_extractors:Missing", "has no attribute 'Missing'"),
        ("nodots", "must be a 'module:Class' or 'module.Class' path"),
        ("", "must be a 'module:Class' or 'module.Class' path"),
        ("adjunct_test_extractors:not_an_extractor", "is a int; it must be an extractor"),
        ("adjunct_test_extractors:NoExtractMethod", "has no extract(envelope) method"),
        ("adjunct_test_extractors:NeedsArguments", "calling it with no arguments failed"),
    ],
)
def test_bad_extractor_factory_names_the_key_and_the_fix(path: str, what: str) -> None:
    with pytest.raises(AdjunctConfigError) as caught:
        extractor_for("customers", path, StringSerde())

    message = str(caught.value)
    key = "stores.customers.adstore.key.value.extractor.factory"
    assert message.startswith(f"{key}: ")
    assert message.count(key) == 1
    assert what in message
    assert caught.value.key == key == extractor_factory_key("customers")
    assert isinstance(caught.value, AdjunctError)
