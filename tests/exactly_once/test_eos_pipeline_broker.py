"""An exactly-once pipeline on the real broker: crashes at commit steps, sink transactions read_committed."""

import pytest
from eos_pipeline import Pipeline, truth

from samsa.exactly_once.exceptions import ProtocolError
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
        pipeline.close()


def test_a_downstream_job_catching_up_under_a_tiny_buffer_bound_reads_again_from_the_broker(
    kafka_bootstrap, tmp_path, monkeypatch
):
    # The upstream job runs to its end first; the downstream one then catches up on all its versions with
    # a 200-byte buffer bound: the records it cannot buffer are read again from the broker (consumer seek).
    from samsa.runtime.run_loop import RunLoop

    read_again: list[object] = []
    again = RunLoop._read_again

    def counting_read_again(self, buf, offset):
        read_again.append(buf.ssp)
        again(self, buf, offset)

    monkeypatch.setattr(RunLoop, "_read_again", counting_read_again)
    pipeline = Pipeline(tmp_path, stages=2, tasks=(3, 2), intermediate_partitions=(2,), url=kafka_bootstrap)
    try:
        pipeline.feed(LINES)
        upstream, downstream = pipeline.configs(
            commit_ms=20, containers=2, **{"task.eos.buffer.max.bytes": "200"}
        )
        pipeline.run_in_turn(3, upstream, downstream)
        expected = truth(LINES)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
        assert read_again, "the bound was reached: records were read again from the broker"
    finally:
        pipeline.close()


def test_an_input_the_downstream_job_does_not_mark_intermediate_fails_before_process_naming_the_key(
    kafka_bootstrap, tmp_path
):
    pipeline = Pipeline(tmp_path, stages=2, tasks=(1, 1), intermediate_partitions=(1,), url=kafka_bootstrap)
    try:
        pipeline.feed(["a b", "c"])
        upstream, downstream = pipeline.configs(commit_ms=50)
        key = f"systems.kafka.streams.{pipeline.stream(1)}.samza.intermediate"
        del downstream[key]  # set only on the upstream job
        pipeline.run_in_turn(1, upstream)
        with pytest.raises(ProtocolError) as failure:
            pipeline.run_in_turn(1, downstream)
        message = str(failure.value)
        # The upstream's first record is its restore command: not a data record of the task's.
        assert f"record {pipeline.stream(1)}#0@0: a restore command" in message
        assert f"input kafka.{pipeline.stream(1)}" in message and f"{key}: true" in message
        assert pipeline.sink_records() == {}, "no record reached process()"
    finally:
        pipeline.close()
