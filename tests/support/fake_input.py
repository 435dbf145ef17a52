"""A run loop's input without a broker: keyless messages of one partition, a consumer handing them out, and a
string decoder, for tests driving a `RunLoop` directly."""

from __future__ import annotations

from typing import Any

from samsa.streams import SystemStreamPartition


class FakeMessage:
    """A keyless message of `ssp` at `offset`, without headers."""

    def __init__(self, ssp: SystemStreamPartition, offset: int, value: bytes) -> None:
        self._ssp, self._offset, self._value = ssp, offset, value

    def topic(self) -> str:
        return self._ssp.stream

    def partition(self) -> int:
        return self._ssp.partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> None:
        return None

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)

    def headers(self) -> None:
        return None


class FakeConsumer:
    """Hands out `values` of `ssp` as messages from offset `first`, `max_messages` at a time."""

    def __init__(self, ssp: SystemStreamPartition, values: list[bytes], first: int = 0) -> None:
        self.queue = [FakeMessage(ssp, first + i, v) for i, v in enumerate(values)]

    def consume(self, max_messages: int, timeout: float) -> list[FakeMessage]:
        out, self.queue = self.queue[:max_messages], self.queue[max_messages:]
        return out

    def pause(self, tps: Any) -> None: ...

    def resume(self, tps: Any) -> None: ...

    def position(self, tps: Any) -> dict[tuple[str, int], int]:
        return {tp: -1001 for tp in tps}  # no position known


class StringDecode:
    """The string serde's decoding, all a `PartitionBuffer` asks of a serde."""

    from_bytes = staticmethod(bytes.decode)
