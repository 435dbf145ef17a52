"""Upstream exactly-once jobs with different task.commit.ms sharing one intermediate stream."""

from eos_pipeline import Pipeline, truth

from samsa.exactly_once.protocol import Marker, classify_message
from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.testing.scheduler import DeterministicScheduler

LINES = ["a b c", "b c d", "a a e", "f g a", "c c c", "d e f g"] * 3
OTHER = ["x y", "y z a", "x x b"] * 4


def test_jobs_with_different_commit_intervals_align_on_one_stream(tmp_path):
    # Versions numbered per interval (⌊now / task.commit.ms⌋) put a 20 ms job's records 10x further on
    # than a 200 ms job's: the downstream waited for the slow job's clock to reach them, for ever longer.
    for seed in range(3):
        pipeline = Pipeline(tmp_path / str(seed))
        try:
            pipeline.feed(LINES)
            other = f"lines2-{pipeline.suffix}"
            admin = KafkaAdmin({"bootstrap.servers": pipeline.url})
            try:
                admin.create_topic(other, 1)
            finally:
                admin.close()
            producer = KafkaProducer({"bootstrap.servers": pipeline.url})
            for line in OTHER:
                producer.send(other, line.encode())
            producer.close()
            fast, count = pipeline.configs(commit_ms=20)
            slow = dict(fast, **{"job.name": f"other-{pipeline.suffix}", "task.inputs": f"kafka.{other}"})
            slow["task.commit.ms"] = "200"
            scheduler = DeterministicScheduler(seed, max_steps=60_000)
            for config in (fast, slow, count):
                scheduler.add_job(config)
            scheduler.run()
            expected = truth(LINES + OTHER)
            assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}, seed
            assert pipeline.store() == expected
        finally:
            pipeline.close()


def test_source_versions_are_numbered_alike_whatever_the_commit_interval(tmp_path):
    pipeline = Pipeline(tmp_path)
    try:
        pipeline.feed(LINES)
        fast = pipeline.configs(commit_ms=20)[0]
        slow = dict(fast, **{"job.name": f"other-{pipeline.suffix}", "task.commit.ms": "1000"})
        scheduler = DeterministicScheduler(0)
        scheduler.add_job(fast)
        scheduler.add_job(slow)
        scheduler.run()
        last: dict[int, int] = {}  # job -> its highest marker version on the intermediate stream
        consumer = KafkaConsumer({"bootstrap.servers": pipeline.url})
        try:
            stream = pipeline.stream(1)
            ends = {(stream, p): consumer.watermarks((stream, p))[1] for p in range(2)}
            consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
            while any(consumer.position([tp]).get(tp, -1) < end for tp, end in ends.items()):
                for m in consumer.consume(10_000, 0.05):
                    tag = classify_message(m)
                    if isinstance(tag, Marker):
                        last[tag.job] = max(last.get(tag.job, 0), tag.version)
        finally:
            consumer.close()
        assert len(last) == 2
        # Both jobs stopped at the same virtual moment: their last versions lie within the slow interval.
        low, high = sorted(last.values())
        assert high - low <= 1000, last
    finally:
        pipeline.close()


def test_the_clock_version_is_the_last_interval_boundary_in_milliseconds():
    from types import SimpleNamespace

    from samsa.runtime.eos_tasks import ExactlyOnceTasks

    def version(commit_ms: int, now: float) -> int:
        job = SimpleNamespace(commit_ms=commit_ms)
        tasks = ExactlyOnceTasks(
            job, None, {}, None, None, None, clock=lambda: now, version_clock=lambda: now
        )  # type: ignore[arg-type]
        return tasks._clock_version()

    # Two containers' timers firing a few ms after one boundary cut one version.
    assert version(1000, 1_700_000_000.003) == version(1000, 1_700_000_000.917) == 1_700_000_000_000
    # Jobs of different intervals count in the same unit: at one moment their versions lie within the
    # longer interval.
    assert version(5000, 1_700_000_003.5) == 1_700_000_000_000
    assert version(20, 1_700_000_003.5) == 1_700_000_003_500
