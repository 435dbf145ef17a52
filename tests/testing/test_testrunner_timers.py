"""Scheduler callbacks under the TestRunner: `advance_time` fires the due ones, as it does window(); timers
are lost at a restart and a task schedules them again in init() from its store."""

from __future__ import annotations

from typing import Any

import pytest

from samsa import IncomingMessageEnvelope, MessageCollector, OutgoingMessage, StreamTask, TaskCoordinator
from samsa.runtime.exceptions import UserCodeError
from samsa.runtime.task import TaskContext
from samsa.testing import TestResult, TestRunner, TestRunnerError

TIMEOUT_MS = 30_000


class SessionTimeout(StreamTask):
    """A session per key ends `TIMEOUT_MS` after its last message: the key's last-seen time is in store
    `last_seen`, and its timer sends ("ended", messages) to `sessions`."""

    def init(self, context: TaskContext) -> None:
        self.scheduler = context.scheduler
        self.seen: Any = context.store("last_seen")
        for key, (at, _) in self.seen.all():  # timers are not persisted: schedule again what is open
            self.scheduler.schedule(key, at + TIMEOUT_MS, self.end)

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        at = envelope.timestamp
        assert at is not None
        _, count = self.seen.get(envelope.key) or (0, 0)
        self.seen.put(envelope.key, [at, count + 1])
        self.scheduler.schedule(envelope.key, at + TIMEOUT_MS, self.end)

    def end(self, key: Any, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        _, count = self.seen.get(key)
        collector.send(OutgoingMessage("kafka", "sessions", key=key, value=count))
        self.seen.delete(key)


def _runner(tmp_path: Any) -> TestRunner:
    runner = TestRunner.of(SessionTimeout, state_dir=tmp_path / "state")
    return runner.add_store("last_seen").add_output("sessions")


def test_advance_time_fires_the_timers_that_came_due(tmp_path: Any) -> None:
    with _runner(tmp_path) as runner:
        runner.add_input("clicks", [("a", "x"), ("b", "y")])
        assert runner.run().output("sessions") == []
        assert runner.advance_time(TIMEOUT_MS - 1).output("sessions") == []
        runner.add_input("clicks", [("a", "z")])  # a's session goes on: its timer moves
        result = runner.advance_time(1)
        assert _ended(result) == [("b", 1)]
        assert result.store("last_seen") == {"a": [1_000_000 + TIMEOUT_MS - 1, 2]}
        assert _ended(runner.advance_time(TIMEOUT_MS - 2)) == [("b", 1)]
        assert _ended(runner.advance_time(1)) == [("b", 1), ("a", 2)]
        assert runner.advance_time(10 * TIMEOUT_MS).store("last_seen") == {}


def test_after_a_restart_init_schedules_the_open_sessions_again(tmp_path: Any) -> None:
    with _runner(tmp_path) as runner:
        runner.add_input("clicks", [("a", "x")])
        runner.run()
        runner.restart()  # the timer is gone with the container; the store comes back from its changelog
        assert runner.run().output("sessions") == []
        assert _ended(runner.advance_time(TIMEOUT_MS)) == [("a", 1)]


class FailingTimer(StreamTask):
    def init(self, context: TaskContext) -> None:
        context.scheduler.schedule_callback("k", context.scheduler.now_ms() + 10, self.boom)  # Samza's name

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass

    def boom(self, key: Any, collector: Any, coordinator: Any) -> None:
        raise KeyError("lost")


def test_a_failing_callback_fails_the_run_as_the_tasks_code(tmp_path: Any) -> None:
    with TestRunner.of(FailingTimer, state_dir=tmp_path / "state") as runner:
        runner.add_input("in", ["m"])
        runner.run()
        with pytest.raises(
            UserCodeError, match=r"scheduler callback .*boom\(\) for key 'k' failed: KeyError"
        ):
            runner.advance_time(10)


class ShutdownAfter(StreamTask):
    """Asks for shutdown from a timer 50 ms after its start, with nothing to read."""

    def init(self, context: TaskContext) -> None:
        context.scheduler.schedule("stop", context.scheduler.now_ms() + 50, self.stop)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass

    def stop(self, key: Any, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        collector.send(OutgoingMessage("kafka", "out", value="bye"))
        coordinator.shutdown()


def test_a_callbacks_sends_and_shutdown_request_act_as_windows(tmp_path: Any) -> None:
    with TestRunner.of(ShutdownAfter, state_dir=tmp_path / "state") as runner:
        runner.add_input("in", []).add_output("out")
        assert runner.run().output("out") == []
        assert runner.advance_time(50).output("out") == ["bye"]
        with pytest.raises(TestRunnerError, match="shut down"):
            runner.run()


def _ended(result: TestResult) -> list[tuple[str, int]]:
    """The sessions ended: (key, its message count)."""
    return [(m.key, m.value) for m in result.messages("sessions")]


def test_an_exactly_once_tasks_callback_sends_in_its_transaction(tmp_path: Any) -> None:
    config = {"job.processing.guarantee": "exactly_once", "task.outputs": "kafka.sessions"}
    with _runner(tmp_path).with_config(config) as runner:
        runner.add_input("clicks", [("a", "x"), ("a", "y")])
        assert runner.run().output("sessions") == []
        result = runner.advance_time(TIMEOUT_MS)
        assert _ended(result) == [("a", 2)]  # read as read_committed: the sink's transaction committed
        assert result.store("last_seen") == {}


class PollsForInput(StreamTask):
    """A callback scheduling itself again at the job's now ("as soon as possible": the TestRunner's clock
    stands still, so it is due at once, round after round) until process() has seen both messages; it gives
    up after 1,000 rounds. It sends how many rounds it took."""

    def init(self, context: TaskContext) -> None:
        self.scheduler = context.scheduler
        self.seen = 0
        self.rounds = 0
        self.scheduler.schedule("poll", self.scheduler.now_ms(), self.poll)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.seen += 1
        collector.send(OutgoingMessage("kafka", "out", value=envelope.value))

    def poll(self, key: Any, collector: Any, coordinator: Any) -> None:
        self.rounds += 1
        if self.seen < 2 and self.rounds < 1_000:
            self.scheduler.schedule(key, self.scheduler.now_ms(), self.poll)
        else:
            collector.send(OutgoingMessage("kafka", "out", value=f"{self.rounds} rounds"))


def test_a_callback_due_again_at_once_does_not_keep_the_input_waiting() -> None:
    with TestRunner.of(PollsForInput) as runner:
        runner.add_input("in", ["a", "b"]).add_output("out")
        assert runner.run(timeout=10).output("out") == ["a", "b", "3 rounds"]
