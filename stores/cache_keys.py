"""How the object cache tells keys apart: one cache entry per serialized key, whatever the key's type.

Python equality is not the store's: `Color.RED` (a `StrEnum`) equals `"red"` and serializes to the same
bytes, yet hashes apart from it; `1`, `1.0` and `True` are equal and hash alike, yet the JSON serde writes
them apart. The cache therefore keys an entry by the key's *identity*, a hashable value that two keys share
exactly when the key serde writes them to the same bytes:

- the key itself, for keys of the serde's plain types (str for `string`, str and int for `json`, int for
  `integer` and `long`, bytes for `bytes`): the hot path, one or two type tests;
- for other keys the serde writes by value, that value as the plain type (an enum member, a bool under an
  int serde, a bytearray under `bytes`); under `json`, a bool is tagged with its type and every other key
  (float, tuple, list) is identified by its serialized bytes, which equal no str, int or tagged bool;
- for every other serde (Avro, a user's), the serialized bytes: only they are safe when a serde may write
  a subclass unlike its base, or two unequal keys alike.

Keys the serde cannot write fail here, at the store call, with the serde's own error.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from typing import Any

from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde

Identity = Callable[[Any], Hashable]
_BYTES_LIKE = (bytes, bytearray, memoryview)


class KeyIdentity:
    """`plain`, `also`: the types whose keys are their own identity (None: no such type); `of(key)`: any
    other key's.

    `of` picks the rule per key type once (memoized), so a key of another type costs one dict lookup more
    than a plain one.
    """

    def __init__(
        self, plain: type | None, rule: Callable[[type], Identity], also: type | None = None
    ) -> None:
        self.plain = plain
        self.also = also or plain
        self._rule = rule
        self._by_type: dict[type, Identity] = {}

    def of(self, key: Any) -> Hashable:
        cls = key.__class__
        identity = self._by_type.get(cls)
        if identity is None:
            identity = self._by_type[cls] = self._rule(cls)
        return identity(key)


def key_identity(serde: object | None, serialize: Callable[[Any], bytes]) -> KeyIdentity:
    """The identity of keys written by `serde` (None: unknown, keys as the store below sees them);
    `serialize` is the store's key serialization, raising the serde's descriptive error."""
    if isinstance(serde, StringSerde):
        return KeyIdentity(str, lambda cls: str.__str__ if issubclass(cls, str) else serialize)
    if isinstance(serde, IntegerSerde | LongSerde):
        # struct packs whatever has __index__ (bool, IntEnum, numpy ints) as that int.
        return KeyIdentity(int, lambda cls: operator.index if hasattr(cls, "__index__") else serialize)
    if isinstance(serde, BytesSerde):
        return KeyIdentity(bytes, lambda cls: bytes if issubclass(cls, _BYTES_LIKE) else serialize)
    if isinstance(serde, JsonSerde):
        return KeyIdentity(str, lambda cls: _json_rule(cls, serialize), also=int)
    if serde is None:
        # No serde below (a typed store of the caller's own): Python equality within one type, as before.
        return KeyIdentity(None, lambda cls: _typed)
    return KeyIdentity(None, lambda cls: serialize)


def _json_rule(cls: type, serialize: Callable[[Any], bytes]) -> Identity:
    # The JSON encoder writes a str or int subclass as its base value (an enum member as its value), and
    # bool apart from int (True == 1). Floats go by bytes: 1.0 == 1 and -0.0 == 0.0, but are written apart.
    if cls is bool:
        return _as_bool
    if issubclass(cls, str):
        return str.__str__
    if issubclass(cls, int):
        return int.__int__
    return serialize


def _as_bool(key: bool) -> Hashable:
    return (bool, key)


def _typed(key: Any) -> Hashable:
    return (key.__class__, key)
