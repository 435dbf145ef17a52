"""A graceful stop of an exactly-once source job: its tasks end on one version, busy or idle."""

from eos_pipeline import Pipeline

from samsa.exactly_once.protocol import Marker, classify_message
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer, KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, ContainerHooks
from samsa.runtime.coordinator import JobCoordinator
from samsa.testing.executor import DeterministicExecutor


def last_markers(pipeline: Pipeline) -> dict[int, int]:
    """Producer -> the version of its last marker on the first intermediate stream."""
    consumer = KafkaConsumer({"bootstrap.servers": pipeline.url})
    try:
        stream = pipeline.stream(1)
        ends = {(stream, p): consumer.watermarks((stream, p))[1] for p in range(2)}
        consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
        last: dict[int, int] = {}
        while any(consumer.position([tp]).get(tp, -1) < end for tp, end in ends.items()):
            for m in consumer.consume(10_000, 0.05):
                tag = classify_message(m)
                if isinstance(tag, Marker):
                    last[tag.producer] = max(last.get(tag.producer, 0), tag.version)
        return last
    finally:
        consumer.close()


def test_a_busy_and_an_idle_task_stopping_together_end_on_one_version(tmp_path):
    # Both tasks cut a version on the timer at 101 s; then only one processes more before the stop. Cut at
    # the current boundary, the busy one ended a version past the idle one, and the downstream waited for
    # the idle one's marker of that version until the job ran again.
    pipeline = Pipeline(tmp_path)
    try:
        producer = KafkaProducer({"bootstrap.servers": pipeline.url})
        for i in range(3000):
            producer.send(pipeline.lines, f"w{i % 7} x{i % 3}".encode(), partition=0)
        producer.close()
        job = JobConfig(Config(pipeline.configs(commit_ms=1000)[0]))
        model = JobCoordinator(job).prepare()
        now = [100.2]
        hooks = ContainerHooks(
            clock=lambda: now[0], version_clock=lambda: now[0], executor=DeterministicExecutor()
        )
        container = Container(job, model.containers[0], until_caught_up=True, hooks=hooks)
        loop = container.start()
        assert loop is not None
        kinds = []
        while (step := loop.step()) is not None:
            kinds.append((round(now[0], 1), step[0]))
            now[0] += 0.1
        timers = [t for t, kind in kinds if kind == "timer"]
        assert timers and any(kind == "process" and t > timers[0] for t, kind in kinds), kinds
        assert container.finish() is True
        versions = last_markers(pipeline)
        assert len(versions) == 2
        assert set(versions.values()) == {102_000}, versions
    finally:
        pipeline.close()
