"""Property: random exactly-once pipelines under random interleavings, crashes and duplicated or delayed
deliveries turn every input word into exactly one count increment, in the sink and in the store."""

from eos_pipeline import Pipeline, truth
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from samsa.testing.faults import CRASH_POINTS, Crash
from samsa.testing.scheduler import DeterministicScheduler

lines = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), min_size=1, max_size=5).map(" ".join),
    min_size=1,
    max_size=30,
)


@st.composite
def shapes(draw: st.DrawFn) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(stages, tasks per stage, intermediate partitions): a stage reading an intermediate stream has one
    task per partition, and 1-4 upstream tasks share each intermediate stream's partitions."""
    stages = draw(st.integers(1, 3))
    first = draw(st.integers(1, 4))
    parts = tuple(draw(st.integers(1, 4)) for _ in range(stages - 1))
    return stages, (first, *parts), parts


crashes = st.lists(
    st.builds(
        Crash,
        point=st.sampled_from(CRASH_POINTS),
        job=st.integers(0, 2),
        container=st.sampled_from(["0", "1"]),
        visit=st.integers(1, 5),
    ),
    max_size=4,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=lines,
    shape=shapes(),
    commit_ms=st.sampled_from([20, 50, 200]),
    containers=st.integers(1, 4),
    faults=crashes,
    crash_rate=st.sampled_from([0.0, 0.03, 0.08]),
    duplicate_rate=st.sampled_from([0.0, 0.1, 0.3]),
    seed=st.integers(0, 2**32 - 1),
)
# Regressions found on the way: a rewind emptying the ready queue mid-chunk, and shared partitions of a
# 4-task upstream under crashes at every commit step.
@example(
    text=["a b c", "b c d", "a a e"] * 4,
    shape=(3, (2, 2, 1), (2, 1)),
    commit_ms=50,
    containers=2,
    faults=[],
    crash_rate=0.05,
    duplicate_rate=0.1,
    seed=0,
)
@example(
    text=["a b", "c d e f", "a"] * 5,
    shape=(2, (4, 1), (1,)),
    commit_ms=20,
    containers=1,
    faults=[
        Crash("after-checkpoint", job=0, container="0", visit=2),
        Crash("after-snapshot", job=1, visit=1),
    ],
    crash_rate=0.0,
    duplicate_rate=0.3,
    seed=7,
)
def test_sink_and_store_hold_each_increment_exactly_once(
    tmp_path_factory, text, shape, commit_ms, containers, faults, crash_rate, duplicate_rate, seed
):
    stages, tasks, parts = shape
    pipeline = Pipeline(tmp_path_factory.mktemp("eos"), stages, tasks, parts)
    try:
        pipeline.feed(text)
        scheduler = DeterministicScheduler(
            seed, faults=faults, crash_rate=crash_rate, duplicate_rate=duplicate_rate, max_crashes=6
        )
        for config in pipeline.configs(commit_ms, containers):
            scheduler.add_job(config)
        scheduler.run()
        expected = truth(text)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
    finally:
        pipeline.close()
