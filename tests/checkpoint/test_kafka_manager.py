"""Checkpoint V1/V2 records on the real broker: each read/write version combination, config switches
between restarts, old readers skipping V2, issue-2 records, and `checkpoint reset` over both versions."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import pytest

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.compacted_log import read_latest
from samsa.checkpoint.exceptions import CheckpointError
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import AnyCheckpoint, Checkpoint, CheckpointV2, checkpoint_key, encode
from samsa.checkpoint.tool import reset
from samsa.kafka import KafkaProducer
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "words.in", 0)
CHANGELOG = SystemStreamPartition("kafka", "job-counts-changelog", 0)
TASK = "Partition 0"
MARKERS = {"kafka-changelog": {"counts": '{"offset":"41"}'}}
Managers = Callable[..., KafkaCheckpointManager]


@pytest.fixture
def topic(topics: Callable[..., str]) -> str:
    return topics(1, {"cleanup.policy": "compact"})


@pytest.fixture
def producer(kafka_bootstrap: str) -> Iterator[KafkaProducer]:
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    yield producer
    producer.close()


@pytest.fixture
def managers(kafka_bootstrap: str, topic: str, producer: KafkaProducer) -> Managers:
    """managers(**kwargs): a manager of the test's checkpoint topic, as a restarted container builds one."""

    def make(**kwargs: object) -> KafkaCheckpointManager:
        return KafkaCheckpointManager(topic, {"bootstrap.servers": kafka_bootstrap}, producer, **kwargs)  # type: ignore[arg-type]

    return make


def commit(
    manager: KafkaCheckpointManager, versions: Sequence[int], position: int, task: str = TASK
) -> CheckpointId:
    """One commit as the commit manager writes it: V1 with changelog positions, V2 with state markers."""
    cp_id = CheckpointId.create()
    v1 = Checkpoint({SSP: position}, {CHANGELOG: (str(cp_id), position * 10)})
    v2 = CheckpointV2(cp_id, {SSP: position}, MARKERS)
    manager.write_versions(task, versions, v1, v2)
    manager.flush()
    return cp_id


def positions(checkpoints: dict[str, AnyCheckpoint]) -> dict[str, tuple[int, int]]:
    """task -> (version, input offset) of what was read."""
    return {task: (cp.version, cp.offsets[SSP]) for task, cp in checkpoints.items()}


# --- every write x read combination ------------------------------------------------------------------------

WRITES = [(1,), (2,), (1, 2), (2, 1)]
READS = [(1,), (2,), (2, 1), (1, 2)]


@pytest.mark.parametrize("write", WRITES, ids=lambda v: "write " + ",".join(map(str, v)))
def test_every_write_read_combination(managers: Managers, write: tuple[int, ...]) -> None:
    writer = managers()
    commit(writer, write, 5)
    commit(writer, write, 8)  # the later commit of each version wins
    for read in READS:
        present = [v for v in read if v in write]
        expected = {TASK: (present[0], 8)} if present else {}
        assert positions(managers().read_last(read)) == expected, f"read {read}"
        # the same through the manager's configured read versions
        assert positions(managers(read_versions=read).read_last()) == expected, f"read {read}"


def test_each_version_keeps_its_own_content(managers: Managers) -> None:
    manager = managers()
    cp_id = commit(manager, (1, 2), 7)
    v2 = manager.read_last((2,))[TASK]
    assert v2 == CheckpointV2(cp_id, {SSP: 7}, MARKERS)
    v1 = manager.read_last((1,))[TASK]
    assert v1 == Checkpoint({SSP: 7}, {CHANGELOG: (str(cp_id), 70)})
    records = manager.read_records()[TASK]
    assert set(records) == {1, 2}
    assert records[1].offset < records[2].offset  # written in the configured order, V1 first
    assert records[1].timestamp is not None and abs(records[1].timestamp - time.time() * 1000) < 60_000


def test_tasks_are_chosen_independently(managers: Managers) -> None:
    manager = managers()
    commit(manager, (1, 2), 3, task="Partition 0")
    commit(manager, (1,), 4, task="Partition 1")
    commit(manager, (2,), 5, task="Partition 2")
    assert positions(manager.read_last((2, 1))) == {
        "Partition 0": (2, 3),
        "Partition 1": (1, 4),
        "Partition 2": (2, 5),
    }
    assert positions(manager.read_last((1,))) == {"Partition 0": (1, 3), "Partition 1": (1, 4)}


def test_write_versions_requires_each_configured_version(managers: Managers) -> None:
    with pytest.raises(CheckpointError, match="includes 2"):
        managers().write_versions(TASK, (1, 2), Checkpoint({SSP: 1}), None)
    with pytest.raises(CheckpointError, match=r"task\.checkpoint\.write\.versions"):
        managers().write_versions(TASK, (), Checkpoint({SSP: 1}), None)


def test_an_empty_read_list_is_rejected(managers: Managers) -> None:
    with pytest.raises(CheckpointError, match=r"task\.checkpoint\.read\.versions"):
        managers().read_last(())
    with pytest.raises(CheckpointError, match=r"task\.checkpoint\.read\.versions"):
        managers(read_versions=(3,))


# --- switching config between restarts ---------------------------------------------------------------------


def test_stopping_v2_writes_falls_back_to_v1_after_the_max_age(managers: Managers) -> None:
    max_age = 1500  # ms; Samza's default is 10 minutes
    first = managers(live_max_age_ms=max_age)
    commit(first, (1, 2), 10)
    # Restart with task.checkpoint.write.versions=1: for a while the last V2 is still the one read.
    second = managers(live_max_age_ms=max_age)
    commit(second, (1,), 20)
    assert positions(managers(live_max_age_ms=max_age).read_last()) == {TASK: (2, 10)}
    # With Samza's 10-minute default the V2 record would still win.
    assert positions(managers().read_last()) == {TASK: (2, 10)}

    time.sleep(max_age / 1000 + 0.3)
    commit(second, (1,), 30)
    # The V1 record is now newer than the last V2 by more than the max age: the job falls back to V1.
    assert positions(managers(live_max_age_ms=max_age).read_last()) == {TASK: (1, 30)}
    assert positions(managers(live_max_age_ms=max_age).read_last((1, 2))) == {TASK: (1, 30)}
    assert positions(managers().read_last()) == {TASK: (2, 10)}

    # Restart with both versions again: the fresh V2 wins by priority.
    third = managers(live_max_age_ms=max_age)
    commit(third, (1, 2), 40)
    assert positions(managers(live_max_age_ms=max_age).read_last()) == {TASK: (2, 40)}


def test_switching_reads_between_versions_keeps_each_versions_latest(managers: Managers) -> None:
    writer = managers()
    commit(writer, (1, 2), 1)
    commit(writer, (2,), 2)  # V2 only for a while: V1 stays at 1
    assert positions(managers().read_last((1,))) == {TASK: (1, 1)}
    assert positions(managers().read_last((2, 1))) == {TASK: (2, 2)}
    # A job switched to read 1,2 prefers V1 although V2 is newer (within the max age).
    assert positions(managers().read_last((1, 2))) == {TASK: (1, 1)}
    commit(writer, (1,), 3)
    assert positions(managers().read_last((1, 2))) == {TASK: (1, 3)}
    assert positions(managers().read_last((2, 1))) == {TASK: (2, 2)}


def test_the_default_max_age_uses_the_record_timestamps(
    managers: Managers, producer: KafkaProducer, topic: str, kafka_bootstrap: str
) -> None:
    bootstrap_config = {"bootstrap.servers": kafka_bootstrap}
    now = int(time.time() * 1000)
    stale = CheckpointV2(CheckpointId(now - 700_000, 0), {SSP: 1}, MARKERS)
    producer.send(topic, encode(stale), key=checkpoint_key(TASK, 2), partition=0, timestamp=now - 700_000)
    producer.send(
        topic, encode(Checkpoint({SSP: 2})), key=checkpoint_key(TASK, 1), partition=0, timestamp=now
    )
    recent = CheckpointV2(CheckpointId(now - 500_000, 0), {SSP: 3}, MARKERS)
    producer.send(
        topic, encode(recent), key=checkpoint_key("Partition 1", 2), partition=0, timestamp=now - 500_000
    )
    producer.send(
        topic, encode(Checkpoint({SSP: 4})), key=checkpoint_key("Partition 1", 1), partition=0, timestamp=now
    )
    producer.flush()
    stamps = [r.timestamp for r in read_latest(bootstrap_config, topic)]
    assert stamps == [now - 700_000, now, now - 500_000, now]
    assert positions(managers().read_last()) == {TASK: (1, 2), "Partition 1": (2, 3)}


# --- compatibility -----------------------------------------------------------------------------------------


def test_old_readers_skip_v2_records_even_unreadable_ones(
    managers: Managers, producer: KafkaProducer, topic: str
) -> None:
    commit(managers(), (1,), 6)
    producer.send(topic, b"{not json", key=checkpoint_key(TASK, 2), partition=0)
    producer.send(topic, b"{}", key=b'{"taskName":"Partition 0","type":"checkpoint-v9"}', partition=0)
    producer.flush()
    assert positions(managers().read_last((1,))) == {TASK: (1, 6)}
    with pytest.raises(CheckpointError) as info:
        managers().read_last((2, 1))
    assert f"{topic}#0@1" in str(info.value)


def test_issue_2_v1_records_are_still_read(managers: Managers, producer: KafkaProducer, topic: str) -> None:
    # Key and value bytes exactly as the first checkpoint format wrote them.
    key = b'{"taskName": "Partition 0", "type": "checkpoint"}'
    value = b'{"version":1,"offsets":[{"system":"kafka","stream":"words.in","partition":0,"offset":"12"}]}'
    producer.send(topic, value, key=key, partition=0)
    producer.flush()
    for read in READS:
        expected = {TASK: (1, 12)} if 1 in read else {}
        assert positions(managers().read_last(read)) == expected
    assert managers().read_last()[TASK] == Checkpoint({SSP: 12})


def test_a_tombstone_removes_only_its_version(
    managers: Managers, producer: KafkaProducer, topic: str
) -> None:
    commit(managers(), (1, 2), 9)
    producer.send(topic, None, key=checkpoint_key(TASK, 2), partition=0)
    producer.flush()
    assert positions(managers().read_last()) == {TASK: (1, 9)}
    assert managers().read_last((2,)) == {}


def test_a_manager_without_producer_refuses_writes(kafka_bootstrap: str, topic: str) -> None:
    manager = KafkaCheckpointManager(topic, {"bootstrap.servers": kafka_bootstrap})
    with pytest.raises(CheckpointError, match="producer"):
        manager.write(TASK, Checkpoint())


# --- checkpoint reset over both versions -------------------------------------------------------------------


def _to(offset: int) -> Callable[[SystemStreamPartition, str | int], int]:
    return lambda ssp, target: offset


def test_reset_rewrites_both_versions_keeping_state_positions(managers: Managers) -> None:
    manager = managers()
    cp_id = commit(manager, (1, 2), 50)
    written = reset(manager, {TASK: [SSP]}, "earliest", _to(0))
    assert written[TASK] == CheckpointV2(cp_id, {SSP: 0}, MARKERS)
    for read in READS:
        assert positions(managers().read_last(read)) == {TASK: (read[0], 0)}
    assert managers().read_last((1,))[TASK] == Checkpoint({SSP: 0}, {CHANGELOG: (str(cp_id), 500)})


def test_reset_leaves_a_stale_v2_stale(managers: Managers, producer: KafkaProducer, topic: str) -> None:
    now = int(time.time() * 1000)
    stale = CheckpointV2(CheckpointId(now - 700_000, 0), {SSP: 1}, MARKERS)
    producer.send(topic, encode(stale), key=checkpoint_key(TASK, 2), partition=0, timestamp=now - 700_000)
    producer.flush()
    manager = managers()
    commit(manager, (1,), 30)
    assert positions(manager.read_last()) == {TASK: (1, 30)}
    written = reset(manager, {TASK: [SSP]}, "latest", _to(99))
    assert (written[TASK].version, written[TASK].offsets) == (1, {SSP: 99})
    # Refreshing the stale V2 would have made its old state markers win again.
    assert positions(managers().read_last()) == {TASK: (1, 99)}
    assert managers().read_last((2,))[TASK] == stale


@pytest.mark.parametrize(("write", "read"), [((1, 2), (2, 1)), ((1,), (1,)), ((2,), (2,))])
def test_reset_of_a_task_without_checkpoints_writes_the_configured_versions(
    managers: Managers, write: tuple[int, ...], read: tuple[int, ...]
) -> None:
    written = reset(managers(), {TASK: [SSP]}, "earliest", _to(4), write, read)
    assert written[TASK].offsets == {SSP: 4} and written[TASK].version == read[0]
    assert sorted(managers().read_records()[TASK]) == sorted(write)
    assert positions(managers().read_last(read)) == {TASK: (read[0], 4)}
