"""Serdes: turn message keys and values into bytes and back (bytes, string, JSON, integer, long, Avro)."""

from samsa.serde.base import Serde
from samsa.serde.exceptions import (
    DeserializationError,
    SchemaRegistryError,
    SerdeConfigError,
    SerdeError,
    SerializationError,
)
from samsa.serde.registry import BUILTIN_SERDES, SERDE_CONFIG_KEYS, SerdeRegistry

__all__ = [
    "BUILTIN_SERDES",
    "SERDE_CONFIG_KEYS",
    "DeserializationError",
    "SchemaRegistryError",
    "Serde",
    "SerdeConfigError",
    "SerdeError",
    "SerdeRegistry",
    "SerializationError",
]
