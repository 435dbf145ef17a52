"""The Serde protocol every serializer implements, and its fast paths for the per-message callers."""

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


@runtime_checkable
class Serde(Protocol[T]):
    """Converts one kind of object to bytes and back.

    Both methods run once per message, so implementations keep them plain and fast. They raise
    `SerializationError` / `DeserializationError` (from `samsa.serde.exceptions`) with the original
    exception chained; the caller adds the topic, partition and offset. A `None` object or `None` bytes
    (a Kafka tombstone) is passed through as `None` by every built-in serde.

    Optional, looked up with `getattr` (see `fast_to_bytes` and `value_check`): `fast_to_bytes` /
    `fast_from_bytes`, C-level paths; `check(obj)`, which raises when `to_bytes(obj)` surely would and
    costs far less than it, so a store can refuse a bad value at `put` instead of when its cache writes it.
    """

    def to_bytes(self, obj: T) -> bytes:
        """Serialize `obj`."""
        ...

    def from_bytes(self, data: bytes) -> T:
        """Deserialize `data`."""
        ...


def fast_to_bytes(serde: Serde[Any]) -> Callable[[Any], bytes]:
    """The serde's C-level encoder when it has one (`fast_to_bytes` attribute), else `to_bytes`.

    A fast path gives the same bytes for valid input but only a terse error for bad input, so a caller
    that catches an error from it raises `explain(serde.to_bytes, obj, error)`: the serde's own error.
    """
    fast: Callable[[Any], bytes] = getattr(serde, "fast_to_bytes", serde.to_bytes)
    return fast


def fast_from_bytes(serde: Serde[Any]) -> Callable[[bytes], Any]:
    """The serde's C-level decoder when it has one (`fast_from_bytes` attribute), else `from_bytes`."""
    fast: Callable[[bytes], Any] = getattr(serde, "fast_from_bytes", serde.from_bytes)
    return fast


def value_check(serde: Serde[Any]) -> Callable[[Any], object] | None:
    """The serde's cheap `check` when it has one, else None.

    Like a fast path, a check may fail with a terse error: a caller explains it with
    `explain(serde.to_bytes, obj, error)`. A check may pass values `to_bytes` still refuses (the JSON
    serde looks at the outer type only); it never refuses one that `fast_to_bytes(serde)` accepts.
    """
    check: Callable[[Any], object] | None = getattr(serde, "check", None)
    return check


def explain(convert: Callable[[Any], Any], arg: Any, error: Exception) -> Exception:
    """The descriptive error of `convert(arg)` (a serde's own `to_bytes`/`from_bytes`) after its fast
    path failed with `error`; `error` itself when the full method does not fail."""
    try:
        convert(arg)
    except Exception as described:
        return described
    return error


# Serdes whose bytes -> object -> bytes is the identity on every input they accept: a key in these bytes is
# the key the store would write. Values need only decode to the same object: JSON's bytes may differ.
_CANONICAL_KEY_SERDES = frozenset({"bytes", "string", "integer", "long"})
_SAME_VALUE_SERDES = _CANONICAL_KEY_SERDES | {"json"}


def raw_passthrough(key_serde: str | None, msg_serde: str | None) -> bool:
    """Whether a message's raw key and value may be stored as they are by a store with these serdes (the
    same names as the message's stream): built-in serdes whose round trip keeps keys byte for byte."""
    return key_serde in _CANONICAL_KEY_SERDES and msg_serde in _SAME_VALUE_SERDES
