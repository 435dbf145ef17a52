"""Container starts on the in-memory system: the start records a fenced start reads to name the newer one,
the watch that sees a newer start, and the checkpoint transactions several tasks' commits share."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from samsa.checkpoint.exceptions import CheckpointFencedError
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import Checkpoint
from samsa.checkpoint.starts import ContainerStart, StartWatch
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.inmemory import forget
from samsa.streams import SystemStreamPartition

CHECKPOINTS, STARTS = "checkpoints", "coordinator"


@pytest.fixture
def url() -> Iterator[str]:
    url = f"inmemory://starts-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin({"bootstrap.servers": url}) as admin:
        admin.create_topic(CHECKPOINTS, 1, {"cleanup.policy": "compact"})
        admin.create_topic(STARTS, 1, {"cleanup.policy": "compact"})
    yield url
    forget(url)


def _start(epoch: int, container: str = "0") -> ContainerStart:
    return ContainerStart("job-1", container, epoch, f"host-{epoch}", 1000 + epoch, 1_700_000_000_000 + epoch)


def _manager(url: str, start: ContainerStart) -> KafkaCheckpointManager:
    """A start of container 0, registered and recorded, as `Container.start` makes it."""
    producer = KafkaProducer(
        {"bootstrap.servers": url, "transactional.id": "samsa-checkpoint-job-1-container-0"}
    )
    manager = KafkaCheckpointManager(
        CHECKPOINTS, {"bootstrap.servers": url}, producer, epoch=start.epoch, starts_topic=STARTS
    )
    manager.init_fencing(start)
    return manager


def _checkpoint(partition: int) -> Checkpoint:
    return Checkpoint({SystemStreamPartition("kafka", "in", partition): 10 + partition})


def test_the_watch_names_a_start_recorded_after_its_own_and_no_other(url: str) -> None:
    _manager(url, _start(1))  # an older start
    watch = StartWatch({"bootstrap.servers": url}, STARTS)
    watch.begin()
    mine = _start(2)
    _manager(url, _start(7, container="1"))  # another container's start
    _manager(url, mine)
    watch.watch_for(mine)
    assert watch.look() is None
    newer = _start(3)
    _manager(url, newer)
    assert watch.look() == newer
    assert newer.describe().startswith("epoch 3 on host host-3 (pid 1003, started 2023-11-14T22:13:20")


def test_commits_of_several_tasks_waiting_together_share_one_transaction(url: str) -> None:
    manager = _manager(url, _start(1))
    producer = manager._producer
    assert producer is not None
    transactions: list[int] = []
    commit_transaction = producer.commit_transaction

    def counted(timeout: float = 60) -> None:
        transactions.append(1)
        commit_transaction(timeout)

    producer.commit_transaction = counted  # type: ignore[method-assign]
    with manager._transaction:  # a transaction in flight: the four commits queue behind it
        threads = [
            threading.Thread(target=manager.commit, args=(f"Partition {p}", [1], _checkpoint(p), None))
            for p in range(4)
        ]
        for t in threads:
            t.start()
        while len(manager._queued) < 4:
            threading.Event().wait(0.001)
    for t in threads:
        t.join(10)
    assert len(transactions) == 1
    assert {task: cp.offsets for task, cp in manager.read_last().items()} == {
        f"Partition {p}": _checkpoint(p).offsets for p in range(4)
    }


def test_every_task_of_a_fenced_transaction_is_refused_naming_the_newer_start(url: str) -> None:
    older = _manager(url, _start(1))
    newer = _start(2)
    _manager(url, newer)
    errors: list[BaseException] = []

    def commit(partition: int) -> None:
        try:
            older.commit(f"Partition {partition}", [1], _checkpoint(partition), None)
        except BaseException as e:
            errors.append(e)

    with older._transaction:
        threads = [threading.Thread(target=commit, args=(p,)) for p in range(3)]
        for t in threads:
            t.start()
        while len(older._queued) < 3:
            threading.Event().wait(0.001)
    for t in threads:
        t.join(10)
    assert len(errors) == 3 and all(isinstance(e, CheckpointFencedError) for e in errors), errors
    for e in errors:
        assert "container 0 of job job-1 was started again and this start (epoch 1 on host host-1" in str(e)
        assert f"a newer start of it took over ({newer.describe()})" in str(e)
    assert older.read_last() == {}


def test_a_checkpoint_transaction_failing_inside_is_aborted_so_the_next_commit_goes_through(url: str) -> None:
    manager = _manager(url, _start(1))

    def broken(producer: KafkaProducer) -> None:
        raise ValueError("cannot encode")  # e.g. a serializer's error, after begin_transaction

    with pytest.raises(ValueError, match="cannot encode"):
        manager._in_transaction("task Partition 0", broken)
    # Left open, every later commit failed in begin_transaction and readers waited at the open transaction.
    manager.commit("Partition 0", [1], _checkpoint(0), None)
    assert manager.read_last()["Partition 0"] == _checkpoint(0)


def test_a_fenced_start_is_told_before_the_newer_start_is_looked_up(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import samsa.checkpoint.kafka_manager as kafka_manager

    older = _manager(url, _start(1))
    newer = _start(2)
    _manager(url, newer)
    told: list[str] = []
    older.on_fenced = told.append
    read_latest = kafka_manager.read_latest

    def slow_lookup(*args: object, **kwargs: object) -> object:
        # The container must already know: it stops processing while a slow broker answers the lookup.
        assert told, "the container was told only after the lookup"
        return read_latest(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kafka_manager, "read_latest", slow_lookup)
    with pytest.raises(CheckpointFencedError, match=r"a newer start of it took over \(epoch 2"):
        older.commit("Partition 0", [1], _checkpoint(0), None)
    assert len(told) == 1 and "registered the checkpoint producer at the broker" in told[0]
    assert older.fenced is not None and newer.describe() in older.fenced
