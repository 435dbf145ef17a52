"""The deterministic scheduler refuses a planned fault that names a job or container it does not run (such a
fault would never happen, and a recovery test would pass without its crash)."""

import pytest

from samsa.testing import SchedulerError
from samsa.testing.faults import Crash, StallCommits
from samsa.testing.scheduler import DeterministicScheduler

WORDS = [f"w{i % 5}" for i in range(20)]


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (Crash("after-checkpoint", container="c0"), r"container 'c0'.*job 0 has containers '0', '1'"),
        (Crash("after-checkpoint", container="5"), r"container '5'.*job 0 has containers '0', '1'"),
        (Crash("after-checkpoint", job=3), r"job 3.*the scheduler has jobs 0"),
        (StallCommits(at_step=10, steps=5, container="9"), r"StallCommits.*container '9'"),
    ],
)
def test_a_fault_naming_a_container_or_job_not_scheduled_is_refused_before_any_step(wordcount, fault, says):
    scheduler = DeterministicScheduler(5, faults=[fault])
    scheduler.add_job(wordcount().config(WORDS, partitions=2, containers=2))
    with pytest.raises(SchedulerError, match=says):
        scheduler.run()
    assert scheduler.trace == []


def test_a_fault_naming_a_scheduled_container_runs(wordcount):
    scheduler = DeterministicScheduler(5, faults=[Crash("after-checkpoint", container="1", visit=2)])
    scheduler.add_job(wordcount().config(WORDS, partitions=2, containers=2))
    scheduler.run()
    assert [(job, container) for job, container, _ in scheduler.crashes] == [(0, "1")]
