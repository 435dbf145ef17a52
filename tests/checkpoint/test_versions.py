"""Checkpoint version config and the read rule that picks one record per task (the last test on the
session broker)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.exceptions import CheckpointError
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, StoredCheckpoint, choose, passed_over
from samsa.checkpoint.model import Checkpoint, CheckpointV2
from samsa.checkpoint.versions import checkpoint_versions, parse_versions
from samsa.runtime.config.config import Config
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "in", 0)
TASK = "Partition 0"
W, R = "task.checkpoint.write.versions", "task.checkpoint.read.versions"

# --- config -----------------------------------------------------------------------------------------------


def test_defaults_write_both_and_read_v2_first() -> None:
    assert checkpoint_versions({}) == ([1, 2], [2, 1])


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", [1]), ("2", [2]), ("1,2", [1, 2]), (" 2 , 1 ", [2, 1]), ([2, 1], [2, 1]), (["1"], [1]), (2, [2])],
)
def test_accepted_forms(value: Any, expected: list[int]) -> None:
    assert checkpoint_versions({W: value, R: value}) == (expected, expected)


def test_read_from_a_validated_job_config() -> None:
    config = Config({R: "1, 2", W: "2"})
    assert checkpoint_versions(config) == ([2], [1, 2])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ([], "empty"),
        ("3", "'3' is not a checkpoint version"),
        ("1,3", "'3' is not a checkpoint version"),
        ("0", "'0' is not"),
        ("v2", "'v2' is not"),
        ("1,,2", "'' is not"),
        ("1.0", "'1.0' is not"),
        ([True], "True is not"),
        ("2,2", "listed twice"),
        (1.5, "comma list"),
    ],
)
@pytest.mark.parametrize("key", [W, R])
def test_bad_values_name_the_key(key: str, value: Any, says: str) -> None:
    with pytest.raises(CheckpointError) as info:
        checkpoint_versions({key: value})
    assert key in str(info.value)
    assert says in str(info.value)


def test_parse_versions_default_only_when_unset() -> None:
    assert parse_versions(R, None, (2, 1)) == [2, 1]


# --- the read rule ---------------------------------------------------------------------------------------


def v1(offset: int, at: int | None, position: int = 0) -> StoredCheckpoint:
    return StoredCheckpoint(Checkpoint({SSP: position}), offset, at)


def v2(offset: int, at: int | None, position: int = 0) -> StoredCheckpoint:
    return StoredCheckpoint(CheckpointV2(CheckpointId(1, offset), {SSP: position}), offset, at)


MAX_AGE = 1_000


@pytest.mark.parametrize("order", ["v1 first", "v2 first"])
def test_higher_priority_wins_within_the_max_age(order: str) -> None:
    a, b = (v1(0, 1000), v2(1, 1500)) if order == "v1 first" else (v2(0, 1000), v1(1, 1500))
    by_version = {r.checkpoint.version: r for r in (a, b)}
    assert choose([a, b], [2, 1], MAX_AGE) is by_version[2]
    assert choose([a, b], [1, 2], MAX_AGE) is by_version[1]
    assert choose([b, a], [2, 1], MAX_AGE) is by_version[2]  # taken in log order whatever the list order


def test_a_lower_priority_record_newer_by_more_than_the_max_age_wins() -> None:
    stale_v2, fresh_v1 = v2(0, 1000), v1(5, 1000 + MAX_AGE + 1)
    assert choose([stale_v2, fresh_v1], [2, 1], MAX_AGE) is fresh_v1
    at_the_limit = v1(5, 1000 + MAX_AGE)
    assert choose([stale_v2, at_the_limit], [2, 1], MAX_AGE) is stale_v2


def test_an_older_lower_priority_record_never_wins_by_age() -> None:
    old_v1, v2_record = v1(0, 0), v2(1, 10 * MAX_AGE)
    assert choose([old_v1, v2_record], [2, 1], MAX_AGE) is v2_record


def test_without_timestamps_priority_alone_decides() -> None:
    a, b = v2(0, None), v1(1, 10**9)
    assert choose([a, b], [2, 1], MAX_AGE) is a
    assert choose([v2(0, 5), v1(1, None)], [2, 1], MAX_AGE).checkpoint.version == 2  # type: ignore[union-attr]


def test_versions_not_read_are_ignored() -> None:
    a, b = v1(0, 0), v2(1, 0)
    assert choose([a, b], [1], MAX_AGE) is a
    assert choose([a, b], [2], MAX_AGE) is b
    assert choose([b], [1], MAX_AGE) is None
    assert choose([], [2, 1], MAX_AGE) is None


def test_a_later_commit_of_a_version_passed_over_is_found_but_not_the_twin_of_one_commit() -> None:
    chosen = v2(0, 1000, position=50)
    twin = v1(1, 1000, position=50)  # the other version of the same commit
    assert passed_over([chosen, twin], chosen, [2, 1]) is None
    ahead = v1(2, 1500, position=100)  # a run that wrote only version 1 since
    assert passed_over([chosen, twin, ahead], chosen, [2, 1]) is ahead
    assert passed_over([ahead, chosen], v2(3, 2000, position=50), [2, 1]) is None  # before it in the log
    assert passed_over([chosen, ahead], chosen, [2]) is None  # a version not read


def test_a_start_that_passes_a_later_commit_over_says_so(
    manager: KafkaCheckpointManager, caplog: pytest.LogCaptureFixture
) -> None:
    manager.write(TASK, CheckpointV2(CheckpointId.create(), {SSP: 50}))
    manager.write(TASK, Checkpoint({SSP: 50}))
    manager.flush()
    with caplog.at_level(logging.WARNING, logger="samsa.checkpoint.kafka_manager"):
        assert manager.read_last([2, 1])[TASK].offsets == {SSP: 50}
    assert not caplog.records, "the twin of one commit is no later commit"
    manager.write(TASK, Checkpoint({SSP: 100}))  # a run with task.checkpoint.write.versions=1
    manager.flush()
    with caplog.at_level(logging.WARNING, logger="samsa.checkpoint.kafka_manager"):
        assert manager.read_last([2, 1])[TASK].offsets == {SSP: 50}  # Samza's rule, as documented
    message = caplog.records[-1].getMessage()
    assert f"task {TASK}: starting from its version-2 checkpoint" in message, message
    assert "50 -> 100" in message and "processed again" in message, message
