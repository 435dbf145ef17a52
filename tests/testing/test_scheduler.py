"""The deterministic scheduler: same seed, same run; seeds cover the crash points; planned faults land."""

from collections import Counter

import pytest

from samsa.checkpoint.faults import COMMIT_POINTS
from samsa.testing.faults import PROCESSING, Crash, StallCommits
from samsa.testing.scheduler import DeterministicScheduler

WORDS = [f"w{i % 7}" for i in range(120)]


def run(setup, seed, containers=2, **options):
    scheduler = DeterministicScheduler(seed, **options)
    scheduler.add_job(setup.config(WORDS, partitions=4, containers=containers))
    scheduler.run()
    return scheduler


def test_same_seed_gives_the_same_trace(wordcount):
    first = run(wordcount(), 7, crash_rate=0.05, duplicate_rate=0.05)
    second = run(wordcount(), 7, crash_rate=0.05, duplicate_rate=0.05)
    assert first.crashes, "the seed should crash something, or the comparison shows little"
    assert first.trace == second.trace
    assert {e[1] for e in first.trace} >= {
        "start",
        "process",
        "timer",
        "commit",
        "deliver",
        "crash",
        "finish",
    }


def test_different_seeds_interleave_differently_and_cover_every_commit_step(wordcount):
    traces = []
    crashed_at: set[str] = set()
    for seed in range(8):
        scheduler = run(wordcount(), seed, crash_rate=0.08)
        traces.append(scheduler.trace)
        crashed_at |= {point for _, _, point in scheduler.crashes}
    processing_orders = {tuple(e[1:] for e in t if e[1] == "process") for t in traces}
    assert len(processing_orders) == len(traces)
    assert crashed_at >= {*COMMIT_POINTS, PROCESSING}


@pytest.mark.parametrize("point", [*COMMIT_POINTS, PROCESSING])
def test_a_planned_crash_lands_where_planned_and_the_count_survives(wordcount, point):
    setup = wordcount()
    scheduler = run(setup, 3, containers=1, faults=[Crash(point, container="0", visit=2)])
    crashes = [e for e in scheduler.trace if e[1] == "crash"]
    assert [e[2:] for e in crashes] == [(0, "0", point, 2)]
    assert [e[4] for e in scheduler.trace if e[1] == "start"] == [1, 2]
    assert setup.store() == Counter(WORDS)
    assert setup.last_outputs() == dict(Counter(WORDS))


def test_a_stalled_commit_thread_runs_no_async_phase_until_a_commit_needs_it(wordcount):
    scheduler = run(wordcount(), 5, containers=1, faults=[StallCommits(at_step=20, steps=300)])
    stalled = [e for e in scheduler.trace if 20 < e[0] <= 320]
    assert any(e[1] == "timer" and e[4] for e in stalled), "commits fell due during the stall"
    assert not [e for e in stalled if e[1] == "commit"], "the scheduler ran no queued async phase"
    # The queued phase ran anyway, inside the next commit that had to wait for it.
    assert [e for e in stalled if e[1] == "point" and e[4] == "after-cleanup"]


def test_lost_and_duplicated_sends_leave_the_state_exact(wordcount):
    setup = wordcount()
    scheduler = run(setup, 11, crash_rate=0.1, duplicate_rate=0.2)
    assert sum(e[4] for e in scheduler.trace if e[1] == "lost") > 0
    assert sum(e[5] for e in scheduler.trace if e[1] == "deliver") > 0
    assert setup.store() == Counter(WORDS)
    assert setup.last_outputs() == dict(Counter(WORDS))
