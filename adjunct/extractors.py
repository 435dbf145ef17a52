"""Key/value extractors: what an adjunct stream's message puts in its store (envelope, Debezium or user's)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from samsa.adjunct.exceptions import AdjunctConfigError, ExtractionError
from samsa.factories import requires_positional
from samsa.runtime.classpath import load_object
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.task import IncomingMessageEnvelope
from samsa.serde.base import Serde
from samsa.serde.builtin import BytesSerde, IntegerSerde, LongSerde, StringSerde

__all__ = [
    "DEBEZIUM",
    "DebeziumExtractor",
    "Entry",
    "EnvelopeExtractor",
    "KeyValueExtractor",
    "extractor_factory_key",
    "extractor_for",
    "extractor_options",
]

Entry = tuple[Any, Any | None]
"""(key, value) to put in the store; a None value deletes the key."""

DEBEZIUM = "debezium"
"""The `stores.<s>.adstore.key.value.extractor.factory` value that picks the built-in CDC extractor."""

_UPSERT_OPS = frozenset(("c", "r", "u"))  # create, snapshot read, update: all carry the row in `after`
_DELETE_OP = "d"
_CONNECT_ENVELOPE = frozenset(("schema", "payload"))  # Kafka Connect's JsonConverter, schemas.enable=true
_INTEGER = re.compile(r"[+-]?\d+")


class KeyValueExtractor(Protocol):
    """Turns one message of an adjunct stream into the entries to store (none, one or several)."""

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[Entry]: ...


def extractor_factory_key(store: str) -> str:
    """The config key that picks the extractor of `store`."""
    return f"stores.{store}.adstore.key.value.extractor.factory"


def extractor_options(config: Mapping[str, str], store: str) -> dict[str, str]:
    """The keys of `store`'s extractor's own: `stores.<store>.adstore.key.value.extractor.<option>` but
    `factory`, by option (the prefix stripped)."""
    prefix = extractor_factory_key(store).removesuffix("factory")
    return {
        key[len(prefix) :]: value
        for key, value in config.items()
        if key.startswith(prefix) and key != extractor_factory_key(store)
    }


def extractor_for(
    store: str, factory: str | None, key_serde: Serde[Any], options: Mapping[str, str] | None = None
) -> KeyValueExtractor:
    """The extractor `factory` names for `store`: None is the envelope's own key and value, `debezium` the
    built-in CDC extractor, anything else a `module:attr` / `module.attr` path.

    The path names an extractor instance, or a class or function that returns one (an object with
    `extract(envelope)`): called with `options` (`extractor_options`: the extractor's own keys, as a
    dict) when it takes one positional argument and cannot be called without it, else with none (so an
    `__init__(self, field="name")` keeps its default). `key_serde` is the store's key serde,
    which the Debezium extractor renders keys for.
    """
    if factory is None:
        return EnvelopeExtractor()
    path = factory.strip()
    if path.lower() == DEBEZIUM:
        return DebeziumExtractor(store, key_serde)
    return _load(extractor_factory_key(store), path, dict(options or {}))


class EnvelopeExtractor:
    """The default: the envelope's key and value as its stream's serdes decoded them; None deletes.

    A message without a key has nowhere to go in a key-value store, so it stores nothing.
    """

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[Entry]:
        if envelope.key is None:
            return ()
        return ((envelope.key, envelope.value),)


class DebeziumExtractor:
    """Debezium change events, as Kafka Connect's JSON converter writes them, to rows keyed by primary key.

    Key and value may arrive as bytes, str (JSON text) or decoded JSON, with or without the converter's
    `{"schema": ..., "payload": ...}` envelope. The store key is the key's payload; a single-field object
    (the usual `{"id": 7}`) becomes that field's value, rendered for the store's key serde: text for
    `string` (`"7"`; non-string values as their JSON text), utf-8 of that text for `bytes`, an int for
    `integer` and `long`, and the decoded JSON as is for `json` and any other serde. A composite key stays
    an object, or becomes its canonical JSON text (sorted keys, no spaces) for `string` and `bytes`.
    The value stored is `after` for ops c, r and u; op d and a tombstone delete the key.
    """

    def __init__(self, store: str, key_serde: Serde[Any]) -> None:
        self.store = store
        self._render_key = _key_renderer(key_serde)

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[Entry]:
        try:
            return (self._entry(envelope),)
        except _BadEvent as bad:
            raise ExtractionError(
                envelope, f"cannot store the message in adjunct store {self.store!r}: {bad}"
            ) from bad.__cause__

    def _entry(self, envelope: IncomingMessageEnvelope) -> Entry:
        key = self._key(envelope.key)
        if envelope.value is None:
            return key, None  # the tombstone Debezium sends after a delete
        event = _decode(envelope.value, "value")
        if (
            isinstance(event, dict)
            and "op" not in event
            and "payload" in event
            and event.keys() <= _CONNECT_ENVELOPE
        ):
            event = event["payload"]
        if event is None:
            return key, None
        if not isinstance(event, dict):
            raise _BadEvent(
                f"the value is a JSON {type(event).__name__}, not a Debezium change event (an object with op)"
            )
        op = event.get("op")
        if op in _UPSERT_OPS:
            after = event.get("after")
            if after is None:
                raise _BadEvent(f"the change event has op {op!r} but no 'after' row to store")
            return key, after
        if op == _DELETE_OP:
            return key, None
        if op is None:
            raise _BadEvent(
                "the value has no 'op' field, so it is not a Debezium change event; read the topic Debezium "
                "writes to, without the ExtractNewRecordState (unwrap) transform"
            )
        raise _BadEvent(f"unknown change event op {op!r}; expected c, r, u or d")

    def _key(self, raw: Any) -> Any:
        if raw is None:
            raise _BadEvent(
                "the message has no key; Debezium sends none for a table without a primary key: give the "
                "table one, or set Debezium's message.key.columns for it"
            )
        key = _decode(raw, "key")
        if isinstance(key, dict) and key.keys() == _CONNECT_ENVELOPE:
            key = key["payload"]
        if key is None:
            raise _BadEvent("the key's payload is null; a store key needs a value")
        return self._render_key(key)


class _BadEvent(Exception):
    """What is wrong with one message; `DebeziumExtractor.extract` adds where it is."""


def _decode(data: Any, part: str) -> Any:
    """`data` decoded from JSON bytes or text; anything else was decoded by the stream's serde already."""
    if isinstance(data, bytes | bytearray | memoryview):
        data = bytes(data)
    elif not isinstance(data, str):
        return data
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _BadEvent(f"the {part} is not a JSON document: {exc}") from exc


def _key_renderer(key_serde: Serde[Any]) -> Callable[[Any], Any]:
    """How a key payload becomes a key of the type the store's key serde writes."""
    if isinstance(key_serde, StringSerde):
        return _key_text
    if isinstance(key_serde, BytesSerde):
        return _key_bytes
    if isinstance(key_serde, IntegerSerde | LongSerde):
        name = key_serde.name

        def key_int(payload: Any) -> int:
            return _key_int(payload, name)

        return key_int
    return _single  # json, avro and user serdes take decoded JSON


def _single(payload: Any) -> Any:
    """The field's value of a single-field key object (a one-column primary key), else the payload."""
    if isinstance(payload, dict) and len(payload) == 1:
        return next(iter(payload.values()))
    return payload


def _key_text(payload: Any) -> str:
    key = _single(payload)
    if isinstance(key, str):
        return key
    return json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _key_bytes(payload: Any) -> bytes:
    return _key_text(payload).encode("utf-8")


def _key_int(payload: Any, serde: str) -> int:
    key = _single(payload)
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    if isinstance(key, str) and _INTEGER.fullmatch(key):
        return int(key)
    shown = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)[:200]
    raise _BadEvent(
        f"the key {shown} is not an integer, but the store's key serde is {serde!r}; "
        f"give the store a string or json key serde"
    )


def _load(key: str, path: str, options: dict[str, str]) -> KeyValueExtractor:
    """The extractor made by the factory at `path`, given `options` when it requires an argument; errors
    name `key` and say what it must be."""
    need = (
        "an extractor, or a class or function that takes no arguments (or requires one: a dict of its own "
        "keys) and returns one"
    )
    try:
        target = load_object(path, key)
    except ConfigError as exc:
        problem = str(exc).removeprefix(f"{key}=")
        raise AdjunctConfigError(
            key,
            f"{problem}; set it to {DEBEZIUM!r} or the path of {need}, or remove it to store the "
            "envelope's key and value",
        ) from exc
    if not isinstance(target, type) and callable(getattr(target, "extract", None)):
        extractor: KeyValueExtractor = target
        return extractor
    if not callable(target):
        raise AdjunctConfigError(key, f"{path!r} is a {type(target).__name__}; it must be {need}")
    given = requires_positional(target, 1)
    if options and not given:
        # Keys set for a factory that would not get them would silently do nothing.
        prefix = key.removesuffix("factory")
        raise AdjunctConfigError(
            key,
            f"{path!r} can be called without arguments, so it is not given its options, yet "
            f"{', '.join(prefix + option for option in sorted(options))} set them: make its first parameter "
            "required (it gets them as a dict: def __init__(self, options)), or remove them",
        )
    try:
        extractor = target(options) if given else target()
    except Exception as exc:
        called = f"with its options {options!r}" if given else "with no arguments"
        raise AdjunctConfigError(
            key, f"{path!r}: calling it {called} failed: {exc!r}; it must be {need}"
        ) from exc
    if not callable(getattr(extractor, "extract", None)):
        raise AdjunctConfigError(
            key, f"{path!r} returned a {type(extractor).__name__}, which has no extract(envelope) method"
        )
    return extractor
