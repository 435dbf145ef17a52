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
    # The default bound, or one a few records reach: partitions running ahead are held or read again.
    buffer_bytes=st.sampled_from([1073741824, 300]),
)
# Regressions found on the way: a rewind emptying the ready queue mid-chunk, shared partitions of a
# 4-task upstream under crashes at every commit step, and a partition to read again (the buffer bound)
# that kept its container from counting as caught up while its upstream had finished.
@example(
    text=["a b c", "b c d", "a a e"] * 4,
    shape=(3, (2, 2, 1), (2, 1)),
    commit_ms=50,
    containers=2,
    faults=[],
    crash_rate=0.05,
    duplicate_rate=0.1,
    seed=0,
    buffer_bytes=1073741824,
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
    buffer_bytes=1073741824,
)
@example(
    text=["a a a a", "a", "a a a a a", "a a a", "a a", "a", "a b f", "b f", "b a b e c", "d", "a a"],
    shape=(3, (4, 2, 3), (2, 3)),
    commit_ms=20,
    containers=4,
    faults=[
        Crash("before-snapshot", job=1, container="1", visit=1),
        Crash("after-snapshot", job=1, container="1", visit=2),
        Crash("after-checkpoint", job=1, container="0", visit=4),
    ],
    crash_rate=0.08,
    duplicate_rate=0.0,
    seed=16231,
    buffer_bytes=300,
)
def test_sink_and_store_hold_each_increment_exactly_once(
    tmp_path_factory,
    text,
    shape,
    commit_ms,
    containers,
    faults,
    crash_rate,
    duplicate_rate,
    seed,
    buffer_bytes,
):
    stages, tasks, parts = shape
    pipeline = Pipeline(tmp_path_factory.mktemp("eos"), stages, tasks, parts)
    try:
        pipeline.feed(text)
        configs = pipeline.configs(commit_ms, containers, **{"task.eos.buffer.max.bytes": str(buffer_bytes)})
        # The scheduler refuses a crash of a container it does not run: keep those of the jobs' containers.
        scheduled = {
            (job, str(c))
            for job, config in enumerate(configs)
            for c in range(int(config["job.container.count"]))
        }
        scheduler = DeterministicScheduler(
            seed,
            faults=[f for f in faults if (f.job, f.container) in scheduled],
            crash_rate=crash_rate,
            duplicate_rate=duplicate_rate,
            max_crashes=6,
        )
        for config in configs:
            scheduler.add_job(config)
        scheduler.run()
        expected = truth(text)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
    finally:
        pipeline.close()
