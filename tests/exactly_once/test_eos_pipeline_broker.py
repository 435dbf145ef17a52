"""An exactly-once pipeline on the real broker: crashes at commit steps, sink transactions read_committed."""

from eos_pipeline import Pipeline, truth

from samsa.kafka import KafkaAdmin
from samsa.testing.faults import Crash
from samsa.testing.scheduler import DeterministicScheduler

LINES = ["a b c", "b c d", "a a e", "f g a", "c c c", "d e f g"] * 4


def test_two_stage_pipeline_on_the_broker_counts_each_word_once_through_crashes(kafka_bootstrap, tmp_path):
    pipeline = Pipeline(tmp_path, stages=2, tasks=(3, 2), intermediate_partitions=(2,), url=kafka_bootstrap)
    try:
        pipeline.feed(LINES)
        faults = [Crash("after-snapshot", job=1, visit=3), Crash("after-checkpoint", job=0, visit=4)]
        scheduler = DeterministicScheduler(5, faults=faults, duplicate_rate=0.1)
        for config in pipeline.configs(commit_ms=50, containers=2):
            scheduler.add_job(config)
        scheduler.run()
        assert len(scheduler.crashes) == 2
        expected = truth(LINES)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
    finally:
        admin = KafkaAdmin({"bootstrap.servers": kafka_bootstrap})
        try:
            admin.delete_topics([t for t in admin.metadata().topics if pipeline.suffix in t])
        finally:
            admin.close()
