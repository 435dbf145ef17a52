"""Exactly-once pipelines on the in-memory system under the deterministic scheduler."""

from eos_pipeline import Pipeline, truth

from samsa.testing.scheduler import DeterministicScheduler

LINES = ["a b c", "b c d", "a a e", "f g a", "c c c", "d e f g"] * 3


def test_two_stage_pipeline_without_faults_counts_each_word_once(tmp_path):
    pipeline = Pipeline(tmp_path)
    try:
        pipeline.feed(LINES)
        scheduler = DeterministicScheduler(1)
        for config in pipeline.configs():
            scheduler.add_job(config)
        scheduler.run()
        expected = truth(LINES)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
    finally:
        pipeline.close()


def test_seeds_with_crashes_and_duplicates(tmp_path):
    for seed in range(3):
        pipeline = Pipeline(tmp_path / str(seed), stages=3, tasks=(2, 2, 1), intermediate_partitions=(2, 1))
        try:
            pipeline.feed(LINES)
            scheduler = DeterministicScheduler(seed, crash_rate=0.05, duplicate_rate=0.1, max_crashes=6)
            for config in pipeline.configs(containers=2):
                scheduler.add_job(config)
            scheduler.run()
            expected = truth(LINES)
            assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}, seed
            assert pipeline.store() == expected
        finally:
            pipeline.close()


def test_the_buffer_bound_holds_when_the_version_waits_on_the_partition_running_ahead(tmp_path, monkeypatch):
    from samsa.exactly_once.buffer import EosBuffer
    from samsa.runtime.run_loop import RunLoop

    bound = 200
    holds: list[object] = []
    used: list[tuple[int, int]] = []  # (bytes buffered before an append, the appended record's size)
    read_again: list[object] = []
    hold, append, again = RunLoop._hold, EosBuffer.append, RunLoop._read_again

    def counting_hold(self, buf):
        held = hold(self, buf)
        if held:
            holds.append(buf.ssp)
        return held

    def measuring_append(self, version, message):
        before = self.bytes_used
        append(self, version, message)
        used.append((before, self.bytes_used - before))

    def counting_read_again(self, buf, offset):
        read_again.append(buf.ssp)
        again(self, buf, offset)

    monkeypatch.setattr(RunLoop, "_hold", counting_hold)
    monkeypatch.setattr(EosBuffer, "append", measuring_append)
    monkeypatch.setattr(RunLoop, "_read_again", counting_read_again)
    lines = [f"{w} {w}x {w}y" for w in "abcdefgh"] * 6
    for seed in range(4):
        pipeline = Pipeline(tmp_path / str(seed), stages=2, tasks=(4, 2), intermediate_partitions=(2,))
        try:
            pipeline.feed(lines)
            scheduler = DeterministicScheduler(seed, crash_rate=0.04, max_crashes=4)
            configs = pipeline.configs(
                commit_ms=20, containers=4, **{"task.eos.buffer.max.bytes": str(bound)}
            )
            for config in configs:
                scheduler.add_job(config)
            scheduler.run()
            expected = truth(lines)
            assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}, seed
            assert pipeline.store() == expected
        finally:
            pipeline.close()
    assert used, "upstream tasks ran ahead: early arrivals were buffered"
    # Each stage-1 task reads one partition, so every version waits on the partition running ahead: pausing
    # it would stall the barrier for good. Past the bound its records ahead are read again after the cut
    # instead of buffered: nothing is appended once the bound is reached.
    assert not holds
    assert all(before < bound for before, _ in used), max(used)
    assert read_again, "the bound was reached: records ahead were left to be read again"


def _catch_up(path, merge: bool, monkeypatch) -> tuple[int, int]:
    """Job 1 runs to its end first, then job 2 catches up on all of its versions: (checkpoints of
    versions, versions passed without one) of job 2."""
    from samsa.exactly_once.alignment import BarrierAligner
    from samsa.exactly_once.task import EosTask

    counts = {"advance": 0, "pass_to": 0}
    advance, pass_to = BarrierAligner.advance, BarrierAligner.pass_to

    def counting_advance(self, *args, **kwargs):
        counts["advance"] += 1
        return advance(self, *args, **kwargs)

    def counting_pass_to(self, version):
        counts["pass_to"] += 1
        pass_to(self, version)

    monkeypatch.setattr(BarrierAligner, "advance", counting_advance)
    monkeypatch.setattr(BarrierAligner, "pass_to", counting_pass_to)
    if not merge:
        monkeypatch.setattr(EosTask, "next_to_merge", lambda self, now, interval: None)
    lines = [f"{w} {w}x {w}y" for w in "abcdefgh"] * 8
    pipeline = Pipeline(path, stages=2, tasks=(4, 2), intermediate_partitions=(2,))
    try:
        pipeline.feed(lines)
        upstream, downstream = pipeline.configs(commit_ms=20, containers=4)
        downstream["task.commit.ms"] = "1000"  # a checkpoint falls due every 50 upstream versions
        pipeline.run_in_turn(5, upstream)
        counts.update(advance=0, pass_to=0)
        pipeline.run_in_turn(5, downstream)
        expected = truth(lines)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
        return counts["advance"], counts["pass_to"]
    finally:
        pipeline.close()
        monkeypatch.undo()


def test_a_task_catching_up_merges_closed_versions_into_fewer_checkpoints(tmp_path, monkeypatch):
    # Every version of the upstream is closed before the downstream starts, its records interleaved across
    # producers (so the next version's wait in the buffer): one checkpoint per version would make the
    # catch-up as slow as that many transaction commits.
    one_each, none_merged = _catch_up(tmp_path / "each", merge=False, monkeypatch=monkeypatch)
    merged_checkpoints, passed = _catch_up(tmp_path / "merged", merge=True, monkeypatch=monkeypatch)
    assert none_merged == 0
    assert passed > 0
    assert merged_checkpoints < one_each, (merged_checkpoints, one_each)
