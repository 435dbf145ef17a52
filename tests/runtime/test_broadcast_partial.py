"""A broadcast stream whose partitions are not all in task.broadcast.inputs: the listed ones go to every
task, the others are grouped into tasks like any input's (Samza's GroupByPartition leaves out only the
broadcast partitions), whether or not task.inputs lists the stream too."""

from __future__ import annotations

from collections import Counter

import pytest
import systems_fixtures
from partition_test_tasks import StreamRecordTask

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator, check_broadcast_stores, client_config
from samsa.runtime.exceptions import ConfigError, JobModelError
from samsa.runtime.job_model import TaskModel, build_job_model
from samsa.streams import SystemStream, SystemStreamPartition

# The tests with a broker run on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin

A = SystemStream("kafka", "a")
B = SystemStream("kafka", "b")


def ssp(stream: SystemStream, partition: int) -> SystemStreamPartition:
    return SystemStreamPartition(stream.system, stream.stream, partition)


# -- the job model ------------------------------------------------------------------------------------
def test_only_the_listed_partitions_of_a_broadcast_stream_are_left_out_of_the_grouping() -> None:
    model = build_job_model({A: 2, B: 2}, 1, [ssp(B, 0)])
    assert model.tasks == [
        TaskModel("Partition 0", (ssp(A, 0), ssp(B, 0))),
        TaskModel("Partition 1", (ssp(A, 1), ssp(B, 1), ssp(B, 0))),
    ]


def test_a_partition_number_only_broadcast_partitions_have_gets_no_task() -> None:
    model = build_job_model({A: 1, B: 2}, 1, [ssp(B, 1)])
    assert model.tasks == [TaskModel("Partition 0", (ssp(A, 0), ssp(B, 0), ssp(B, 1)))]
    # A broadcast stream with more partitions than the inputs: its grouped partitions get tasks of their own.
    model = build_job_model({A: 1, B: 3}, 1, [ssp(B, 0)])
    assert [(t.name, t.partitions) for t in model.tasks] == [
        ("Partition 0", (ssp(A, 0), ssp(B, 0))),
        ("Partition 1", (ssp(B, 1), ssp(B, 0))),
        ("Partition 2", (ssp(B, 2), ssp(B, 0))),
    ]


def test_every_partition_broadcast_leaves_no_task() -> None:
    with pytest.raises(JobModelError, match=r"every input partition is in task\.broadcast\.inputs"):
        build_job_model({B: 2}, 1, [ssp(B, 0), ssp(B, 1)])


def test_the_model_knows_the_partition_counts_it_was_built_from() -> None:
    assert build_job_model({A: 2, B: 3}, 2, [ssp(B, 2)]).partition_counts() == {A: 2, B: 3}


def _store_job(broadcast: str) -> JobConfig:
    return JobConfig(
        Config(
            {
                "job.name": "j",
                "task.class": "partition_test_tasks:StreamRecordTask",
                "task.inputs": "kafka.a",
                "task.broadcast.inputs": broadcast,
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "localhost:9092",
                "stores.ref.factory": "inmemory",
                "stores.ref.adstore.input": "kafka.b",
            }
        )
    )


def test_an_adjunct_store_stream_broadcast_in_part_is_refused_naming_the_stream_and_partitions() -> None:
    with pytest.raises(
        ConfigError, match=r"partitions \[0\] of kafka\.b, which has 3.*\[1, 2\].*'ref'.*#\[0-2\]"
    ):
        check_broadcast_stores(_store_job("kafka.b#0"), {A: 2, B: 3})
    check_broadcast_stores(_store_job("kafka.b#[0-2]"), {A: 2, B: 3})  # whole: one store per container


# -- running ------------------------------------------------------------------------------------------
def _job(job_config, a: str, b: str, out: str, listed_in_inputs: bool, **extra: str) -> dict[str, str]:
    inputs = f"kafka.{a},kafka.{b}" if listed_in_inputs else f"kafka.{a}"
    return job_config(
        inputs,
        out,
        task="partition_test_tasks:StreamRecordTask",
        **{"task.broadcast.inputs": f"kafka.{b}#0", "task.commit.ms": "-1", **extra},
    )


def _produce(produce, a: str, b: str, tag: str) -> None:
    for stream in (a, b):
        for p in range(2):
            produce(stream, [(f"{tag}{p}", f"{tag}{p}")] * 2, partition=p)


def _expected(a: str, b: str, offsets: range) -> Counter[tuple[str, str, int, int]]:
    """What each task gets of the messages at `offsets` of every partition: its own of a and b, and b#0."""
    own = {"Partition 0": [(a, 0)], "Partition 1": [(a, 1), (b, 1)]}
    return Counter(
        (task, stream, p, o)
        for task, partitions in own.items()
        for stream, p in (*partitions, (b, 0))
        for o in offsets
    )


@pytest.mark.parametrize("listed_in_inputs", [False, True], ids=["broadcast-only", "also-in-task.inputs"])
def test_the_unlisted_partitions_of_a_broadcast_stream_are_processed_by_their_task(
    listed_in_inputs, job_config, topics, produce, run_job
):
    a, b, out = topics(2), topics(2), topics(1)
    _produce(produce, a, b, "x")
    StreamRecordTask.SEEN.clear()
    config = _job(job_config, a, b, out, listed_in_inputs, **{"job.container.count": "2"})
    containers = run_job(config)
    assert [[t.name for t in c.model.tasks] for c in containers] == [["Partition 0"], ["Partition 1"]]
    assert Counter(StreamRecordTask.SEEN) == _expected(a, b, range(2))


def test_a_task_reading_a_stream_both_as_its_own_and_as_broadcast_resumes_each_from_its_checkpoint(
    job_config, topics, produce, run_job
):
    a, b, out = topics(2), topics(2), topics(1)
    config = _job(job_config, a, b, out, listed_in_inputs=False)
    _produce(produce, a, b, "x")
    run_job(config)  # offsets 0-1 of every partition, committed at the clean stop
    _produce(produce, a, b, "y")
    # Offsets 2-3 processed, only Partition 1 (b#1 its own, b#0 broadcast) committed, then kill -9.
    StreamRecordTask.SEEN.clear()
    job = JobConfig(Config(config))
    (model,) = JobCoordinator(job).prepare().containers
    container = Container(job, model, until_caught_up=True)
    loop = container.start()
    assert loop is not None
    loop.run()
    committed = next(t for t in container.tasks if t.name == "Partition 1")
    container.commit([committed], wait=True)
    container.crash()
    assert Counter(StreamRecordTask.SEEN) == _expected(a, b, range(2, 4))
    _produce(produce, a, b, "z")
    StreamRecordTask.SEEN.clear()
    run_job(config)
    # Partition 1 resumes after what it committed; Partition 0 processes its uncommitted 2-3 again.
    redone = Counter({k: n for k, n in _expected(a, b, range(2, 4)).items() if k[0] == "Partition 0"})
    assert Counter(StreamRecordTask.SEEN) == _expected(a, b, range(4, 6)) + redone
    checkpoints = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    assert {t: cp.offsets for t, cp in checkpoints.read_last().items()} == {
        "Partition 0": {ssp(SystemStream("kafka", a), 0): 6, ssp(SystemStream("kafka", b), 0): 6},
        "Partition 1": {
            ssp(SystemStream("kafka", a), 1): 6,
            ssp(SystemStream("kafka", b), 1): 6,
            ssp(SystemStream("kafka", b), 0): 6,
        },
    }


def test_a_model_stored_with_the_whole_broadcast_stream_left_out_is_replaced(
    job_config, topics, produce, run_job
):
    a, b, out = topics(2), topics(2), topics(1)
    config = _job(job_config, a, b, out, listed_in_inputs=False)
    job = JobConfig(Config(config))
    coordinator = JobCoordinator(job)
    model = coordinator.prepare()
    assert ssp(SystemStream("kafka", b), 1) in model.tasks[1].partitions
    # As an older Samsa stored it: the same fingerprint, b#1 in no task.
    (container,) = model.containers
    old_tasks = tuple(
        TaskModel(t.name, tuple(p for p in t.partitions if p.partition == 0 or p.stream != b))
        for t in container.tasks
    )
    old = type(model)(model.fingerprint, (type(container)(container.id, old_tasks),))
    coordinator.publish(old)
    assert coordinator.read_model() == old
    assert coordinator.prepare() == model
    assert coordinator.read_model() == model


def test_a_partition_made_broadcast_is_not_replayed_to_the_tasks_that_did_not_read_it(
    job_config, topics, produce, run_job
):
    # The job read b grouped (b#0 in task 0, checkpointed); broadcasting b#0 gives it to task 1 with no
    # checkpoint of task 1's own. b#0 existed all along: task 1 starts it at samza.offset.default
    # (upcoming), not at its oldest offset as a partition added since the last run would.
    a, b, out = topics(2), topics(2), topics(1)
    produce(b, [("old", "old")] * 3, partition=0)
    grouped = job_config(
        f"kafka.{a},kafka.{b}",
        out,
        task="partition_test_tasks:StreamRecordTask",
        **{f"systems.kafka.streams.{b}.samza.offset.default": "oldest"},
    )
    run_job(grouped)
    StreamRecordTask.SEEN.clear()
    produce(b, [("new", "new")], partition=0)
    broadcast = {
        **grouped,
        "task.broadcast.inputs": f"kafka.{b}#0",
        f"systems.kafka.streams.{b}.samza.offset.default": "upcoming",
    }
    run_job(broadcast)
    assert sorted((t, o) for t, s, p, o in StreamRecordTask.SEEN if s == b and p == 0) == [
        ("Partition 0", 3)  # task 0 resumes from its checkpoint; task 1 starts at the end
    ]


def test_a_changelog_store_works_when_a_partition_number_has_only_broadcast_partitions(
    job_config, topics, produce, run_job, kafka_admin
):
    # Tasks Partition 0 and Partition 2 (b#1 is broadcast): the changelog needs partition 2, not 2 partitions.
    a, b, out = topics(1), topics(3), topics(1)
    produce(b, [("w", "x")], partition=2)
    config = job_config(
        f"kafka.{a}",
        out,
        task="samsa_test_tasks:CountTask",
        **{
            "task.broadcast.inputs": f"kafka.{b}#1",
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.changelog": f"kafka.{a}-changelog",
        },
    )
    try:
        containers = run_job(config)
        assert [t.name for c in containers for t in c.model.tasks] == ["Partition 0", "Partition 2"]
        assert kafka_admin.partition_counts([f"{a}-changelog"])[f"{a}-changelog"] == 3
    finally:
        kafka_admin.delete_topics([f"{a}-changelog"])
