"""The built-in serdes that need no schema: bytes, string, json, integer and long."""

import codecs
import json
import math
import struct
from collections.abc import Callable
from functools import partial
from typing import Any, overload

from samsa.serde.exceptions import DeserializationError, SerializationError

# Built once: json.dumps with non-default options would build a new encoder on every call.
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# What the JSON serde refuses to read, as it refuses to write it (and as Jackson, Samza's JSON library, does).
_NON_FINITE = (
    "the json serde refuses NaN, Infinity, -Infinity and numbers beyond a float's range (such as 1e400), "
    "as it cannot write them back"
)


def _refused_constant(name: str) -> Any:
    """The decoder's hook for NaN, Infinity and -Infinity (Python's extension to JSON): refuse them."""
    raise DeserializationError("json", f"{name} is not JSON: {_NON_FINITE}")


def _finite_float(text: str, _isfinite: Callable[[float], bool] = math.isfinite) -> float:
    """The decoder's hook for a number with a fraction or exponent: a float, refused when it overflows."""
    value = float(text)
    if _isfinite(value):
        return value
    raise DeserializationError(
        "json", f"the number {text:.50} overflows a float (reads as {value}): {_NON_FINITE}"
    )


# The C scanner calls the hooks only for floats and the three constants: documents without them cost the same.
_JSON_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_refused_constant)
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
# Types whose values the JSON serde always encodes, as far as their outer type tells.
_JSON_CHECKED_OUTSIDE = frozenset({dict, list, str, int, bool})
# Bases whose subclasses the JSON encoder writes as the base (a tuple as a list).
_JSON_WRITTEN_AS_BASE = (dict, list, tuple, str, int)


class BytesSerde:
    """Identity: bytes stay bytes; bytearray and memoryview are copied to bytes."""

    name = "bytes"

    @overload
    def to_bytes(self, obj: None) -> None: ...
    @overload
    def to_bytes(self, obj: bytes | bytearray | memoryview) -> bytes: ...
    def to_bytes(self, obj: bytes | bytearray | memoryview | None) -> bytes | None:
        """Return `obj` as bytes."""
        if type(obj) is bytes or obj is None:
            return obj
        if isinstance(obj, bytes | bytearray | memoryview):
            return bytes(obj)
        raise SerializationError(
            self.name, f"expected bytes, bytearray or memoryview, got {type(obj).__name__}"
        )

    def check(self, obj: object) -> None:
        """Raise as `to_bytes` would for `obj` (see `samsa.serde.base.value_check`)."""
        if obj.__class__ is not bytes:
            self.to_bytes(obj)  # type: ignore[call-overload]

    @overload
    def from_bytes(self, data: None) -> None: ...
    @overload
    def from_bytes(self, data: bytes) -> bytes: ...
    def from_bytes(self, data: bytes | None) -> bytes | None:
        """Return `data` unchanged."""
        return data


class StringSerde:
    """Text in one encoding (utf-8 unless configured), like Samza's StringSerde."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding
        self.name = "string"
        # C-level paths for the per-message callers (see serde.base.fast_to_bytes).
        self.fast_to_bytes = partial(str.encode, encoding=encoding)
        self.fast_from_bytes = partial(bytes.decode, encoding=encoding)
        # The check is the encoding itself (stores call it per put): bare str.encode is utf-8 without the
        # cost of a partial's keyword.
        utf8 = codecs.lookup(encoding).name == "utf-8"
        self.check: Callable[[str], bytes] = str.encode if utf8 else self.fast_to_bytes

    @overload
    def to_bytes(self, obj: None) -> None: ...
    @overload
    def to_bytes(self, obj: str) -> bytes: ...
    def to_bytes(self, obj: str | None) -> bytes | None:
        """Encode `obj`."""
        if obj is None:
            return None
        try:
            return obj.encode(self.encoding)
        except AttributeError as exc:
            raise SerializationError(self.name, f"expected str, got {type(obj).__name__}") from exc
        except UnicodeEncodeError as exc:
            raise SerializationError(self.name, f"text is not encodable as {self.encoding}: {exc}") from exc

    @overload
    def from_bytes(self, data: None) -> None: ...
    @overload
    def from_bytes(self, data: bytes) -> str: ...
    def from_bytes(self, data: bytes | None) -> str | None:
        """Decode `data`."""
        if data is None:
            return None
        try:
            return data.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise DeserializationError(self.name, f"bytes are not valid {self.encoding}: {exc}") from exc


class JsonSerde:
    """Compact utf-8 JSON (no spaces, non-ASCII kept as utf-8), refusing NaN and infinities both ways."""

    name = "json"

    def check(self, obj: object) -> None:
        """Raise as `to_bytes` would for `obj`, looking only at its outer type: what a dict or list
        holds is checked when it is written (see `samsa.serde.base.value_check`)."""
        if obj.__class__ in _JSON_CHECKED_OUTSIDE:
            return
        # Subclasses (Counter, defaultdict, enums) are written as their base; encoding a big one on every
        # put would cost tens of microseconds.
        if isinstance(obj, _JSON_WRITTEN_AS_BASE):
            return
        if isinstance(obj, float) and math.isfinite(obj):
            return
        self.to_bytes(obj)  # NaN, infinities and anything else: encoding them is the check

    @overload
    def to_bytes(self, obj: None) -> None: ...
    @overload
    def to_bytes(self, obj: Any) -> bytes: ...
    def to_bytes(self, obj: Any) -> bytes | None:
        """Encode `obj` as JSON; `None` is a tombstone, not the JSON `null`."""
        if obj is None:
            return None
        try:
            return _JSON_ENCODER.encode(obj).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise SerializationError(self.name, f"expected a JSON-compatible value: {exc}") from exc

    @overload
    def from_bytes(self, data: None) -> None: ...
    @overload
    def from_bytes(self, data: bytes) -> Any: ...
    def from_bytes(self, data: bytes | None) -> Any:
        """Decode a JSON document; NaN, infinities and numbers that overflow a float raise
        `DeserializationError`, as they do not round-trip (`to_bytes` refuses them)."""
        if data is None:
            return None
        try:
            return _JSON_DECODER.decode(data.decode("utf-8"))
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
            raise DeserializationError(self.name, f"expected a utf-8 JSON document: {exc}") from exc


class _FixedIntSerde:
    """A signed big-endian integer of a fixed width."""

    def __init__(self, name: str, codec: struct.Struct) -> None:
        self.name = name
        self._codec = codec
        # Packing is exact and range-checked in C; unpacking keeps the Python path for its width check.
        self.fast_to_bytes = codec.pack
        self.check = codec.pack  # as cheap as any check, and exact
        self._bits = codec.size * 8

    @overload
    def to_bytes(self, obj: None) -> None: ...
    @overload
    def to_bytes(self, obj: int) -> bytes: ...
    def to_bytes(self, obj: int | None) -> bytes | None:
        """Pack `obj`."""
        if obj is None:
            return None
        try:
            return self._codec.pack(obj)
        except struct.error as exc:
            raise SerializationError(
                self.name, f"expected an int in the signed {self._bits}-bit range, got {obj!r}"
            ) from exc

    @overload
    def from_bytes(self, data: None) -> None: ...
    @overload
    def from_bytes(self, data: bytes) -> int: ...
    def from_bytes(self, data: bytes | None) -> int | None:
        """Unpack exactly `codec.size` bytes."""
        if data is None:
            return None
        try:
            value: int = self._codec.unpack(data)[0]
        except struct.error as exc:
            raise DeserializationError(
                self.name, f"expected {self._codec.size} bytes, got {len(data)}"
            ) from exc
        return value


class IntegerSerde(_FixedIntSerde):
    """4-byte big-endian signed int, byte-compatible with Samza's IntegerSerde."""

    def __init__(self) -> None:
        super().__init__("integer", _INT32)


class LongSerde(_FixedIntSerde):
    """8-byte big-endian signed long, byte-compatible with Samza's LongSerde."""

    def __init__(self) -> None:
        super().__init__("long", _INT64)
