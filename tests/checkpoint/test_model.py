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

from samsa.checkpoint.exceptions import CheckpointError
from samsa.checkpoint.model import Checkpoint, checkpoint_key, decode, encode, parse_key
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
