"""The runtime's hooks for deterministic runs: crash points, the deferring executor, the buffered producer,
and a container started, stepped and finished on a virtual clock."""

from collections import Counter

import pytest

from samsa.checkpoint import faults
from samsa.checkpoint.faults import SimulatedCrash, crash_point, install_crash_hook
from samsa.kafka import KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, ContainerHooks
from samsa.runtime.coordinator import JobCoordinator
from samsa.testing.executor import DeterministicExecutor
from samsa.testing.faults import BufferedProducer, Crash


def test_an_installed_crash_hook_sees_every_point_and_is_removed_again():
    seen = []
    previous = install_crash_hook(seen.append)
    try:
        crash_point("after-upload")
        crash_point("before-snapshot")
    finally:
        assert install_crash_hook(previous) is not None
    assert seen == ["after-upload", "before-snapshot"]
    assert faults._hook is previous


def test_a_simulated_crash_is_no_exception_a_task_handler_catches():
    def hook(name):
        raise SimulatedCrash(name)

    previous = install_crash_hook(hook)
    try:
        with pytest.raises(SimulatedCrash) as raised:
            try:
                crash_point("after-checkpoint")
            except Exception:  # what user code or a commit's error handling writes
                pytest.fail("a crash must not be caught as an error")
        assert raised.value.point == "after-checkpoint"
    finally:
        install_crash_hook(previous)


def test_a_crash_plan_names_known_points_only():
    with pytest.raises(ValueError, match="after-lunch"):
        Crash("after-lunch")


def test_deferred_work_runs_when_the_driver_says_or_when_its_result_is_wanted():
    executor = DeterministicExecutor()
    ran = []
    first = executor.submit(ran.append, 1)
    second = executor.submit(ran.append, 2)
    assert ran == [] and len(executor.queue) == 2
    executor.run_next(1)
    assert ran == [2] and not first.done()
    assert first.result() is None  # asking for the result runs it here
    assert ran == [2, 1] and executor.queue == [] and second.done()


def test_a_crash_in_deferred_work_reaches_the_driver_and_discard_drops_the_rest():
    executor = DeterministicExecutor()

    def crash():
        raise SimulatedCrash("after-upload")

    executor.submit(crash)
    later = executor.submit(print, "never")
    with pytest.raises(SimulatedCrash):
        executor.run_next()
    executor.shutdown(wait=False, cancel_futures=True)
    assert later.cancelled() and executor.queue == []


def test_the_buffered_producer_loses_undelivered_sends_at_a_crash_and_duplicates_on_demand(wordcount):
    setup = wordcount()
    setup.config([], partitions=1)
    producer = BufferedProducer(KafkaProducer({"bootstrap.servers": setup.url}), lambda topic: True)
    for word in ["a", "b", "c"]:
        producer.send("counts", (1).to_bytes(8, "big"), key=word.encode(), partition=0)
    assert producer.deliver(1) == 1 and producer.buffered == 2
    producer.crash()
    producer.close()
    assert producer.lost == 2 and producer.duplicated == 1
    assert setup.last_outputs() == {"a": 1}


def test_a_container_started_stepped_on_a_virtual_clock_and_finished(wordcount):
    setup = wordcount()
    words = [f"w{i % 5}" for i in range(40)]
    job = JobConfig(Config(setup.config(words, partitions=2, commit_ms=100)))
    model = JobCoordinator(job).prepare()
    now = [0.0]
    executor = DeterministicExecutor()
    chosen = []

    def last_ready(ready):
        chosen.append(len(ready))
        return len(ready) - 1

    hooks = ContainerHooks(clock=lambda: now[0], executor=executor, chooser=last_ready)
    container = Container(job, model.containers[0], until_caught_up=True, hooks=hooks)
    loop = container.start()
    assert loop is not None and container.loop is loop
    steps = []
    while (step := loop.step()) is not None:
        steps.append(step)
        if step[0] == "process":
            now[0] += 0.03  # a commit falls due every fourth chunk or so, on this clock only
    kinds = Counter(s[0] for s in steps)
    assert kinds["process"] >= 2 and kinds["timer"] >= 1
    assert max(chosen) == 2, "the chooser picked among both ready partitions"
    assert executor.queue, "timer commits left their async phases queued for the driver"
    assert container.finish() is True
    assert executor.queue == [], "the final commit ran the queued phases"
    assert setup.store() == Counter(words)
