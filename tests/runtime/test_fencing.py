"""Fencing of zombie containers on the real broker: a start with a newer epoch stops older ones committing."""

from __future__ import annotations

import time

import pytest
from background import Background, wait_for

from samsa.checkpoint.exceptions import CheckpointFencedError
from samsa.checkpoint.kafka_manager import EPOCH_HEADER, OWNER_KEY, checkpoint_topic
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator


def _epochs(bootstrap: str, job: JobConfig) -> list[int]:
    """The epoch header of every committed checkpoint record, in order (reading past transaction markers,
    which take offsets but are never delivered)."""
    topic = checkpoint_topic(job.name, job.id)
    epochs = []
    with KafkaConsumer({"bootstrap.servers": bootstrap}) as consumer:
        low, high = consumer.watermarks((topic, 0))
        if high == low:
            return []
        consumer.assign({(topic, 0): OFFSET_BEGINNING})
        deadline = time.monotonic() + 30
        while consumer.position([(topic, 0)]).get((topic, 0), -1) < high:
            assert time.monotonic() < deadline, f"could not read {topic} to {high}"
            for msg in consumer.consume(1000, 0.2):
                if msg.key() != OWNER_KEY:  # the record naming the job is no checkpoint
                    epochs.append(int(dict(msg.headers() or [])[EPOCH_HEADER]))
    return epochs


def _caused_by_fencing(error: BaseException | None) -> bool:
    while error is not None:
        if isinstance(error, CheckpointFencedError):
            return True
        error = error.__cause__
    return False


@pytest.fixture
def echo_job(job_config, topics) -> dict[str, str]:
    inp, out = topics(2), topics(1)
    return job_config(f"kafka.{inp}", out, **{"task.commit.ms": "100"})


def test_a_zombie_cannot_commit_once_a_newer_epoch_started(echo_job, produce, kafka_bootstrap):
    job = JobConfig(Config(echo_job))
    model = JobCoordinator(job).prepare().container("0")
    inp = job.inputs[0].stream
    old = Container(job, model, epoch=1)
    zombie = Background(old.run)
    wait_for(lambda: old.status()[0] == "running", 30, "epoch 1 running")
    produce(inp, [(str(i), str(i)) for i in range(20)])
    wait_for(lambda: 1 in _epochs(kafka_bootstrap, job), 30, "a checkpoint of epoch 1")

    new = Container(job, model, epoch=2)
    newer = Background(new.run)
    wait_for(lambda: new.status()[0] == "running", 30, "epoch 2 running")
    produce(inp, [(str(i), str(i)) for i in range(20, 40)])
    # The zombie goes on processing, but its next checkpoint is rejected by the broker, which stops it.
    zombie.thread.join(30)
    assert not zombie.thread.is_alive()
    assert _caused_by_fencing(zombie.error), repr(zombie.error)
    new.stop()
    newer.thread.join(30)
    assert newer.error is None
    epochs = _epochs(kafka_bootstrap, job)
    assert epochs[-1] == 2
    # Nothing of epoch 1 was committed after epoch 2's first checkpoint.
    assert 1 not in epochs[epochs.index(2) :]


def test_a_container_the_driver_fenced_stops_without_a_final_commit(echo_job, produce, kafka_bootstrap):
    job = JobConfig(Config({**echo_job, "task.commit.ms": "600000"}))
    model = JobCoordinator(job).prepare().container("0")
    container = Container(job, model, epoch=1)
    run = Background(container.run)
    wait_for(lambda: container.status()[0] == "running", 30, "running")
    produce(job.inputs[0].stream, [("k", "v")])
    committed = len(_epochs(kafka_bootstrap, job))  # the start's commit of the restored state
    time.sleep(0.5)
    container.fence("a newer start exists")
    run.thread.join(30)
    assert isinstance(run.error, CheckpointFencedError)
    assert len(_epochs(kafka_bootstrap, job)) == committed
