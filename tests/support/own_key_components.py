"""Custom components that read keys of their own: a serde factory taking `prefix`."""

from __future__ import annotations

from collections.abc import Mapping


class PrefixSerde:
    """Writes text with `serializers.registry.<name>.prefix` in front; reads it back as is."""

    def __init__(self, name: str, options: Mapping[str, str]) -> None:
        self.prefix = options["prefix"]

    def to_bytes(self, obj: object) -> bytes:
        return f"{self.prefix}{obj}".encode()

    def from_bytes(self, data: bytes) -> str:
        return data.decode()
