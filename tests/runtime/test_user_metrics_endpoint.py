"""A task's own counters, gauges and timers are served on metrics.prometheus.port with the runtime's."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable

from samsa import IncomingMessageEnvelope, MessageCollector, StreamTask, TaskContext, TaskCoordinator
from samsa.kafka.embedded import free_port
from samsa.runtime.classpath import register_object
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator


class MeteredTask(StreamTask):
    """Counts its messages, keeps the last value's length, and times its work, as a Samza task would."""

    def init(self, context: TaskContext) -> None:
        self.processed = context.metrics.counter("processed", group="Words")
        self.length = context.metrics.gauge("last-length", initial=-1)
        self.work = context.metrics.timer("work")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        with self.work.time():
            self.processed.inc()
            self.length.set(len(envelope.value))


def _scrape_until(port: int, wanted: list[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
        except OSError:
            text = ""
        if all(line in text for line in wanted):
            break
        time.sleep(0.2)
    return text


def _running(job: JobConfig, check: Callable[[], None]) -> Container:
    model = JobCoordinator(job).prepare()
    container = Container(job, model.container("0"))
    thread = threading.Thread(target=container.run)
    thread.start()
    try:
        check()
    finally:
        container.stop()
        thread.join(timeout=30)
    assert not thread.is_alive()
    return container


def test_a_tasks_own_metrics_are_served_with_the_task_label(job_config, topics, produce) -> None:
    inp = topics(2)
    produce(inp, [(None, "abc")] * 10, partition=0)
    produce(inp, [(None, "hello")] * 4, partition=1)
    port = free_port()
    task = register_object(MeteredTask)
    job = JobConfig(Config(job_config(f"kafka.{inp}", topics(1), task, **{"metrics.prometheus.port": port})))

    wanted = [
        'samsa_user_Words_processed_total{task="Partition 0"} 10\n',
        'samsa_user_Words_processed_total{task="Partition 1"} 4\n',
        'samsa_user_last_length{task="Partition 0"} 3\n',
        'samsa_user_last_length{task="Partition 1"} 5\n',
        'samsa_user_work_seconds_count{task="Partition 0"} 10\n',
    ]

    def first() -> None:
        text = _scrape_until(port, wanted)
        assert all(line in text for line in wanted), text
        assert "# TYPE samsa_user_Words_processed_total counter\n" in text
        assert "# TYPE samsa_user_last_length gauge\n" in text
        assert "# TYPE samsa_user_work_seconds summary\n" in text
        assert 'samsa_user_work_seconds_sum{task="Partition 1"} ' in text
        assert 'samsa_user_work_seconds_max{task="Partition 1"} ' in text
        assert 'samsa_messages_processed_total{task="Partition 0"} 10\n' in text  # the runtime's, beside

    _running(job, first)

    # A new start of the container counts from 0, as the runtime's own counters do.
    produce(inp, [(None, "xy")], partition=0)
    again = [
        'samsa_user_Words_processed_total{task="Partition 0"} 1\n',
        'samsa_user_Words_processed_total{task="Partition 1"} 0\n',
        'samsa_user_last_length{task="Partition 0"} 2\n',
        'samsa_user_last_length{task="Partition 1"} -1\n',
    ]

    def second() -> None:
        text = _scrape_until(port, again)
        assert all(line in text for line in again), text

    _running(job, second)
