"""An idle task stays quiet (at-least-once): a timer's commit with nothing new since the task's last commit
writes no checkpoint record, while store writes of window(), requested commits and new input still
commit. Real broker, container in this process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.checkpoint.model import KEY_TYPE_V2, CheckpointV2, decode_record, parse_key
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer
from samsa.runtime import metrics as m
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator, client_config
from samsa.streams import SystemStreamPartition

TASK = "Partition 0"
WAIT_S = 20.0


class Running:
    """The job's one container, run on a thread."""

    def __init__(self, config: dict[str, str]) -> None:
        job = JobConfig(Config(config))
        self.container = Container(job, JobCoordinator(job).prepare().container("0"))
        self.failures: list[BaseException] = []
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            self.container.run()
        except BaseException as e:
            self.failures.append(e)

    def count(self, name: str) -> int:
        """The task's counter `name`."""
        return self.container.registry.counter(name, "", {"task": TASK}).value

    def windows(self) -> int:
        return self.container.registry.timer(m.WINDOW_SECONDS, "", {"task": TASK}).count

    def timer_fired(self) -> int:
        """Commits started, left out while the previous one uploaded, or left out idle."""
        return sum(self.count(name) for name in (m.COMMITS, m.COMMITS_SKIPPED, m.COMMITS_IDLE))

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            if self.failures:
                raise self.failures[0]
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.02)

    def idle_for(self, firings: int) -> None:
        """Waits until the commit timer has fired `firings` more times."""
        fired = self.timer_fired()
        self.wait_for(lambda: self.timer_fired() >= fired + firings, f"{firings} commit timers")


@contextmanager
def running(config: dict[str, str]) -> Iterator[Running]:
    """The job's one container, running until the block ends (a graceful stop); its failure is raised."""
    job = Running(config)
    job.thread.start()
    try:
        yield job
    finally:
        job.container.stop()
        job.thread.join(timeout=30)
    assert not job.thread.is_alive()
    if job.failures:
        raise job.failures[0]


def checkpoints(config: dict[str, str]) -> list[CheckpointV2]:
    """Every V2 checkpoint record the task wrote, in log order (the topic itself, not its latest records)."""
    job = JobConfig(Config(config))
    topic = checkpoint_topic(job.name, job.id)
    consumer = KafkaConsumer(client_config(job, "kafka"))
    try:
        _, high = consumer.watermarks((topic, 0))
        consumer.assign({(topic, 0): OFFSET_BEGINNING})
        out: list[CheckpointV2] = []
        deadline = time.monotonic() + WAIT_S
        while consumer.position([(topic, 0)]).get((topic, 0), -1) < high:  # the tail may be markers
            assert time.monotonic() < deadline, f"could not read {topic} to {high}"
            for msg in consumer.consume(1000, 0.2):
                kind, task = parse_key(msg.key() or b"{}")
                if kind == KEY_TYPE_V2 and task == TASK:
                    record = decode_record(kind, msg.value() or b"", f"{topic}@{msg.offset()}")
                    assert isinstance(record, CheckpointV2)
                    out.append(record)
        return out
    finally:
        consumer.close()


@pytest.fixture
def counts_store(kafka_admin: Any) -> Iterator[Callable[[str], dict[str, str]]]:
    """The keys of a cached in-memory store `counts` with a changelog (deleted after the test)."""
    made: list[str] = []

    def make(input_topic: str) -> dict[str, str]:
        made.append(f"{input_topic}-changelog")
        return {
            "stores.counts.factory": "inmemory",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.changelog": f"kafka.{made[-1]}",
        }

    yield make
    kafka_admin.delete_topics(made)


def test_an_idle_task_writes_one_checkpoint_for_its_last_input_then_none_until_new_input(
    job_config: Any, topics: Any, produce: Any, counts_store: Any
) -> None:
    inp, out = topics(1), topics(1)
    extra = {"task.commit.ms": "100", **counts_store(inp)}
    config = job_config(f"kafka.{inp}", out, task="idle_commit_tasks:CountingTask", **extra)
    ssp = SystemStreamPartition("kafka", inp, 0)
    produce(inp, [("k", str(i)) for i in range(5)], partition=0)
    with running(config) as job:
        job.wait_for(lambda: job.count(m.MESSAGES_PROCESSED) == 5, "5 messages processed")
        job.idle_for(4)
        at = [c.offsets.get(ssp) for c in checkpoints(config)]
        assert at.count(5) == 1 and at[-1] == 5, f"one checkpoint of the last input, then none: {at}"
        assert job.count(m.COMMITS_IDLE) >= 3

        produce(inp, [("k", "5")], partition=0)
        job.wait_for(lambda: job.count(m.MESSAGES_PROCESSED) == 6, "the new message processed")
        job.idle_for(4)
        at = [c.offsets.get(ssp) for c in checkpoints(config)]
        assert at.count(5) == 1 and at.count(6) == 1 and at[-1] == 6, at
        commits = job.count(m.COMMITS)
    # The final commit at stop is never left out.
    assert job.count(m.COMMITS) == commits + 1
    assert [c.offsets.get(ssp) for c in checkpoints(config)][-2:] == [6, 6]


def test_window_writes_to_a_store_without_input_still_commit(
    job_config: Any, topics: Any, counts_store: Any
) -> None:
    inp = topics(1)
    extra = {"task.commit.ms": "100", "task.window.ms": "40", "test.window.writes": "3", **counts_store(inp)}
    config = job_config(f"kafka.{inp}", "unused", task="idle_commit_tasks:WindowWriter", **extra)
    with running(config) as job:
        job.wait_for(lambda: job.windows() >= 3, "3 windows")
        job.idle_for(4)
        written = checkpoints(config)
        # The start-up commit, then the timer's commits of the window's writes: no input moved.
        assert len(written) >= 2 and len({frozenset(c.offsets.items()) for c in written}) == 1
        marker = written[-1].state_markers["changelog"]["counts"]
        assert marker != written[0].state_markers["changelog"]["counts"], "the writes reached the checkpoint"
        assert job.count(m.COMMITS_IDLE) >= 3, "once the writes stop, the task is idle"
        job.idle_for(2)
        assert len(checkpoints(config)) == len(written)


def test_a_commit_the_task_asks_for_while_idle_still_commits(job_config: Any, topics: Any) -> None:
    inp = topics(1)
    extra = {"task.commit.ms": "50", "task.window.ms": "120", "test.window.commits": "3"}
    config = job_config(f"kafka.{inp}", "unused", task="idle_commit_tasks:WindowCommitter", **extra)
    with running(config) as job:
        job.wait_for(lambda: job.windows() >= 4, "4 windows")
        job.idle_for(2)
        written = checkpoints(config)
        # The first commit after the start (no store: no start-up commit), then one per request; the timer's
        # commits in between were left out.
        assert job.count(m.COMMITS) == len(written) == 4
        assert job.count(m.COMMITS_IDLE) >= 3


@pytest.mark.parametrize(
    ("commit_ms", "lag_ms", "interval", "warned"),
    [
        # task.commit.ms=-1 keeps Samza's meaning (only the commits the task asks for), with a warning.
        ("-1", "2000", None, True),
        # A compaction lag of 0 neither shortens the timer nor makes it commit every millisecond.
        ("60000", "0", 60.0, True),
        # Within half of 0.9 x the lag: nothing to warn about.
        ("100", "2000", 0.1, False),
    ],
)
def test_the_commit_timer_is_task_commit_ms_with_a_warning_when_a_checkpoint_may_outgrow_the_lag(
    job_config: Any,
    topics: Any,
    produce: Any,
    counts_store: Any,
    caplog: pytest.LogCaptureFixture,
    commit_ms: str,
    lag_ms: str,
    interval: float | None,
    warned: bool,
) -> None:
    # A forced commit could checkpoint offsets past work a task buffers until it asks for a commit itself.
    inp, out = topics(1), topics(1)
    extra = {
        "task.commit.ms": commit_ms,
        "stores.counts.changelog.min.compaction.lag.ms": lag_ms,
        **counts_store(inp),
    }
    config = job_config(f"kafka.{inp}", out, task="idle_commit_tasks:CountingTask", **extra)
    produce(inp, [("k", str(i)) for i in range(5)], partition=0)
    with caplog.at_level("WARNING", logger="samsa.runtime.container"), running(config) as job:
        job.wait_for(lambda: job.count(m.MESSAGES_PROCESSED) == 5, "5 messages processed")
        (ti,) = job.container._tasks
        assert ti.commit_interval == interval
    warnings = [r.getMessage() for r in caplog.records if "count twice" in r.getMessage()]
    assert len(warnings) == (1 if warned else 0), warnings
    if warned:
        assert f"task.commit.ms={commit_ms}" in warnings[0]
        assert "another host" in warnings[0]
        assert "min.compaction.lag.ms" in warnings[0]


def test_an_idle_task_keeps_its_last_commit_timestamp_current(
    job_config: Any, topics: Any, produce: Any, counts_store: Any
) -> None:
    # docs/running.md says to alert on time() - samsa_last_commit_timestamp_seconds: a caught-up task whose
    # timer commits are left out must not age into that alert.
    inp, out = topics(1), topics(1)
    extra = {"task.commit.ms": "100", **counts_store(inp)}
    config = job_config(f"kafka.{inp}", out, task="idle_commit_tasks:CountingTask", **extra)
    produce(inp, [("k", str(i)) for i in range(3)], partition=0)
    with running(config) as job:
        gauge = job.container.registry.gauge(m.LAST_COMMIT_TIMESTAMP, "", {"task": TASK})
        job.wait_for(lambda: job.count(m.MESSAGES_PROCESSED) == 3, "3 messages processed")
        job.idle_for(3)
        commits, first = job.count(m.COMMITS), gauge.value
        job.idle_for(4)
        assert job.count(m.COMMITS) == commits, "idle: no commit written"
        assert gauge.value > first and time.time() - gauge.value < 2.0
