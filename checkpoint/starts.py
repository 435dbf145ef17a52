"""Which start of a container holds it: the record each start writes to the job's coordinator topic (beside
the job model) once it has fenced the older starts, and the watch with which an older start still running
learns of a newer one."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from samsa.kafka import KafkaConsumer, KafkaSystemError

log = logging.getLogger(__name__)

#: Key type of a container's start record in the coordinator topic (the job model's key is another).
START_KEY_TYPE = "container-start"
# Messages the watch takes per consume while it reads what was appended since its last look.
_WATCH_BATCH = 500
# How long one look may read: the loop waits for it (a topic of start records and job models is small).
_READ_S = 0.5
# A look must never hold the loop up for long: a coordinator topic without a leader (an election, a broker
# down) answers nothing, and the look is made from the run loop's fetches.
_LOOK_TIMEOUT_S = 0.2
_BACKOFF_MAX_S = 5.0
_CONSUME_S = 0.05


def start_key(container_id: str) -> bytes:
    """The compacted-topic key of a container's start record: the newest one is the start that holds it."""
    return json.dumps({"container": container_id, "type": START_KEY_TYPE}, sort_keys=True).encode()


@dataclass(frozen=True)
class ContainerStart:
    """One start of one container: its epoch (a driver's, else its start time in epoch ms), where it runs
    and when it started; `assignment`, a digest of the tasks it runs; `reason` when it is a takeover of the
    container by another start (a new job model), not a start of the container itself."""

    job: str
    container_id: str
    epoch: int
    host: str
    pid: int
    started_ms: int
    reason: str = ""
    assignment: str = ""

    @staticmethod
    def here(
        job: str, container_id: str, epoch: int, started_ms: int, reason: str = "", assignment: str = ""
    ) -> ContainerStart:
        """A start in this process."""
        host, pid = socket.gethostname(), os.getpid()
        return ContainerStart(job, container_id, epoch, host, pid, started_ms, reason, assignment)

    @property
    def key(self) -> bytes:
        return start_key(self.container_id)

    def encode(self) -> bytes:
        data = {
            "job": self.job,
            "container": self.container_id,
            "epoch": self.epoch,
            "host": self.host,
            "pid": self.pid,
            "startedMs": self.started_ms,
        }
        if self.reason:
            data["reason"] = self.reason
        if self.assignment:
            data["assignment"] = self.assignment
        return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()

    @staticmethod
    def decode(raw: bytes) -> ContainerStart | None:
        """The start a record describes; None when it is not one (a newer writer's, or damaged)."""
        try:
            data: Mapping[str, Any] = json.loads(raw)
            return ContainerStart(
                str(data["job"]),
                str(data["container"]),
                int(data["epoch"]),
                str(data["host"]),
                int(data["pid"]),
                int(data["startedMs"]),
                str(data.get("reason", "")),
                str(data.get("assignment", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        """`epoch E on host H (pid P, started <UTC time>)`, for messages."""
        started = datetime.fromtimestamp(self.started_ms / 1000, tz=UTC).isoformat(timespec="seconds")
        why = f"; {self.reason}" if self.reason else ""
        return f"epoch {self.epoch} on host {self.host} (pid {self.pid}, started {started}{why})"


def fenced_message(mine: ContainerStart | None, epoch: int | None, newer: str) -> str:
    """What a fenced start says: which container of which job, that a newer start took over, what to do."""
    if mine is None:
        return f"this container start (epoch {epoch}) was fenced: {newer}; it stops without committing"
    return (
        f"container {mine.container_id} of job {mine.job} was started again and this start "
        f"({mine.describe()}) is fenced: {newer}. It stops without committing; the newer start goes on from "
        f"the last checkpoint. If two copies of the job (or of this container) were not meant to run, stop "
        f"the one you do not want"
    )


class StartWatch:
    """Looks in the job's start records, from just before this start registered, for a later start record
    of the same container: the newer start fenced this one at the broker, and this one should stop now
    rather than at its next checkpoint (its writes meanwhile go to the changelog and outputs).

    A look asks the topic's high watermark (one round trip) and reads only when it moved (rarely: the
    topic holds the job model and start records), so no consumer is left fetching between looks (the dev
    broker answers an idle fetch at once, and an assigned consumer fetched 10,000 times a second)."""

    def __init__(self, consumer_config: Mapping[str, Any], topic: str) -> None:
        # Uncommitted records too: a start record after this start's own was written by a producer that
        # registered after this one, committed or not, and a reader never waits behind an open transaction.
        self._consumer = KafkaConsumer({**consumer_config, "isolation.level": "read_uncommitted"})
        self._topic = topic
        self._next = 0  # the offset to read from
        self._mine: ContainerStart | None = None
        self._seen_mine = False  # start records before this start's own are older ones
        self._newer: ContainerStart | None = None
        self._backoff = 0.0  # after failed looks: seconds until the next one (doubling)
        self._resume_at = 0.0
        self._warned = False

    def begin(self) -> None:
        """Call before this start registers: whatever is appended from now on is read."""
        self._next = self._consumer.watermarks((self._topic, 0))[1]

    def watch_for(self, mine: ContainerStart) -> None:
        """Records this start (its own record, read back, is not a newer one)."""
        self._mine = mine

    def look(self) -> ContainerStart | None:
        """The newer start of this container, once its record was read; None so far."""
        if self._newer is not None or self._mine is None:
            return self._newer
        if time.monotonic() < self._resume_at:
            return None
        tp = (self._topic, 0)
        try:
            high = self._consumer.watermarks(tp, timeout=_LOOK_TIMEOUT_S)[1]
            if high <= self._next:
                return None
            self._consumer.assign({tp: self._next})
            try:
                deadline = time.monotonic() + _READ_S
                while self._next < high and time.monotonic() < deadline:
                    for msg in self._consumer.consume(_WATCH_BATCH, _CONSUME_S):
                        self._next = msg.offset() + 1
                        self._take(msg.key(), msg.value())
                    # Transaction markers take offsets but are never delivered: the position passes them.
                    self._next = max(self._next, self._consumer.position([tp]).get(tp, -1))
            finally:
                self._consumer.unassign()  # an assigned consumer would fetch until the next look
        except KafkaSystemError as e:
            # Back off (doubling, bounded) and say so once: the checkpoint transaction still fences.
            self._backoff = min(_BACKOFF_MAX_S, self._backoff * 2 or _LOOK_TIMEOUT_S)
            self._resume_at = time.monotonic() + self._backoff
            if not self._warned:
                self._warned = True
                log.warning(
                    "cannot read %s to watch for a newer start of this container (%s); retrying with "
                    "backoff, the broker still fences an older start at its next checkpoint",
                    self._topic,
                    e,
                )
            return self._newer
        self._backoff = 0.0
        return self._newer

    def _take(self, key: bytes | None, value: bytes | None) -> None:
        assert self._mine is not None
        if key != self._mine.key or value is None:
            return
        if value == self._mine.encode():
            self._seen_mine = True
        elif self._seen_mine:
            # Start records are in the order of their producers' registrations: one after this start's own
            # comes from a start that fenced this one.
            self._newer = ContainerStart.decode(value) or self._newer

    def close(self) -> None:
        self._consumer.close()
