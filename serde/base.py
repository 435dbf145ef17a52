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


def explain(convert: Callable[[Any], Any], arg: Any, error: Exception) -> Exception:
    """The descriptive error of `convert(arg)` (a serde's own `to_bytes`/`from_bytes`) after its fast
    path failed with `error`; `error` itself when the full method does not fail."""
    try:
        convert(arg)
    except Exception as described:
        return described
    return error
