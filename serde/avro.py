"""Avro serdes on fastavro: schemaless binary with a fixed schema, and the Confluent wire format."""

import io
import json
import struct
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, overload

import fastavro
from fastavro.write import LOGICAL_WRITERS

from samsa.serde.avro_check import Check, Problem, compile_check
from samsa.serde.base import Serde
from samsa.serde.exceptions import (
    DeserializationError,
    ReaderSchemaError,
    SchemaRegistryError,
    SerdeConfigError,
    SerializationError,
)
from samsa.serde.keys import AVRO_OPTIONS, serde_key
from samsa.serde.schema_registry import SchemaRegistryClient

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")  # Confluent wire format: magic byte, then the schema id (big-endian)
_MAX_REASON = 300  # a reason names the problem; a whole schema dump would drown it

ClientFor = Callable[[str, str | None], SchemaRegistryClient]


def parse_schema(text: str, source: str) -> Any:
    """Parse Avro schema JSON `text`; `source` (a config key or file) is named in the error."""
    try:
        parsed = fastavro.parse_schema(json.loads(text))
    except Exception as exc:  # json and fastavro raise many types; all mean "bad schema"
        raise SerdeConfigError(f"{source}: not a valid Avro schema: {exc}") from exc
    for named in [parsed, *(parsed.get("__named_schemas", {}).values() if isinstance(parsed, dict) else ())]:
        _bytes_defaults(named)
    return parsed


def _bytes_defaults(schema: Any) -> None:
    """Turn the JSON-string defaults of bytes and fixed fields into bytes, as the Avro spec reads them
    (code points 0-255 are the bytes); fastavro keeps the string, so writing a record that leaves such a
    field out fails, and reading data that lacks it yields a str."""
    if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return
    for field in schema["fields"]:
        kind = field["type"]
        first = kind[0] if isinstance(kind, list) and kind else kind
        if isinstance(first, dict):
            _bytes_defaults(first)
            first = first["type"] if first["type"] in ("bytes", "fixed") else first
        if first in ("bytes", "fixed") and isinstance(field.get("default"), str):
            field["default"] = field["default"].encode("latin-1")


def _write_error(serde: str, exc: Exception) -> SerializationError:
    # The check passed, so this is a limit of fastavro's own: say it as fastavro does.
    return SerializationError(serde, f"record does not match the writer schema: {_describe(exc)}")


def _refusal(serde: str, problem: Problem, root: str) -> SerializationError:
    return SerializationError(serde, f"record does not match the writer schema: {problem.render(root)}")


def _describe(exc: Exception) -> str:
    if isinstance(exc, EOFError):
        return "the data ends before the record does"
    return f"{type(exc).__name__}: {exc}"[:_MAX_REASON]


class AvroSerde:
    """Schemaless Avro binary with a fixed writer schema and an optional reader schema."""

    def __init__(self, name: str, writer_schema: Any, reader_schema: Any = None) -> None:
        self.name = name
        self._writer = writer_schema
        self._reader = reader_schema
        self._check, self._root = compile_check(writer_schema, LOGICAL_WRITERS)

    @overload
    def to_bytes(self, obj: None) -> None: ...
    @overload
    def to_bytes(self, obj: Any) -> bytes: ...
    def to_bytes(self, obj: Any) -> bytes | None:
        """Encode `obj` with the writer schema."""
        if obj is None:
            return None
        problem = self._check(obj)  # fastavro alone would coerce or drop what does not fit
        if problem is not None:
            raise _refusal(self.name, problem, self._root)
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self._writer, obj)
        except Exception as exc:
            raise _write_error(self.name, exc) from exc
        return out.getvalue()

    @overload
    def from_bytes(self, data: None) -> None: ...
    @overload
    def from_bytes(self, data: bytes) -> Any: ...
    def from_bytes(self, data: bytes | None) -> Any:
        """Decode one record written with the writer schema."""
        if data is None:
            return None
        source = io.BytesIO(data)
        try:
            record = fastavro.schemaless_reader(source, self._writer, self._reader)
        except fastavro.read.SchemaResolutionError as exc:
            raise _reader_schema_error(self.name, "the writer schema", exc) from exc
        except Exception as exc:
            raise DeserializationError(
                self.name, f"not an Avro record of the writer schema: {_describe(exc)}; {self._hint()}"
            ) from exc
        if source.tell() != len(data):
            raise DeserializationError(
                self.name, f"{len(data) - source.tell()} bytes left after the Avro record; {self._hint()}"
            )
        return record

    def _hint(self) -> str:
        """What else undecodable bytes may be: another schema's data, or the Confluent wire format."""
        return (
            "the data may have been written with another schema (schemaless Avro names none: a serde reads "
            f"only what its {serde_key(self.name, 'schema')} wrote; to read older data, keep the schema it "
            f"was written with there and set the new one as {serde_key(self.name, 'reader.schema')}), or be "
            f"in the Confluent wire format (set {serde_key(self.name, 'schema.registry.url')})"
        )


class ConfluentAvroSerde:
    """Avro in the Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro binary.

    Serializing registers (or looks up) the writer schema under `subject` once; deserializing fetches
    each writer schema by id once. A registry outage raises SchemaRegistryError, not a serde error.
    """

    def __init__(
        self,
        name: str,
        client: SchemaRegistryClient,
        subject: str | None,
        writer: tuple[str, Any] | None,
        reader_schema: Any = None,
        auto_register: bool = True,
    ) -> None:
        self.name = name
        self._client = client
        self._subject = subject
        self._writer = writer  # (schema JSON as registered, parsed schema)
        self._check: Check | None = None
        self._root = ""
        if writer is not None:
            self._check, self._root = compile_check(writer[1], LOGICAL_WRITERS)
        self._reader = reader_schema
        self._auto_register = auto_register
        self._header: bytes | None = None
        self._writers_by_id: dict[int, Any] = {}

    @overload
    def to_bytes(self, obj: None) -> None: ...
    @overload
    def to_bytes(self, obj: Any) -> bytes: ...
    def to_bytes(self, obj: Any) -> bytes | None:
        """Encode `obj` behind the wire-format header."""
        if obj is None:
            return None
        if self._check is not None:  # before registering: a refused record registers nothing
            problem = self._check(obj)
            if problem is not None:
                raise _refusal(self.name, problem, self._root)
        out = io.BytesIO()
        out.write(self._header or self._register())
        assert self._writer is not None  # _register checked it
        try:
            fastavro.schemaless_writer(out, self._writer[1], obj)
        except Exception as exc:
            raise _write_error(self.name, exc) from exc
        return out.getvalue()

    @overload
    def from_bytes(self, data: None) -> None: ...
    @overload
    def from_bytes(self, data: bytes) -> Any: ...
    def from_bytes(self, data: bytes | None) -> Any:
        """Decode a wire-format message with the writer schema its id names."""
        if data is None:
            return None
        if len(data) < _HEADER.size or data[0] != MAGIC_BYTE:
            raise DeserializationError(
                self.name,
                f"expected the Confluent wire format (magic byte 0 and a 4-byte schema id), got "
                f"{len(data)} bytes starting {data[: _HEADER.size].hex() or 'with nothing'}",
            )
        schema_id = int.from_bytes(data[1 : _HEADER.size], "big")
        writer = self._writers_by_id.get(schema_id)
        if writer is None:
            writer = self._fetch_writer(schema_id)
        source = io.BytesIO(data)
        source.seek(_HEADER.size)
        try:
            return fastavro.schemaless_reader(source, writer, self._reader)
        except fastavro.read.SchemaResolutionError as exc:
            # Per message: one producer's schema the reader cannot resolve is a bad message (the
            # deserialization policy applies), not the job's config.
            raise DeserializationError(
                self.name,
                f"the reader schema ({serde_key(self.name, 'reader.schema')}) cannot read schema id "
                f"{schema_id}: {_describe(exc)}; make the producer's schema compatible with it",
            ) from exc
        except Exception as exc:
            raise DeserializationError(
                self.name, f"not an Avro record of schema id {schema_id}: {_describe(exc)}"
            ) from exc

    def _register(self) -> bytes:
        if self._writer is None:
            raise SerializationError(
                self.name, f"no writer schema: set {serde_key(self.name, 'schema')} or '.schema.file'"
            )
        if self._subject is None:
            raise SerializationError(
                self.name, "no schema registry subject: this serde was obtained without a topic"
            )
        if self._auto_register:
            schema_id = self._client.register(self._subject, self._writer[0])
        else:
            schema_id = self._lookup(self._subject, self._writer[0])
        self._header = _HEADER.pack(MAGIC_BYTE, schema_id)
        return self._header

    def _lookup(self, subject: str, schema: str) -> int:
        try:
            return self._client.lookup(subject, schema)
        except SchemaRegistryError as exc:
            if not exc.not_found:
                raise
            raise SerializationError(
                self.name,
                f"the writer schema is not registered under subject {subject!r} and "
                f"{serde_key(self.name, 'auto.register.schemas')} is false: register it first",
            ) from exc

    def _fetch_writer(self, schema_id: int) -> Any:
        try:
            registered = self._client.get_schema(schema_id)
        except SchemaRegistryError as exc:
            if not exc.not_found:
                raise
            raise DeserializationError(
                self.name,
                f"unknown schema id {schema_id}: the registry at {self._client.url} has no such schema",
            ) from exc
        if registered.schema_type.upper() != "AVRO":
            raise DeserializationError(
                self.name, f"schema id {schema_id} is a {registered.schema_type} schema, expected AVRO"
            )
        try:
            writer = parse_schema(registered.schema, f"schema id {schema_id}")
        except SerdeConfigError as exc:
            raise DeserializationError(self.name, str(exc)) from exc
        self._writers_by_id[schema_id] = writer
        return writer


def _reader_schema_error(name: str, writer: str, exc: Exception) -> ReaderSchemaError:
    return ReaderSchemaError(
        f"{serde_key(name, 'reader.schema')} cannot read data of {writer}: {_describe(exc)}; make the "
        "reader schema compatible (a default for each field the writer lacks, types the writer's promote "
        "to, every enum symbol the writer has or an enum default)"
    )


class AvroSerdeFactory:
    """Makes the avro serdes of one configured name; its options are checked when it is built.

    Without `schema.registry.url` one schemaless serde serves every topic; with it, there is one serde
    per subject (`<topic>-key` / `<topic>-value`, Confluent's TopicNameStrategy).
    """

    def __init__(self, name: str, options: Mapping[str, str], client_for: ClientFor) -> None:
        self.name = name
        for option in options:
            if option not in AVRO_OPTIONS:
                raise SerdeConfigError(
                    f"{serde_key(name, option)}: unknown avro serde option; known: {', '.join(AVRO_OPTIONS)}"
                )
        self._writer = self._schema(options, "schema")
        self._reader = self._schema(options, "reader.schema")
        url = options.get("schema.registry.url")
        self._client = client_for(url, options.get("basic.auth.user.info")) if url else None
        self._auto_register = _parse_bool(name, options.get("auto.register.schemas", "true"))
        if self._writer is None and self._client is None:
            raise SerdeConfigError(
                f"avro serde {name!r} needs a schema: set {serde_key(name, 'schema')} (or .schema.file), "
                f"or {serde_key(name, 'schema.registry.url')} to read the Confluent wire format"
            )
        self._lock = threading.Lock()
        self._serdes: dict[str | None, Serde[Any]] = {}

    def get(self, topic: str | None, is_key: bool) -> Serde[Any]:
        """The serde for values (or keys) of `topic`; None (a store's serde) only without a registry."""
        if self._client is not None and topic is None:
            raise SerdeConfigError(
                f"avro serde {self.name!r} uses the schema registry "
                f"({serde_key(self.name, 'schema.registry.url')}), whose subjects are named after a topic "
                "(<topic>-key, <topic>-value), and a store has none: give the store a schemaless avro serde, "
                "serializers.registry.<name>.class=avro with .schema (or .schema.file) and no "
                ".schema.registry.url"
            )
        subject = None if self._client is None or topic is None else f"{topic}-{'key' if is_key else 'value'}"
        with self._lock:
            serde = self._serdes.get(subject)
            if serde is None:
                serde = self._serdes[subject] = self._make(subject)
        return serde

    def _make(self, subject: str | None) -> Serde[Any]:
        reader = None if self._reader is None else self._reader[1]
        if self._client is None:
            assert self._writer is not None  # checked in __init__
            return AvroSerde(self.name, self._writer[1], reader)
        return ConfluentAvroSerde(self.name, self._client, subject, self._writer, reader, self._auto_register)

    def _schema(self, options: Mapping[str, str], option: str) -> tuple[str, Any] | None:
        """(compact schema JSON, parsed schema) from `<option>` or `<option>.file`, or None if neither."""
        inline, path = options.get(option), options.get(f"{option}.file")
        if inline is not None and path is not None:
            raise SerdeConfigError(f"set only one of {serde_key(self.name, option)} and its .file variant")
        if path is not None:
            source = f"{serde_key(self.name, option + '.file')} ({path})"
            try:
                inline = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise SerdeConfigError(f"{source}: cannot read the schema file: {exc}") from exc
        else:
            source = serde_key(self.name, option)
        if inline is None:
            return None
        parsed = parse_schema(inline, source)
        return json.dumps(json.loads(inline), separators=(",", ":")), parsed


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise SerdeConfigError(
            f"{serde_key(name, 'auto.register.schemas')}={value!r}: expected true or false"
        )
    return lowered == "true"
