"""StreamTasks used by the tests; importable by containers started as subprocesses (PYTHONPATH)."""

from __future__ import annotations

import gc
import hashlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    RequestScope,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)


class EchoTask(StreamTask):
    """Sends every input's value to `test.output`, keyed `<partition>:<offset>` (to count duplicates)."""

    def init(self, context: TaskContext) -> None:
        config = context.config
        self.output = config["test.output"]
        self.commit_every = int(config.get("test.commit.every", "0"))
        self.kill_at = int(config.get("test.kill.at.value", "-1"))
        self.kill_marker = Path(config.get("test.kill.marker", "/nonexistent/marker"))
        self.seen = 0

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        value = envelope.value
        if self.kill_at >= 0 and str(value) == str(self.kill_at) and not self.kill_marker.exists():
            self.kill_marker.write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)  # a crash with no chance to flush or commit
        key = f"{envelope.partition}:{envelope.offset}"
        pid = [("pid", str(os.getpid()).encode())]
        collector.send(OutgoingMessage("kafka", self.output, key=key, value=value, headers=pid))
        self.seen += 1
        if self.commit_every and self.seen % self.commit_every == 0:
            coordinator.commit()


class CountTask(StreamTask):
    """Word count keyed by the input key, with the running count sent to `test.output`; optionally slow
    (`test.sleep.us` per message) and killed once at a value (`test.kill.at.value`, `test.kill.marker`)."""

    def init(self, context: TaskContext) -> None:
        config = context.config
        self.store: Any = context.store("counts")
        self.output = config["test.output"]
        self.sleep_s = int(config.get("test.sleep.us", "0")) / 1e6
        self.kill_at = config.get("test.kill.at.value")
        self.kill_marker = Path(config.get("test.kill.marker", "/nonexistent/marker"))
        self.seen = 0

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        self.seen += 1
        if self.kill_at is not None and self.seen == int(self.kill_at) and not self.kill_marker.exists():
            self.kill_marker.write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)
        count = (self.store.get(envelope.key) or 0) + 1
        self.store.put(envelope.key, count)
        collector.send(OutgoingMessage("kafka", self.output, key=envelope.key, value=count))


class StopAtTask(StreamTask):
    """Records calls; asks for shutdown of the container at value `test.stop.at`."""

    calls: list[str] = []

    def init(self, context: TaskContext) -> None:
        self.stop_at = context.config.get("test.stop.at")
        self.name = context.task_name

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        StopAtTask.calls.append(f"process:{envelope.value}")
        if str(envelope.value) == self.stop_at:
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        StopAtTask.calls.append("window")

    def close(self) -> None:
        StopAtTask.calls.append("close")


class FailingTask(StreamTask):
    """Raises on the value `boom`."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        if envelope.value == "boom":
            raise ValueError("boom")


class EnrichTask(StreamTask):
    """Sends each order (keyed by customer id) with its customer's `name` from the adjunct store
    `customers`, or `?` when the customer is unknown; with `test.write.adjunct` it tries to write to it."""

    def init(self, context: TaskContext) -> None:
        self.customers: Any = context.store("customers")
        self.output = context.config["test.output"]
        self.write = context.config.get("test.write.adjunct") == "true"

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        if self.write:
            self.customers.put(envelope.key, {"name": "mine"})
        customer = self.customers.get(envelope.key)
        name = customer["name"] if customer else "?"
        collector.send(
            OutgoingMessage("kafka", self.output, key=envelope.key, value=f"{envelope.value}:{name}")
        )


class HeapProbeTask(StreamTask):
    """Records `gc.get_freeze_count()` as each message is processed, in the class-level list `FROZEN`."""

    FROZEN: list[int] = []

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        HeapProbeTask.FROZEN.append(gc.get_freeze_count())


class StoreValuesTask(StreamTask):
    """Puts each input's value into store `values` under its key; an input valued `?` instead sends
    `<length>:<sha256>` of the stored value to `test.output` (to check a restore kept it exactly)."""

    def init(self, context: TaskContext) -> None:
        self.store: Any = context.store("values")
        self.output = context.config["test.output"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        if envelope.value != "?":
            self.store.put(envelope.key, envelope.value)
            return
        stored = (self.store.get(envelope.key) or "").encode()
        digest = f"{len(stored)}:{hashlib.sha256(stored).hexdigest()}"
        collector.send(OutgoingMessage("kafka", self.output, key=envelope.key, value=digest))


#: What a `StuckOnceTask` waits for at its "stuck" message (set by the test).
STUCK_RELEASE = threading.Event()


class StuckOnceTask(EchoTask):
    """EchoTask that, at the value "stuck", first waits for STUCK_RELEASE (a call without a timeout)."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        if envelope.value == "stuck":
            wait_for_the_remote_service()
        super().process(envelope, collector, coordinator)


def wait_for_the_remote_service() -> None:
    STUCK_RELEASE.wait(60)
