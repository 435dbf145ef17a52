"""Broadcast inputs to process(): every task of every container processes every message, once."""

from __future__ import annotations

from collections import Counter

import pytest
import systems_fixtures
from broadcast_test_tasks import RecordTask

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.streams import SystemStream

# Every test here runs on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin

TASKS = [f"Partition {p}" for p in range(4)]


def _job(job_config, orders: str, ref: str, out: str, **extra: str) -> dict[str, str]:
    return job_config(
        f"kafka.{orders}",
        out,
        task="broadcast_test_tasks:RecordTask",
        **{
            "job.container.count": "2",
            "task.broadcast.inputs": f"kafka.{ref}#[0-1]",
            "task.commit.ms": "-1",  # commits only where the test says (and at a clean stop)
            **extra,
        },
    )


def _produce_ref(produce, ref: str, first: int, count: int) -> set[tuple[int, int]]:
    """`count` messages over the stream's 2 partitions; returns their (partition, offset)s."""
    for i in range(first, first + count):
        produce(ref, [(f"k{i}", f"v{i}")], partition=i % 2)
    offsets = {0: 0, 1: 0}
    out = set()
    for i in range(first + count):
        if i >= first:
            out.add((i % 2, offsets[i % 2]))
        offsets[i % 2] += 1
    return out


def _outputs(read_topic, out: str) -> Counter[tuple[str, int, int]]:
    rows = (v.decode().split("|") for _, _, _, v in read_topic(out))
    return Counter((task, int(p), int(o)) for task, p, o in rows)


def test_every_task_of_every_container_processes_every_broadcast_message_once(
    job_config, topics, produce, read_topic, run_job
):
    orders, ref, out = topics(4), topics(2), topics(2)
    messages = _produce_ref(produce, ref, 0, 10)
    containers = run_job(_job(job_config, orders, ref, out))
    assert [[t.name for t in c.model.tasks] for c in containers] == [TASKS[0::2], TASKS[1::2]]
    got = _outputs(read_topic, out)
    assert got == Counter({(task, p, o): 1 for task in TASKS for p, o in messages})
    for container in containers:  # one consumer assignment per container: each message fetched once
        polled = container.registry.snapshot()["samsa_container_messages_polled_total"]
        assert [s["value"] for s in polled] == [10]


@pytest.mark.parametrize("committed", [0, 1])
def test_tasks_resume_a_broadcast_partition_from_their_own_checkpoints(
    committed, job_config, topics, produce, read_topic, run_job
):
    orders, ref, out = topics(4), topics(2), topics(2)
    config = _job(job_config, orders, ref, out)
    first = _produce_ref(produce, ref, 0, 6)
    run_job(config)  # every task checkpoints the 6
    second = _produce_ref(produce, ref, 6, 6)
    # Container 0 processes the next 6, checkpoints one of its tasks only, and dies (kill -9).
    job = JobConfig(Config(config))
    model = JobCoordinator(job).prepare().containers[0]
    container = Container(job, model, until_caught_up=True)
    loop = container.start()
    assert loop is not None
    loop.run()
    ahead = container._tasks[committed]
    container.commit([ahead], wait=True)
    container.crash()
    RecordTask.SEEN.clear()
    run_job(config)
    seen = Counter((task, p, o) for task, p, o in RecordTask.SEEN)
    behind = [t for t in TASKS if t != ahead.name]
    # The task ahead skips what it checkpointed; every other task processes the 6 new messages once.
    assert seen == Counter({(task, p, o): 1 for task in behind for p, o in second})
    # Output, for the tasks whose checkpoints covered what they sent: everything, nothing twice.
    got = _outputs(read_topic, out)
    crashed_uncommitted = next(t.name for t in model.tasks if t.name != ahead.name)
    for task in TASKS:
        if task != crashed_uncommitted:
            assert {k: n for k, n in got.items() if k[0] == task} == {
                (task, p, o): 1 for p, o in first | second
            }, task
    assert {(p, o) for t, p, o in got if t == crashed_uncommitted} == first | second


def test_a_broadcast_stream_may_be_listed_in_task_inputs_too(job_config, topics) -> None:
    orders, ref = topics(4), topics(2)
    config = _job(job_config, orders, ref, "out", **{"task.inputs": f"kafka.{orders},kafka.{ref}"})
    job = JobConfig(Config(config))
    assert job.inputs == [SystemStream("kafka", orders), SystemStream("kafka", ref)]
    config = _job(job_config, orders, ref, "out")
    assert JobConfig(Config(config)).inputs == [SystemStream("kafka", orders), SystemStream("kafka", ref)]


@pytest.mark.parametrize("adjunct_first", [False, True], ids=["input-first", "adjunct-first"])
@pytest.mark.parametrize(
    ("factory", "exactly_once"),
    [("rocksdb", False), ("inmemory", False), ("rocksdb", True)],
    ids=["rocksdb", "inmemory", "rocksdb-exactly-once"],
)
def test_a_broadcast_stream_that_fed_an_adjunct_store_resumes_where_the_store_read_it_in_every_task(
    factory, adjunct_first, exactly_once, job_config, topics, produce, run_job
):
    # Only the container's first task reads a broadcast adjunct stream (into the store all its tasks
    # read): the others must checkpoint where it read too, or turned back into an input of process they
    # resume at offsets kept from before (or at samza.offset.default) and process what the store took.
    orders, ref, out = topics(4), topics(2), topics(2)
    plain = _job(job_config, orders, ref, out)
    adjunct = {
        **plain,
        "stores.ref.factory": factory,
        "stores.ref.key.serde": "string",
        "stores.ref.msg.serde": "string",
        "stores.ref.adstore.input": f"kafka.{ref}",
        f"systems.kafka.streams.{ref}.samza.bootstrap": "true",
    }
    if exactly_once:
        # The checkpoints of the store's runs written in the tasks' transactions.
        adjunct.update(
            {
                "job.processing.guarantee": "exactly_once",
                "task.outputs": f"kafka.{out}",
                "task.commit.ms": "60000",
            }
        )
    phases = [adjunct] * adjunct_first + [plain, adjunct, plain, adjunct, plain]
    for n, config in enumerate(phases):
        messages = _produce_ref(produce, ref, 6 * n, 6)
        RecordTask.SEEN.clear()
        containers = run_job(config)
        assert [[t.name for t in c.model.tasks] for c in containers] == [TASKS[0::2], TASKS[1::2]]
        seen = Counter(RecordTask.SEEN)
        if config is plain:  # every task processes the new messages, once: none the store took
            assert seen == Counter({(task, p, o): 1 for task in TASKS for p, o in messages}), n
        else:
            assert not seen, n
