"""Unit tests of the checkpoint record format and the checkpoint tool's helpers (no broker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.exceptions import CheckpointError
from samsa.checkpoint.model import (
    Checkpoint,
    CheckpointV2,
    checkpoint_key,
    decode,
    decode_record,
    decode_v2,
    encode,
    parse_key,
)
from samsa.checkpoint.tool import live_containers, parse_reset_target
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition


def test_encode_decode_round_trip() -> None:
    checkpoint = Checkpoint(
        {SSP("kafka", "words", 0): 42, SSP("kafka", "page.views", 3): 0, SSP("other", "a#b:c", 11): 2**40}
    )
    assert decode(encode(checkpoint), "topic#0@5") == checkpoint


def test_encoding_is_structured_and_stable() -> None:
    a = Checkpoint({SSP("kafka", "b", 1): 7, SSP("kafka", "a", 0): 3})
    b = Checkpoint({SSP("kafka", "a", 0): 3, SSP("kafka", "b", 1): 7})
    assert encode(a) == encode(b)
    data = json.loads(encode(a))
    assert data["version"] == 1
    assert data["offsets"][0] == {"system": "kafka", "stream": "a", "partition": 0, "offset": "3"}


def test_empty_checkpoint_round_trips() -> None:
    assert decode(encode(Checkpoint()), "t#0@0") == Checkpoint()


@given(
    st.dictionaries(
        st.builds(SSP, st.text(min_size=1), st.text(min_size=1), st.integers(0, 10_000)),
        st.integers(0, 2**62),
        max_size=8,
    )
)
def test_round_trip_property(offsets: dict[SystemStreamPartition, int]) -> None:
    assert decode(encode(Checkpoint(offsets)), "x").offsets == offsets


@pytest.mark.parametrize(
    "raw",
    [
        b"garbage",
        b"",
        b"{}",
        b'{"offsets": [{"system": "kafka", "stream": "w", "partition": 0}]}',
        b'{"offsets": [{"system": "kafka", "stream": "w", "partition": 0, "offset": "x"}]}',
        b'{"offsets": [{"system": "kafka", "stream": "w", "partition": "p", "offset": "1"}]}',
        b'{"offsets": 5}',
        b"[1, 2]",
    ],
)
def test_unreadable_record_names_where(raw: bytes) -> None:
    with pytest.raises(CheckpointError) as info:
        decode(raw, "__samsa_checkpoint_wc-1#0@17")
    assert "__samsa_checkpoint_wc-1#0@17" in str(info.value)
    assert "samsa checkpoint reset" in str(info.value)


def test_checkpoint_key_round_trip() -> None:
    key = checkpoint_key("Partition 3")
    assert parse_key(key) == ("checkpoint", "Partition 3")
    assert checkpoint_key("Partition 3") == key  # stable bytes: compaction keeps one record per task
    assert checkpoint_key("Partition 4") != key


# --- V1 changelog positions, V2 --------------------------------------------------------------------------

ssps = st.builds(SSP, st.text(min_size=1), st.text(min_size=1), st.integers(0, 10_000))
ids = st.builds(CheckpointId, st.integers(0, 2**50), st.integers(0, 999_999))


def test_issue_2_v1_record_bytes_still_decode_and_encode_identically() -> None:
    # The exact bytes the first checkpoint format wrote: they must stay readable, and an offset-only V1
    # is still written byte for byte the same (so old readers of new V1 records see nothing new).
    raw = (
        b'{"version":1,"offsets":[{"system":"kafka","stream":"a","partition":0,"offset":"3"},'
        b'{"system":"kafka","stream":"b.c","partition":1,"offset":"7"}]}'
    )
    checkpoint = decode(raw, "t#0@1")
    assert checkpoint == Checkpoint({SSP("kafka", "a", 0): 3, SSP("kafka", "b.c", 1): 7})
    assert checkpoint.changelog_offsets == {}
    assert encode(checkpoint) == raw


@given(
    st.dictionaries(ssps, st.integers(0, 2**62), max_size=5),
    st.dictionaries(ssps, st.tuples(ids.map(str), st.none() | st.integers(0, 2**62)), max_size=5),
)
def test_v1_with_changelog_offsets_round_trips(
    offsets: dict[SystemStreamPartition, int],
    changelog: dict[SystemStreamPartition, tuple[str, int | None]],
) -> None:
    checkpoint = Checkpoint(offsets, changelog)
    assert decode(encode(checkpoint), "x") == checkpoint


def test_v1_changelog_offsets_are_structured_entries() -> None:
    checkpoint = Checkpoint(
        {SSP("kafka", "in", 0): 5},
        {
            SSP("kafka", "store-changelog", 0): ("1700000000000-12", 41),
            SSP("kafka", "empty.log", 2): ("1-2", None),
        },
    )
    data = json.loads(encode(checkpoint))
    assert data["offsets"] == [{"system": "kafka", "stream": "in", "partition": 0, "offset": "5"}]
    assert data["changelogOffsets"] == [
        {"system": "kafka", "stream": "empty.log", "partition": 2, "checkpointId": "1-2", "offset": None},
        {
            "system": "kafka",
            "stream": "store-changelog",
            "partition": 0,
            "checkpointId": "1700000000000-12",
            "offset": "41",
        },
    ]


@given(
    ids,
    st.dictionaries(ssps, st.integers(0, 2**62), max_size=6),
    st.dictionaries(st.text(), st.dictionaries(st.text(), st.text(), max_size=4), max_size=3),
)
def test_v2_round_trip_property(
    cp_id: CheckpointId, offsets: dict[SystemStreamPartition, int], markers: dict[str, dict[str, str]]
) -> None:
    checkpoint = CheckpointV2(cp_id, offsets, markers)
    raw = encode(checkpoint)
    assert decode_v2(raw, "x") == checkpoint
    assert decode_record("checkpoint-v2", raw, "x") == checkpoint
    assert json.loads(raw)["version"] == 2


def test_v2_encoding_is_structured_versioned_and_stable() -> None:
    a = CheckpointV2(
        CheckpointId(1700000000000, 42),
        {SSP("kafka", "page.views", 3): 10, SSP("kafka", "a", 0): 1},
        {"kafka-changelog": {"counts": "m1", "agg": "m2"}, "blob": {"counts": "idx-9"}},
    )
    b = CheckpointV2(
        CheckpointId(1700000000000, 42),
        {SSP("kafka", "a", 0): 1, SSP("kafka", "page.views", 3): 10},
        {"blob": {"counts": "idx-9"}, "kafka-changelog": {"agg": "m2", "counts": "m1"}},
    )
    assert encode(a) == encode(b)
    data = json.loads(encode(a))
    assert data["version"] == 2
    assert data["checkpointId"] == "1700000000000-42"
    # A stream name with dots stays whole: no dotted "<system>.<stream>.<partition>" key to split.
    assert {"system": "kafka", "stream": "page.views", "partition": 3, "offset": "10"} in data["offsets"]
    assert data["stateCheckpointMarkers"]["kafka-changelog"] == {"agg": "m2", "counts": "m1"}
    assert a.version == 2 and Checkpoint().version == 1


def test_unknown_fields_are_tolerated_in_both_versions() -> None:
    v1 = b'{"version":1,"offsets":[],"futureField":{"x":1}}'
    assert decode(v1, "x") == Checkpoint()
    v2 = (
        b'{"version":2,"checkpointId":"5-6","offsets":[{"system":"k","stream":"s","partition":0,'
        b'"offset":"9","leaderEpoch":3}],"stateCheckpointMarkers":{},"writer":"samsa 9"}'
    )
    assert decode_v2(v2, "x") == CheckpointV2(CheckpointId(5, 6), {SSP("k", "s", 0): 9})


def test_v2_without_markers_field_has_empty_markers() -> None:
    assert decode_v2(b'{"version":2,"checkpointId":"5-6","offsets":[]}', "x").state_markers == {}


@pytest.mark.parametrize(
    "raw",
    [
        b"garbage",
        b"[]",
        b'{"checkpointId":"5-6","offsets":[]}',  # no schema version
        b'{"version":3,"checkpointId":"5-6","offsets":[]}',
        b'{"version":1,"offsets":[]}',  # a V1 body under a V2 key
        b'{"version":2,"offsets":[]}',
        b'{"version":2,"checkpointId":"soon","offsets":[]}',
        b'{"version":2,"checkpointId":"5-6","offsets":{}}',
        b'{"version":2,"checkpointId":"5-6","offsets":[],"stateCheckpointMarkers":[]}',
        b'{"version":2,"checkpointId":"5-6","offsets":[],"stateCheckpointMarkers":{"b":{"s":5}}}',
        b'{"version":2,"checkpointId":"5-6","offsets":[],"stateCheckpointMarkers":{"b":"s"}}',
        b'{"version":2,"checkpointId":"5-6","offsets":[{"system":"k","stream":"s","partition":0}]}',
    ],
)
def test_unreadable_v2_record_names_where(raw: bytes) -> None:
    with pytest.raises(CheckpointError) as info:
        decode_v2(raw, "__samsa_checkpoint_wc-1#0@23")
    assert "__samsa_checkpoint_wc-1#0@23" in str(info.value)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"version":2,"offsets":[]}',  # a V2 schema under a V1 key
        b'{"version":1,"offsets":[],"changelogOffsets":[{"system":"k","stream":"c","partition":0,'
        b'"checkpointId":"x","offset":"1"}]}',
        b'{"version":1,"offsets":[],"changelogOffsets":[{"system":"k","stream":"c","partition":0,'
        b'"checkpointId":"1-2","offset":"one"}]}',
        b'{"version":1,"offsets":[],"changelogOffsets":[{"system":"k","stream":"c","partition":0}]}',
        b'{"version":1,"offsets":[],"changelogOffsets":5}',
    ],
)
def test_unreadable_v1_changelog_offsets_name_where(raw: bytes) -> None:
    with pytest.raises(CheckpointError) as info:
        decode(raw, "__samsa_checkpoint_wc-1#0@24")
    assert "__samsa_checkpoint_wc-1#0@24" in str(info.value)


def test_v2_key_sits_beside_v1_key() -> None:
    v1, v2 = checkpoint_key("Partition 0"), checkpoint_key("Partition 0", 2)
    assert v1 != v2
    assert parse_key(v2) == ("checkpoint-v2", "Partition 0")
    assert json.loads(v2) == {"taskName": "Partition 0", "type": "checkpoint-v2"}
    assert checkpoint_key("Partition 0", 1) == v1


# --- parse_reset_target ---------------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["earliest", "latest"])
def test_reset_target_words(word: str) -> None:
    assert parse_reset_target(word) == word


def test_reset_target_epoch_millis() -> None:
    assert parse_reset_target("1795428000000") == 1795428000000
    assert parse_reset_target("0") == 0


def test_reset_target_iso_with_z() -> None:
    expected = int(datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp() * 1000)
    assert parse_reset_target("2026-11-23T10:00:00Z") == expected
    assert parse_reset_target("2026-11-23T10:00:00.250Z") == expected + 250


def test_reset_target_iso_with_offset() -> None:
    expected = int(datetime(2026, 11, 23, 8, 0, tzinfo=UTC).timestamp() * 1000)
    assert parse_reset_target("2026-11-23T10:00:00+02:00") == expected
    assert parse_reset_target("2026-11-23T03:00:00-05:00") == expected


@pytest.fixture
def berlin_time() -> Iterator[None]:
    """The process's local zone set to Central European time (with summer time), restored afterwards."""
    old = os.environ.get("TZ")
    # A POSIX rule, so no zone database is needed: UTC+1, UTC+2 from March's last Sunday to October's.
    os.environ["TZ"] = "CET-1CEST,M3.5.0,M10.5.0/3"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.parametrize(
    ("text", "utc_offset_hours"),
    [("2026-01-15T10:00:00", 1), ("2026-07-15T10:00:00", 2)],
    ids=["winter", "summer"],
)
@pytest.mark.usefixtures("berlin_time")
def test_reset_target_naive_iso_is_local_time_of_that_date(text: str, utc_offset_hours: int) -> None:
    # A naive time is read in the machine's zone, with the UTC offset in force on that date (not today's).
    moment = datetime.fromisoformat(text).replace(tzinfo=timezone(timedelta(hours=utc_offset_hours)))
    assert parse_reset_target(text) == int(moment.timestamp() * 1000)
    # Cross-check against the C library's own reading of the local time.
    assert parse_reset_target(text) == int(time.mktime(datetime.fromisoformat(text).timetuple()) * 1000)


def test_reset_target_naive_iso_under_utc() -> None:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC0"
    time.tzset()
    try:
        expected = int(datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp() * 1000)
        assert parse_reset_target("2026-11-23T10:00:00") == expected
        assert parse_reset_target("2026-11-23") == int(datetime(2026, 11, 23, tzinfo=UTC).timestamp() * 1000)
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.parametrize("text", ["yesterday", "-5", "2026-13-01T00:00:00", "", "12:00", "EARLIEST"])
def test_reset_target_rejects_other_text(text: str) -> None:
    with pytest.raises(CheckpointError) as info:
        parse_reset_target(text)
    assert repr(text) in str(info.value)
    assert "earliest, latest" in str(info.value)


# --- live_containers --------------------------------------------------------------------------------------


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_live_containers_lists_running_pids_only(tmp_path: Path) -> None:
    (tmp_path / "container-0.pid").write_text(f"{os.getpid()}\n")
    (tmp_path / "container-1.pid").write_text(str(dead_pid()))
    (tmp_path / "container-2.pid").write_text("not a pid")
    (tmp_path / "other.pid").write_text(str(os.getpid()))  # not a container's pid file
    assert live_containers(tmp_path) == [f"container-0 (pid {os.getpid()})"]


def test_live_containers_empty_or_missing_dir(tmp_path: Path) -> None:
    assert live_containers(tmp_path) == []
    assert live_containers(tmp_path / "absent") == []
