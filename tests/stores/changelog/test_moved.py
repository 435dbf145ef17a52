"""A store's changelog changed in the config since its checkpoint: which stores moved, and when the start is
refused (the checkpoint's changelog still holds records, or cannot be looked at) or goes on (deleted or
empty)."""

from __future__ import annotations

import logging

import pytest

from samsa.exceptions import InvalidConfigError
from samsa.stores.changelog.exceptions import ChangelogMovedError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.changelog.moved import ChangelogMove, changelog_moves, check_changelog_moves
from samsa.streams import SystemStream, SystemStreamPartition

OLD = SystemStream("kafka", "job-kv")
NEW = SystemStream("kafka", "job-1-kv-changelog")


def marker(stream: SystemStream, partition: int = 0, offset: int | None = 5) -> str:
    return ChangelogMarker(SystemStreamPartition(stream.system, stream.stream, partition), offset).encode()


def test_a_store_whose_checkpoint_names_another_changelog_moved() -> None:
    moves = changelog_moves(
        {"kv": NEW, "same": SystemStream("kafka", "same")},
        {
            "Partition 0": {"kv": marker(OLD), "same": marker(SystemStream("kafka", "same"))},
            "Partition 1": {"kv": marker(OLD, 1)},
            "Partition 2": None,  # no checkpoint yet
            "Partition 3": {"gone": marker(SystemStream("kafka", "gone")), "kv": "not json"},
        },
    )
    assert moves == [ChangelogMove("kv", OLD, NEW, ("Partition 0", "Partition 1"))]


def test_a_changelog_moved_to_another_system_moved() -> None:
    moved = SystemStream("other", OLD.stream)
    assert changelog_moves({"kv": moved}, {"Partition 0": {"kv": marker(OLD)}}) == [
        ChangelogMove("kv", OLD, moved, ("Partition 0",))
    ]


def test_a_v1_checkpoint_pairs_its_one_unclaimed_changelog_with_the_one_store_without_a_position() -> None:
    v1 = {"Partition 0": [SystemStreamPartition("kafka", OLD.stream, 0)]}
    assert changelog_moves({"kv": NEW}, {}, v1) == [
        ChangelogMove("kv", OLD, NEW, ("Partition 0",), certain=False)
    ]
    # A store with its position, or two candidates either way: nothing to pair.
    assert changelog_moves({"kv": OLD}, {}, v1) == []
    assert changelog_moves({"kv": NEW, "b": SystemStream("kafka", "b")}, {}, v1) == []


def test_refused_while_the_old_changelog_holds_records() -> None:
    asked: list[SystemStream] = []

    def probe(stream: SystemStream) -> bool:
        asked.append(stream)
        return True

    moves = [ChangelogMove("kv", OLD, NEW, ("Partition 0", "Partition 1"))]
    with pytest.raises(ChangelogMovedError) as info:
        check_changelog_moves(moves, probe)
    assert isinstance(info.value, InvalidConfigError)  # exit 78 / 2, never restarted
    message = str(info.value)
    assert asked == [OLD]
    for part in (
        "store 'kv'",
        "'Partition 0', 'Partition 1'",
        "changelog kafka.job-kv",
        "stores.kv.changelog is now kafka.job-1-kv-changelog",
        "topic job-kv still holds records",
        "nothing was restored, written or deleted",
        "set stores.kv.changelog=kafka.job-kv back",
        "copy every record of topic job-kv into topic job-1-kv-changelog",
        "then delete topic job-kv",
        "start the store over (its state is lost): delete topic job-kv",
    ):
        assert part in message, (part, message)
    assert info.value.stores == ["kv"]


def test_refused_when_the_old_changelogs_system_is_no_longer_defined() -> None:
    old = SystemStream("oldcluster", "job-kv")
    with pytest.raises(ChangelogMovedError) as info:
        check_changelog_moves([ChangelogMove("kv", old, NEW, ("Partition 0",))], lambda stream: None)
    message = str(info.value)
    assert "its system 'oldcluster' is not defined in the config (systems.oldcluster.*)" in message
    assert "delete topic job-kv (on the cluster of system 'oldcluster')" in message
    assert "systems.oldcluster.bootstrap.servers defined again" in message


def test_a_deleted_or_empty_old_changelog_goes_on_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        check_changelog_moves([ChangelogMove("kv", OLD, NEW, ("Partition 0",))], lambda stream: False)
    assert "deleted or empty" in caplog.text and "kafka.job-1-kv-changelog" in caplog.text


def test_every_refused_store_is_named_and_each_topic_asked_once() -> None:
    asked: list[SystemStream] = []

    def probe(stream: SystemStream) -> bool:
        asked.append(stream)
        return stream == OLD

    b_old, b_new = SystemStream("kafka", "b-old"), SystemStream("kafka", "b-new")
    moves = [
        ChangelogMove("a", OLD, NEW, ("Partition 0",)),
        ChangelogMove("a", OLD, NEW, ("Partition 1",)),
        ChangelogMove("b", b_old, b_new, ("Partition 0",)),
    ]
    with pytest.raises(ChangelogMovedError) as info:
        check_changelog_moves(moves, probe)
    assert asked == [OLD, b_old]
    assert info.value.stores == ["a"]


def test_a_guess_from_a_v1_checkpoint_is_warned_about_never_refused(caplog) -> None:  # type: ignore[no-untyped-def]
    # A store removed and another added in one deploy looks like a rename in a V1 checkpoint (no store
    # names): refusing it would block a valid deploy with wrong advice.
    guess = ChangelogMove("fresh", OLD, NEW, ("Partition 0",), certain=False)
    check_changelog_moves([guess], lambda stream: True)
    assert "names no store" in caplog.text and "fresh" in caplog.text
