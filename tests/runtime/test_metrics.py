"""Tests of the metrics registry: identity, counters, gauges, callback gauges, timers and clashes."""

import dis
import threading

import pytest

from samsa.runtime.metrics import (
    COMMIT_SECONDS,
    CONSUMER_LAG,
    MESSAGES_PROCESSED,
    PROCESS_SECONDS,
    Counter,
    MetricsError,
    MetricsRegistry,
    Timer,
)


@pytest.fixture
def registry() -> MetricsRegistry:
    return MetricsRegistry()


def test_same_name_and_labels_return_the_same_object_whatever_the_label_order(
    registry: MetricsRegistry,
) -> None:
    a = registry.counter("x_total", "doc", {"task": "t0", "topic": "in"})
    b = registry.counter("x_total", "doc", {"topic": "in", "task": "t0"})
    c = registry.counter("x_total", "doc", {"task": "t1", "topic": "in"})
    assert a is b
    assert a is not c


def test_int_label_value_is_the_same_series_as_its_string(registry: MetricsRegistry) -> None:
    a = registry.gauge("g", "doc", {"partition": 3})  # type: ignore[dict-item]
    b = registry.gauge("g", "doc", {"partition": "3"})
    assert a is b
    assert a.labels == {"partition": "3"}


def test_counter_counts_and_snapshot_shows_it(registry: MetricsRegistry) -> None:
    c = registry.counter(MESSAGES_PROCESSED, "messages", {"task": "Partition 0"})
    c.inc()
    c.inc(4)
    registry.counter("unused_total", "never touched")
    assert registry.snapshot() == {
        MESSAGES_PROCESSED: [{"labels": {"task": "Partition 0"}, "value": 5}],
        "unused_total": [{"labels": {}, "value": 0}],
    }


def test_gauge_set_inc_dec(registry: MetricsRegistry) -> None:
    g = registry.gauge("tasks", "doc", {"container": "0"})
    g.set(7)
    g.inc()
    g.dec(3)
    assert registry.snapshot()["tasks"] == [{"labels": {"container": "0"}, "value": 5}]


def test_callback_gauge_is_evaluated_at_each_collection(registry: MetricsRegistry) -> None:
    lag = [10]
    calls = []

    def read_lag() -> float:
        calls.append(1)
        return lag[0]

    registry.gauge_fn(CONSUMER_LAG, "lag", {"task": "t0", "topic": "in", "partition": "0"}, read_lag)
    assert calls == []  # registration does not evaluate it
    assert registry.snapshot()[CONSUMER_LAG][0]["value"] == 10
    lag[0] = 3
    assert registry.snapshot()[CONSUMER_LAG][0]["value"] == 3
    assert len(calls) == 2


def test_registering_a_callback_gauge_again_replaces_its_callback(registry: MetricsRegistry) -> None:
    first = registry.gauge_fn("lag", "doc", {"p": "0"}, lambda: 1.0)
    second = registry.gauge_fn("lag", "doc", {"p": "0"}, lambda: 2.0)
    assert first is second
    assert registry.snapshot()["lag"] == [{"labels": {"p": "0"}, "value": 2.0}]


def test_failing_callback_leaves_out_only_its_own_sample(registry: MetricsRegistry) -> None:
    def broken() -> float:
        raise RuntimeError("watermarks unknown")

    registry.gauge_fn("lag", "doc", {"p": "0"}, broken)
    registry.gauge_fn("lag", "doc", {"p": "1"}, lambda: 4)
    assert registry.snapshot()["lag"] == [{"labels": {"p": "1"}, "value": 4}]


def test_timer_tracks_count_sum_and_max_and_scrape_resets_max(registry: MetricsRegistry) -> None:
    t = registry.timer(PROCESS_SECONDS, "process", {"task": "t0"})
    for ns in (2_000_000, 7_000_000, 1_000_000):
        t.update_ns(ns)
    expected = {"labels": {"task": "t0"}, "count": 3, "sum": 0.01, "max": 0.007}
    assert registry.snapshot()[PROCESS_SECONDS] == [expected]
    assert registry.snapshot()[PROCESS_SECONDS] == [expected]  # snapshot leaves the max alone

    (family,) = registry.collect(reset_max=True)
    assert family.kind == "timer"
    after = registry.snapshot()[PROCESS_SECONDS][0]
    assert (after["count"], after["sum"], after["max"]) == (3, 0.01, 0.0)
    t.update_ns(500)
    assert registry.snapshot()[PROCESS_SECONDS][0]["max"] == 500e-9


def test_timer_context_manager_times_the_block_even_when_it_raises(registry: MetricsRegistry) -> None:
    t = registry.timer(COMMIT_SECONDS, "commit", {"task": "t0"})
    with t.time():
        pass
    with pytest.raises(ValueError), t.time():
        raise ValueError("commit failed")
    assert t.count == 2
    assert t.sum_ns > 0
    assert 0 < t.max_ns <= t.sum_ns


@pytest.mark.parametrize("method", [Timer.update_ns, Counter.inc])
def test_hot_path_updates_call_nothing(method: object) -> None:
    # A lock, a clock read or a helper call would show up as a CALL instruction.
    ops = {i.opname for i in dis.get_instructions(method)}  # type: ignore[arg-type]
    assert not {op for op in ops if "CALL" in op}, ops


def test_a_name_keeps_its_kind(registry: MetricsRegistry) -> None:
    registry.counter("x", "doc")
    with pytest.raises(MetricsError, match="'x' is already registered as a counter, not a gauge"):
        registry.gauge("x", "doc")


def test_settable_and_callback_gauge_cannot_share_a_series(registry: MetricsRegistry) -> None:
    registry.gauge("g", "doc", {"p": "0"})
    with pytest.raises(MetricsError, match="already registered as a Gauge, not a GaugeFn"):
        registry.gauge_fn("g", "doc", {"p": "0"}, lambda: 1.0)


def test_label_names_of_one_name_must_agree(registry: MetricsRegistry) -> None:
    registry.counter("x", "doc", {"task": "t0"})
    with pytest.raises(MetricsError, match=r"has labels \['task'\], not \['task', 'topic'\]"):
        registry.counter("x", "doc", {"task": "t0", "topic": "in"})


@pytest.mark.parametrize(("first", "second"), [("timer", "x_max"), ("x_count", "timer")])
def test_timer_derived_names_cannot_be_taken(registry: MetricsRegistry, first: str, second: str) -> None:
    def register(what: str) -> None:
        if what == "timer":
            registry.timer("x", "doc")
        else:
            registry.gauge(what, "doc")

    register(first)
    with pytest.raises(MetricsError, match="would expose"):
        register(second)


@pytest.mark.parametrize(
    ("name", "labels", "match"),
    [
        ("bad-name", {}, "metric name 'bad-name' is not valid"),
        ("9lives", {}, "is not valid"),
        ("ok", {"bad-label": "v"}, "label 'bad-label' of metric 'ok'"),
        ("ok", {"__reserved": "v"}, "not starting with '__'"),
    ],
)
def test_invalid_names_are_rejected(
    registry: MetricsRegistry, name: str, labels: dict[str, str], match: str
) -> None:
    with pytest.raises(MetricsError, match=match):
        registry.counter(name, "doc", labels)


def test_remove_drops_one_series_and_then_the_empty_name(registry: MetricsRegistry) -> None:
    registry.gauge_fn("lag", "doc", {"p": "0"}, lambda: 1.0)
    registry.gauge_fn("lag", "doc", {"p": "1"}, lambda: 2.0)
    assert registry.remove("lag", {"p": "0"}) is True
    assert registry.remove("lag", {"p": "0"}) is False
    assert registry.snapshot() == {"lag": [{"labels": {"p": "1"}, "value": 2.0}]}
    registry.remove("lag", {"p": "1"})
    assert registry.snapshot() == {}
    registry.counter("lag", "the name is free again")


def test_concurrent_registration_yields_one_object(registry: MetricsRegistry) -> None:
    got: list[Counter] = []
    barrier = threading.Barrier(8)

    def register() -> None:
        barrier.wait()
        got.append(registry.counter("c_total", "doc", {"task": "t0"}))

    threads = [threading.Thread(target=register) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len({id(c) for c in got}) == 1
