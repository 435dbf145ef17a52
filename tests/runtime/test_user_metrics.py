"""A task's own metrics (context.metrics): names, kinds, reuse, errors, and their Prometheus exposition."""

from __future__ import annotations

import pytest

from samsa.runtime.metrics import (
    MESSAGES_PROCESSED,
    Counter,
    MetricsError,
    MetricsRegistry,
    TaskMetrics,
    TimerSample,
    user_metric_name,
)
from samsa.runtime.prometheus import render


def _task(registry: MetricsRegistry | None = None, task: str = "Partition 0") -> TaskMetrics:
    return TaskMetrics(registry if registry is not None else MetricsRegistry(), task)


def test_counter_gauge_and_timer_are_exposed_with_the_user_prefix_and_the_task_label() -> None:
    registry = MetricsRegistry()
    metrics = _task(registry)
    counter = metrics.counter("processed")
    counter.inc()
    counter.inc(2)
    metrics.gauge("queue-size", initial=7)
    timer = metrics.timer("lookup", group="com.example.Enricher")
    timer.update(0.25)
    with timer.time():
        pass
    text = render(registry)
    assert counter.count == 3
    assert "# TYPE samsa_user_processed_total counter\n" in text
    assert 'samsa_user_processed_total{task="Partition 0"} 3\n' in text
    assert "# TYPE samsa_user_queue_size gauge\n" in text
    assert 'samsa_user_queue_size{task="Partition 0"} 7\n' in text
    # A timer as the runtime's own: a summary in seconds plus the max since the previous scrape.
    assert "# TYPE samsa_user_com_example_Enricher_lookup_seconds summary\n" in text
    assert 'samsa_user_com_example_Enricher_lookup_seconds_count{task="Partition 0"} 2\n' in text
    assert 'samsa_user_com_example_Enricher_lookup_seconds_max{task="Partition 0"} 0.25\n' in text
    assert "# HELP samsa_user_processed_total Metric 'processed' of the task\n" in text


def test_names_are_sanitized_and_suffixed_once() -> None:
    assert user_metric_name("my-counter", "", "counter") == "samsa_user_my_counter_total"
    assert user_metric_name("sent_total", "", "counter") == "samsa_user_sent_total"
    assert user_metric_name("9 lives", "org.Task$1", "gauge") == "samsa_user_org_Task_1_9_lives"
    assert user_metric_name("wait", "g", "timer") == "samsa_user_g_wait_seconds"
    assert user_metric_name("wait_seconds", "", "timer") == "samsa_user_wait_seconds"


@pytest.mark.parametrize(
    ("name", "group", "match"),
    [
        ("", "", r"task Partition 0: metric '' \(group ''\): the name '' has no letter or digit"),
        ("--", "", r"the name '--' has no letter or digit"),
        ("ok", "..", r"the group '..' has no letter or digit"),
        (3, "", r"task Partition 0: metric 3 \(group ''\): its name must be a str, not int"),
        ("ok", None, r"its group must be a str, not NoneType"),
    ],
)
def test_a_name_without_letters_or_not_a_str_is_refused(name: object, group: object, match: str) -> None:
    with pytest.raises(MetricsError, match=match):
        _task().counter(name, group=group)  # type: ignore[arg-type]


def test_asking_again_gives_the_same_metric_and_keeps_a_gauges_value() -> None:
    metrics = _task()
    assert metrics.counter("n") is metrics.counter("n")
    assert metrics.counter("n", group="a") is not metrics.counter("n")
    gauge = metrics.gauge("level", initial=5)
    gauge.set(9)
    assert metrics.gauge("level", initial=5) is gauge
    assert gauge.value == 9
    assert metrics.timer("t") is metrics.timer("t")


def test_one_name_as_another_kind_is_an_error_naming_it() -> None:
    metrics = _task()
    metrics.counter("hits", group="cache")
    with pytest.raises(
        MetricsError, match=r"task Partition 0: metric 'cache.hits' is a counter already, not a gauge"
    ):
        metrics.gauge("hits", group="cache")
    with pytest.raises(MetricsError, match=r"'cache.hits' is a counter already, not a timer"):
        metrics.timer("hits", group="cache")


def test_two_names_exposed_as_one_are_an_error() -> None:
    metrics = _task()
    metrics.counter("b_c", group="a")
    with pytest.raises(
        MetricsError,
        match=r"metric 'a_b.c' would be exposed as 'samsa_user_a_b_c_total', the name of its metric 'a.b_c'",
    ):
        metrics.counter("c", group="a_b")
    metrics.counter("sent")
    with pytest.raises(
        MetricsError, match=r"metric 'sent_total' would be exposed as 'samsa_user_sent_total'"
    ):
        metrics.gauge("sent_total")


def test_a_name_clashing_with_another_kinds_exposed_series_is_an_error_naming_the_task() -> None:
    metrics = _task()
    metrics.timer("wait")  # exposes samsa_user_wait_seconds_count, _sum and _max
    with pytest.raises(
        MetricsError, match=r"task Partition 0: metric 'wait_seconds_count' \(a gauge, exposed as .*already"
    ):
        metrics.gauge("wait_seconds_count")


def test_tasks_have_series_of_their_own_and_never_touch_the_runtimes() -> None:
    registry = MetricsRegistry()
    runtime_counter = registry.counter(MESSAGES_PROCESSED, "doc", {"task": "Partition 0"})
    a, b = _task(registry, "Partition 0"), _task(registry, "Partition 1")
    a.counter("processed").inc(2)
    b.counter("processed").inc(5)
    rows = registry.snapshot()["samsa_user_processed_total"]
    assert rows == [
        {"labels": {"task": "Partition 0"}, "value": 2},
        {"labels": {"task": "Partition 1"}, "value": 5},
    ]
    assert runtime_counter.value == 0


def test_read_gives_each_metric_by_the_name_the_task_gave() -> None:
    metrics = _task()
    metrics.counter("n").inc(4)
    metrics.gauge("g", group="grp", initial=1.5)
    metrics.timer("t").update(0.5)
    values = metrics.read()
    assert values["n"] == 4
    assert values["grp.g"] == 1.5
    assert values["t"] == TimerSample({"task": "Partition 0"}, 1, 0.5, 0.5)


def test_a_user_counter_is_the_runtimes_own_counter() -> None:
    # The class of the runtime's per-message counters: inc() is one attribute add, no lookup or lock.
    registry = MetricsRegistry()
    user = _task(registry).counter("n")
    own = registry.counter(MESSAGES_PROCESSED, "doc", {"task": "Partition 0"})
    assert type(user) is Counter is type(own)
