"""The Serde protocol every serializer implements."""

from typing import Protocol, TypeVar, runtime_checkable

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
