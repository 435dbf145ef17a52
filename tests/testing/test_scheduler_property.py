"""Property: whatever the input, container count, commit interval and crashes, the word count is exact."""

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.testing.faults import CRASH_POINTS, Crash
from samsa.testing.scheduler import DeterministicScheduler

words = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"]), min_size=1, max_size=120)
crashes = st.lists(
    st.builds(
        Crash,
        point=st.sampled_from(CRASH_POINTS),
        container=st.sampled_from(["0", "1", "2"]),
        visit=st.integers(1, 6),
    ),
    max_size=4,
)


# The fixture is a factory: every example gets its own broker and state directory.
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=words,
    partitions=st.integers(1, 4),
    containers=st.integers(1, 3),
    commit_ms=st.sampled_from([20, 50, 100, 300, 1000]),
    faults=crashes,
    crash_rate=st.sampled_from([0.0, 0.02, 0.1]),
    seed=st.integers(0, 2**32 - 1),
)
def test_final_store_and_last_outputs_equal_the_truth(
    wordcount, words, partitions, containers, commit_ms, faults, crash_rate, seed
):
    setup = wordcount()
    count = min(containers, partitions)
    config = setup.config(words, partitions, count, commit_ms)
    # The scheduler refuses a crash of a container it does not run: keep those of the job's containers.
    faults = [f for f in faults if int(f.container) < count]
    scheduler = DeterministicScheduler(seed, faults=faults, crash_rate=crash_rate, max_crashes=6)
    scheduler.add_job(config)
    scheduler.run()
    truth = Counter(words)
    assert setup.store() == truth
    assert setup.last_outputs() == dict(truth)
