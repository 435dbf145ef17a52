"""Checkpoint ids: `<epoch millis>-<nanos mod 10^6>`, ordered by (millis, nanos), unique within a process."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from samsa.checkpoint.exceptions import CheckpointError

_NANOS_MOD = 1_000_000


@dataclass(frozen=True, order=True)
class CheckpointId:
    """Names one commit of a task: its checkpoint record, local checkpoint dirs and state markers."""

    millis: int
    nanos: int

    def __post_init__(self) -> None:
        if self.millis < 0 or not 0 <= self.nanos < _NANOS_MOD:
            raise CheckpointError(
                f"checkpoint id {self.millis}-{self.nanos}: "
                f"millis must be >= 0 and nanos in [0, {_NANOS_MOD})"
            )

    @classmethod
    def create(cls) -> CheckpointId:
        """A new id, strictly greater than every id created before it in this process."""
        global _last
        candidate = (time.time_ns() // 1_000_000, time.monotonic_ns() % _NANOS_MOD)
        with _lock:
            # The nanos part is only a tie breaker within a millisecond (Samza's scheme): two calls in one
            # millisecond, or a wall clock stepped back, could otherwise give an equal or smaller id.
            if candidate <= _last:
                millis, nanos = _last[0], _last[1] + 1
                candidate = (millis + 1, 0) if nanos == _NANOS_MOD else (millis, nanos)
            _last = candidate
        return cls(*candidate)

    @classmethod
    def parse(cls, text: str) -> CheckpointId:
        """Reads `<millis>-<nanos>` as written by `str()`."""
        millis, sep, nanos = text.partition("-")
        if not (sep and _is_number(millis) and _is_number(nanos)):
            raise CheckpointError(f"checkpoint id {text!r} is not of the form <epoch millis>-<nanos>")
        if int(nanos) >= _NANOS_MOD:
            raise CheckpointError(f"checkpoint id {text!r}: the nanos part must be below {_NANOS_MOD}")
        return cls(int(millis), int(nanos))

    def __str__(self) -> str:
        return f"{self.millis}-{self.nanos}"


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


_lock = threading.Lock()
_last: tuple[int, int] = (-1, -1)
