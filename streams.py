"""Names of streams and partitions: (system, stream) and (system, stream, partition)."""

from __future__ import annotations

from typing import NamedTuple


class SystemStream(NamedTuple):
    """A stream (Kafka topic) on a named system."""

    system: str
    stream: str

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}"


class SystemStreamPartition(NamedTuple):
    """One partition of a stream: the unit a task consumes and checkpoints."""

    system: str
    stream: str
    partition: int

    @property
    def system_stream(self) -> SystemStream:
        return SystemStream(self.system, self.stream)

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}#{self.partition}"
