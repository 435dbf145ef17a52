"""The on-disk buffer of early arrivals: round trips, torn tails, crashes, the size bound, drain order,
discards, and the crash rule (a restart replays nothing from the buffer, and nothing twice)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from samsa.exactly_once.buffer import (
    DEFAULT_BUFFER_MAX_BYTES,
    BufferedMessage,
    EosBuffer,
    buffer_dir,
)
from samsa.exactly_once.exceptions import EosBufferError
from samsa.kafka.message import SimpleMessage
from samsa.streams import SystemStreamPartition

SSP0 = SystemStreamPartition("kafka", "words", 0)
SSP1 = SystemStreamPartition("kafka", "words", 1)

ssps = st.builds(
    SystemStreamPartition,
    st.sampled_from(["kafka", "k2"]),
    st.text(min_size=1, max_size=8),
    st.integers(0, 2**31 - 1),
)
messages = st.builds(
    BufferedMessage,
    ssps,
    st.integers(0, 2**63 - 1),
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    st.none()
    | st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3).map(tuple),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)


def msg(offset: int, ssp: SystemStreamPartition = SSP0, size: int = 10) -> BufferedMessage:
    return BufferedMessage(
        ssp, offset, f"k{offset}".encode(), bytes(size), (("h", b"v"),), 1_700_000_000_000 + offset
    )


@pytest.fixture
def tmpdir_() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"), key=lambda p: int(p.stem.split("-")[1]))


def test_the_default_bound_is_the_documented_one() -> None:
    assert DEFAULT_BUFFER_MAX_BYTES == 1073741824
    assert buffer_dir("/state/job/Partition 0") == Path("/state/job/Partition 0/eos-buffer")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), messages), max_size=20))
def test_round_trip_per_version_in_append_order(appends: list[tuple[int, BufferedMessage]]) -> None:
    with tempfile.TemporaryDirectory() as d, EosBuffer(d, segment_bytes=300) as buf:
        for version, m in appends:
            buf.append(version, m)
        assert buf.messages == len(appends)
        assert buf.versions() == sorted({v for v, _ in appends})
        for version in buf.versions():
            assert list(buf.drain(version)) == [m for v, m in appends if v == version]
        assert buf.messages == 0 and buf.bytes_used == 0 and buf.versions() == []
        assert not list(Path(d).iterdir())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), messages), max_size=15))
def test_a_reopened_buffer_holds_what_was_appended(appends: list[tuple[int, BufferedMessage]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        with EosBuffer(d) as buf:
            for version, m in appends:
                buf.append(version, m)
            used, first = buf.bytes_used, buf.first_offsets()
        with EosBuffer(d) as again:
            assert again.truncated_bytes == 0
            assert again.messages == len(appends) and again.bytes_used == used
            assert again.first_offsets() == first
            assert sum(f.stat().st_size for f in Path(d).iterdir()) == used
            for version in again.versions():
                assert list(again.drain(version)) == [m for v, m in appends if v == version]


def test_raw_messages_go_in_and_come_out_as_consumed_records(tmpdir_: Path) -> None:
    raw = SimpleMessage("words", 0, 42, b"k", b"v", timestamp_ms=1234, headers=[("a", b"1"), ("b", None)])
    untimed = SimpleMessage("words", 0, 43, None, None)
    with EosBuffer(tmpdir_) as buf:
        buf.append(2, BufferedMessage.of(SSP0, raw))
        buf.append(2, BufferedMessage.of(SSP0, untimed))
        first, second = (m.as_raw() for m in buf.drain(2))
    assert (first.topic(), first.partition(), first.offset(), first.key(), first.value()) == (
        "words",
        0,
        42,
        b"k",
        b"v",
    )
    assert first.timestamp() == raw.timestamp() and list(first.headers() or ()) == [("a", b"1"), ("b", None)]
    assert second.timestamp() == untimed.timestamp() and second.headers() is None and second.key() is None


def test_drain_spans_segments_and_reopens_in_append_order(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_, segment_bytes=200) as buf:
        for o in range(10):
            buf.append(3, msg(o))
        assert len(segment_files(tmpdir_)) > 3
    with EosBuffer(tmpdir_, segment_bytes=200) as buf:
        # Appends after a reopen go to new segments, read after the recovered ones.
        for o in range(10, 15):
            buf.append(3, msg(o))
        buf.append(4, msg(99))
        assert [m.offset for m in buf.drain(3)] == list(range(15))
        assert buf.versions() == [4] and buf.messages == 1


def test_a_torn_last_entry_is_cut_off_at_open(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        for o in range(2):
            buf.append(2, msg(o))
        last = buf.bytes_used
        buf.append(2, msg(2))
        frame = buf.bytes_used - last
    (seg,) = segment_files(tmpdir_)
    os.truncate(seg, last + frame - 5)
    with EosBuffer(tmpdir_) as buf:
        assert buf.messages == 2 and buf.truncated_bytes == frame - 5
        assert seg.stat().st_size == buf.bytes_used == last
        buf.append(2, msg(7))
        assert [m.offset for m in buf.drain(2)] == [0, 1, 7]


def test_a_damaged_last_entry_fails_its_crc_and_is_cut_off(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        for o in range(3):
            buf.append(2, msg(o))
        one = (buf.bytes_used - 5) // 3
    (seg,) = segment_files(tmpdir_)
    data = bytearray(seg.read_bytes())
    data[-3] ^= 0xFF
    seg.write_bytes(bytes(data))
    with EosBuffer(tmpdir_) as buf:
        assert buf.messages == 2 and buf.truncated_bytes == one
        assert [m.offset for m in buf.drain(2)] == [0, 1]


def test_a_segment_cut_inside_its_file_header_is_removed(tmpdir_: Path) -> None:
    (tmpdir_ / "v5-0.seg").write_bytes(b"SE")
    (tmpdir_ / "notes.txt").write_text("not ours")
    with EosBuffer(tmpdir_) as buf:
        assert buf.messages == 0 and buf.truncated_bytes == 2 and buf.versions() == []
    assert not (tmpdir_ / "v5-0.seg").exists()
    assert (tmpdir_ / "notes.txt").exists()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=12), st.data())
def test_a_crash_cut_at_any_byte_keeps_exactly_the_whole_entries(
    sizes: list[int], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as d:
        with EosBuffer(d) as buf:
            ends = []
            for o, size in enumerate(sizes):
                buf.append(1, msg(o, size=size))
                ends.append(buf.bytes_used)
        (seg,) = segment_files(Path(d))
        cut = data.draw(st.integers(0, seg.stat().st_size), label="cut")
        os.truncate(seg, cut)
        kept = sum(1 for end in ends if end <= cut)
        with EosBuffer(d) as again:
            assert again.messages == kept
            # A cut inside the 5-byte file header removes the segment; after it, an empty segment stays.
            expected = ends[kept - 1] if kept else (5 if cut >= 5 else 0)
            assert again.bytes_used == expected
            assert again.truncated_bytes == cut - expected
            again.append(1, msg(1000))
            assert [m.offset for m in again.drain(1)] == [*range(kept), 1000]


_CRASHING_WRITER = textwrap.dedent(
    """
    import os, random, sys
    from samsa.exactly_once.buffer import BufferedMessage, EosBuffer
    from samsa.streams import SystemStreamPartition
    seed, directory = int(sys.argv[1]), sys.argv[2]
    rng = random.Random(seed)
    buf = EosBuffer(directory, segment_bytes=20_000)
    for offset in range(rng.randrange(1, 200)):
        version = rng.randrange(1, 4)
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 3000)))
        ssp = SystemStreamPartition("kafka", "s", version)
        buf.append(version, BufferedMessage(ssp, offset, b"k", value))
        print(version, offset, len(value), flush=True)
    os._exit(0)  # a crash: nothing buffered in the open segments is flushed
    """
)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_process_dying_mid_append_leaves_a_prefix_of_each_version(tmpdir_: Path, seed: int) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CRASHING_WRITER, str(seed), str(tmpdir_)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    written: dict[int, list[int]] = {}
    for line in out.splitlines():
        version, offset, _ = map(int, line.split())
        written.setdefault(version, []).append(offset)
    with EosBuffer(tmpdir_) as buf:
        recovered = 0
        for version in buf.versions():
            got = [m.offset for m in buf.drain(version)]
            # Whole segments that rolled over are there, the open one up to its last flushed entry.
            assert got == written[version][: len(got)]
            recovered += len(got)
        assert recovered < sum(map(len, written.values()))


def test_the_size_bound(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_, max_bytes=500) as buf:
        assert not buf.over_limit
        while not buf.over_limit:
            before = buf.bytes_used
            buf.append(2, msg(buf.messages, size=40))
        assert before < 500 <= buf.bytes_used
        # The caller pauses; what it fetched before that is still taken.
        buf.append(3, msg(100, size=40))
        assert buf.over_limit
        buf.discard(3)
        assert buf.over_limit
        buf.discard(2)
        assert not buf.over_limit and buf.bytes_used == 0
    with pytest.raises(EosBufferError, match=r"task\.eos\.buffer\.max\.bytes is 0"):
        EosBuffer(tmpdir_, max_bytes=0)


def test_bytes_used_is_what_lies_on_disk(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_, segment_bytes=300) as buf:
        for o in range(20):
            buf.append(1 + o % 3, msg(o))
        buf.close()
        assert buf.bytes_used == sum(p.stat().st_size for p in segment_files(tmpdir_))


def test_discard_and_discard_above(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        for v in (2, 3, 4, 5):
            buf.append(v, msg(v))
        buf.discard(3)
        buf.discard(9)  # nothing there: no error
        assert buf.versions() == [2, 4, 5] and buf.messages == 3
        buf.discard_above(3)
        assert buf.versions() == [2] and buf.messages_of(2) == 1 and buf.messages_of(4) == 0
        assert [p.name for p in segment_files(tmpdir_)] == ["v2-0.seg"]
        buf.clear()
        assert buf.messages == 0 and not segment_files(tmpdir_)


def test_first_offsets_follow_appends_and_discards(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        assert buf.first_offset(SSP0) is None and buf.first_offsets() == {}
        buf.append(3, msg(10, SSP0))
        buf.append(2, msg(12, SSP0))
        buf.append(3, msg(13, SSP1))
        assert buf.first_offsets() == {SSP0: 10, SSP1: 13}
        buf.discard(3)
        assert buf.first_offsets() == {SSP0: 12} and buf.first_offset(SSP1) is None


def test_drain_removes_its_version_only_once_all_were_handed_out(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        for o in range(3):
            buf.append(2, msg(o))
        buf.append(3, msg(9))
        it = buf.drain(2)
        assert next(it).offset == 0
        with pytest.raises(EosBufferError, match="while that version is being drained"):
            buf.append(2, msg(5))
        with pytest.raises(EosBufferError, match="while it is drained"):
            buf.discard(2)
        it.close()  # abandoned: nothing goes
        assert buf.messages_of(2) == 3
        assert [m.offset for m in buf.drain(2)] == [0, 1, 2]
        assert buf.versions() == [3] and [p.name for p in segment_files(tmpdir_)] == ["v3-1.seg"]
        assert list(buf.drain(7)) == []


def test_a_damaged_segment_fails_its_drain_naming_the_file(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        for o in range(3):
            buf.append(2, msg(o))
        buf.close()
        (seg,) = segment_files(tmpdir_)
        data = bytearray(seg.read_bytes())
        data[20] ^= 0xFF
        seg.write_bytes(bytes(data))
        with pytest.raises(EosBufferError, match=rf"{seg.name} is damaged at byte 5 of {len(data)}"):
            list(buf.drain(2))


def test_foreign_and_newer_segments_are_refused_naming_the_file(tmpdir_: Path) -> None:
    (tmpdir_ / "v1-0.seg").write_bytes(b"XXXX\x01")
    with pytest.raises(EosBufferError, match=r"v1-0\.seg is not an exactly-once buffer segment"):
        EosBuffer(tmpdir_)
    (tmpdir_ / "v1-0.seg").write_bytes(b"SEOS\x02")
    with pytest.raises(EosBufferError, match=r"v1-0\.seg has segment format 2.*delete"):
        EosBuffer(tmpdir_)


def test_an_entry_with_a_valid_crc_but_a_bad_body_is_refused(tmpdir_: Path) -> None:
    import struct
    import zlib

    body = b"\x00" * 7
    (tmpdir_ / "v1-0.seg").write_bytes(b"SEOS\x01" + struct.pack(">II", len(body), zlib.crc32(body)) + body)
    with pytest.raises(EosBufferError, match=r"v1-0\.seg holds a malformed entry at byte 5"):
        EosBuffer(tmpdir_)


def test_a_negative_version_is_refused(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf, pytest.raises(EosBufferError, match="version -1"):
        buf.append(-1, msg(0))


def test_reset_to_checkpoint_empties_the_buffer(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        buf.append(3, msg(4, SSP0))  # left over from a drain the crash cut short: version <= checkpoint
        buf.append(5, msg(10, SSP0))
        buf.append(6, msg(12, SSP1))
    with EosBuffer(tmpdir_) as buf:
        assert buf.reset_to_checkpoint(4, {SSP0: 10, SSP1: 11}) == 3
        assert buf.messages == 0 and not segment_files(tmpdir_)


def test_reset_to_checkpoint_refuses_a_checkpoint_that_passed_a_buffered_message(tmpdir_: Path) -> None:
    with EosBuffer(tmpdir_) as buf:
        buf.append(5, msg(10, SSP0))
        with pytest.raises(
            EosBufferError, match=r"resumes kafka\.words#0 at offset 11, past the message at offset 10"
        ):
            buf.reset_to_checkpoint(4, {SSP0: 11})
        assert buf.messages == 1


class BufferModel(RuleBasedStateMachine):
    """The buffer against a dict of lists, through appends, drains, discards, reopens and torn tails."""

    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.buf = EosBuffer(self._dir.name, segment_bytes=400)
        self.model: dict[int, list[BufferedMessage]] = {}
        self.offset = 0

    @rule(version=st.integers(1, 4), size=st.integers(0, 120), ssp=st.sampled_from([SSP0, SSP1]))
    def append(self, version: int, size: int, ssp: SystemStreamPartition) -> None:
        m = msg(self.offset, ssp, size)
        self.offset += 1
        self.buf.append(version, m)
        self.model.setdefault(version, []).append(m)

    @rule(version=st.integers(1, 4))
    def drain(self, version: int) -> None:
        assert list(self.buf.drain(version)) == self.model.pop(version, [])

    @rule(version=st.integers(0, 4))
    def discard_above(self, version: int) -> None:
        self.buf.discard_above(version)
        self.model = {v: ms for v, ms in self.model.items() if v <= version}

    @rule()
    def reopen(self) -> None:
        self.buf.close()
        self.buf = EosBuffer(self._dir.name, segment_bytes=400)
        assert self.buf.truncated_bytes == 0

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def crash_with_a_torn_tail(self, data: st.DataObject) -> None:
        self.buf.close()
        version = data.draw(st.sampled_from(sorted(v for v, ms in self.model.items() if ms)))
        last = segment_files(Path(self._dir.name))
        last = [p for p in last if p.name.startswith(f"v{version}-")][-1:]
        # Tear the last entry of the version's newest segment when that segment holds it.
        size = last[0].stat().st_size
        if size > 5:
            os.truncate(last[0], size - 1)
            # Only the version's last appended entry can lie at the end of its newest segment.
            self.model[version].pop()
        self.buf = EosBuffer(self._dir.name, segment_bytes=400)
        assert self.buf.truncated_bytes > 0 or size <= 5

    @invariant()
    def counts_match(self) -> None:
        assert self.buf.messages == sum(map(len, self.model.values()))
        assert self.buf.versions() == sorted(v for v, ms in self.model.items() if ms)
        firsts: dict[SystemStreamPartition, int] = {}
        for ms in self.model.values():
            for m in ms:
                firsts[m.ssp] = min(firsts.get(m.ssp, m.offset), m.offset)
        assert self.buf.first_offsets() == firsts

    def teardown(self) -> None:
        self.buf.close()
        self._dir.cleanup()


TestBufferModel = BufferModel.TestCase
TestBufferModel.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# -- the crash rule, end to end ------------------------------------------------------------------------------


class Task:
    """A minimal exactly-once consumer of pre-tagged partitions, using the real buffer: processes messages of
    its current version, buffers later ones, drops older ones; checkpoints version c once every message of
    version <= c on every partition was read (the markers' promise), capping offsets at `first_offset`."""

    def __init__(self, directory: Path, inputs: dict[SystemStreamPartition, list[int]]) -> None:
        self.directory, self.inputs = directory, inputs
        self.buf = EosBuffer(directory, segment_bytes=256)
        self.committed: list[tuple[SystemStreamPartition, int]] = []
        self.checkpoint = (0, {ssp: 0 for ssp in inputs})
        self.current = 1
        self.pos = dict(self.checkpoint[1])
        self.uncommitted: list[tuple[SystemStreamPartition, int]] = []

    def read(self, ssp: SystemStreamPartition) -> None:
        offset = self.pos[ssp]
        version = self.inputs[ssp][offset]
        self.pos[ssp] += 1
        if version == self.current:
            self.uncommitted.append((ssp, offset))
        elif version > self.current:
            self.buf.append(version, BufferedMessage(ssp, offset, None, str(version).encode()))

    def can_checkpoint(self) -> bool:
        return self.current <= 5 and all(
            all(v > self.current for v in versions[self.pos[ssp] :]) for ssp, versions in self.inputs.items()
        )

    def take_checkpoint(self) -> None:
        firsts = self.buf.first_offsets()
        offsets = {ssp: min(pos, firsts.get(ssp, pos)) for ssp, pos in self.pos.items()}
        self.committed += self.uncommitted
        self.uncommitted = []
        self.checkpoint = (self.current, offsets)
        self.current += 1
        for m in self.buf.drain(self.current):
            assert int(m.value or b"") == self.current
            self.uncommitted.append((m.ssp, m.offset))

    def crash(self, rng: random.Random) -> None:
        self.buf.close()
        files = segment_files(self.directory)
        if files:  # a torn tail somewhere
            victim = rng.choice(files)
            os.truncate(victim, rng.randrange(victim.stat().st_size + 1))
        self.buf = EosBuffer(self.directory, segment_bytes=256)
        version, offsets = self.checkpoint
        self.buf.reset_to_checkpoint(version, offsets)
        self.uncommitted = []
        self.current = version + 1
        self.pos = dict(offsets)


partition_versions = st.lists(
    st.lists(st.integers(1, 5), min_size=1, max_size=12).map(sorted), min_size=1, max_size=3
).flatmap(
    # Producers' nondecreasing versions interleaved at random on one shared partition.
    lambda producers: st.permutations([(i, v) for i, vs in enumerate(producers) for v in vs]).map(
        lambda tagged: _interleave(producers, tagged)
    )
)


def _interleave(producers: list[list[int]], order: list[tuple[int, int]]) -> list[int]:
    queues = [list(vs) for vs in producers]
    return [queues[i].pop(0) for i, _ in order]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(partition_versions, min_size=1, max_size=3), st.randoms(use_true_random=False), st.integers(0, 6)
)
def test_crashes_replay_nothing_twice_and_lose_nothing(
    partitions: list[list[int]], rng: random.Random, crashes: int
) -> None:
    inputs = {SystemStreamPartition("kafka", "mid", p): versions for p, versions in enumerate(partitions)}
    with tempfile.TemporaryDirectory() as d:
        task = Task(Path(d), inputs)
        while True:
            readable = [ssp for ssp, vs in inputs.items() if task.pos[ssp] < len(vs)]
            choices = ["read"] * 4 * bool(readable) + ["checkpoint"] * task.can_checkpoint()
            choices += ["crash"] * (crashes > 0)
            if not choices:
                break
            step = rng.choice(choices)
            if step == "read":
                task.read(rng.choice(readable))
            elif step == "checkpoint":
                task.take_checkpoint()
            else:
                crashes -= 1
                task.crash(rng)
        assert task.buf.messages == 0
        task.buf.close()
    every = sorted((ssp, o) for ssp, vs in inputs.items() for o in range(len(vs)))
    assert sorted(task.committed) == every
