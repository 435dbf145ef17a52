"""Faults the deterministic scheduler injects, and the producer that loses or duplicates sends on demand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.checkpoint.faults import COMMIT_POINTS
from samsa.kafka import KafkaProducer
from samsa.kafka.message import SendHeaders

#: Crash points: the commit steps (see `samsa.checkpoint.faults`) and `during-processing`, which the
#: scheduler visits before each chunk a container processes.
PROCESSING = "during-processing"
CRASH_POINTS = (*COMMIT_POINTS, PROCESSING)


@dataclass(frozen=True)
class Crash:
    """Kill container `container` of job `job` (its index in the scheduler) at `point` on its `visit`-th
    pass there (1-based, counted over all starts of the container: the start-up commit counts)."""

    point: str
    container: str = "0"
    job: int = 0
    visit: int = 1

    def __post_init__(self) -> None:
        if self.point not in CRASH_POINTS:
            raise ValueError(f"crash point {self.point!r} is none of {', '.join(CRASH_POINTS)}")


@dataclass(frozen=True)
class StallCommits:
    """The commit thread of a container stalls: its queued async phases are not run from scheduler step
    `at_step` for `steps` steps (a commit that must wait for them then runs them itself)."""

    at_step: int
    steps: int
    container: str = "0"
    job: int = 0


Fault = Crash | StallCommits

_Send = tuple[str, bytes | None, bytes | None, int | None, SendHeaders | None, int | None]


class BufferedProducer(KafkaProducer):
    """A producer whose sends wait in this process until the scheduler delivers them (as librdkafka's
    background thread would), or `flush` does. A crash loses the sends not yet delivered; a duplicate
    fault delivers one twice, as a non-idempotent producer's retry does. Wraps a real producer."""

    def __init__(self, inner: KafkaProducer, duplicate: Callable[[str], bool] = lambda topic: False) -> None:
        # Not calling KafkaProducer.__init__: every method used by the runtime is overridden here.
        self.inner = inner
        self._queue: list[_Send] = []
        self._duplicate = duplicate
        self.lost = 0
        self.duplicated = 0

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: SendHeaders | None = None,
        timestamp: int | None = None,
    ) -> None:
        self._queue.append((topic, value, key, partition, headers, timestamp))

    @property
    def buffered(self) -> int:
        return len(self._queue)

    def deliver(self, count: int) -> int:
        """Hands the first `count` buffered sends to the broker, in order; returns how many went."""
        sends, self._queue = self._queue[:count], self._queue[count:]
        for topic, value, key, partition, headers, timestamp in sends:
            self.inner.send(topic, value, key, partition, headers, timestamp)
            if self._duplicate(topic):
                self.duplicated += 1
                self.inner.send(topic, value, key, partition, headers, timestamp)
        return len(sends)

    def poll(self, timeout: float = 0) -> int:
        return self.inner.poll(timeout)

    def flush(self, timeout: float = 60) -> None:
        self.deliver(len(self._queue))
        self.inner.flush(timeout)

    def pending(self) -> int:
        return len(self._queue) + self.inner.pending()

    def partition_count(self, topic: str, timeout: float = 10.0) -> int | None:
        return self.inner.partition_count(topic, timeout)

    def name_settings(self, prefix: str) -> None:
        self.inner.name_settings(prefix)

    def note_topic(self, topic: str, note: str) -> None:
        self.inner.note_topic(topic, note)

    def close(self, timeout: float = 60) -> None:
        self.deliver(len(self._queue))
        self.inner.close(timeout)

    def crash(self) -> None:
        """The process died: what was not delivered is lost."""
        self.lost += len(self._queue)
        self._queue = []

    def init_transactions(self, timeout: float = 30) -> None:
        self.inner.init_transactions(timeout)

    def begin_transaction(self) -> None:
        self.inner.begin_transaction()

    def commit_transaction(self, timeout: float = 60) -> None:
        self.deliver(len(self._queue))
        self.inner.commit_transaction(timeout)

    def abort_transaction(self, timeout: float = 60) -> None:
        self._queue = []
        self.inner.abort_transaction(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
