"""The exactly-once wire format: round trips, sizes, control records recognised from the header alone, and
clear errors for headers this version did not write."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.exactly_once.exceptions import ExactlyOnceError, ProtocolError
from samsa.exactly_once.protocol import (
    FORMAT_VERSION,
    HEADER,
    Marker,
    Producer,
    RecordTag,
    RestoreCommand,
    Retired,
    classify,
    classify_message,
    control_value,
    decode,
    encode,
    headers_for,
    job_id_of,
    producer_name,
    record_header,
)
from samsa.exceptions import SamsaError
from samsa.kafka.message import SimpleMessage

u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(0, 2**32 - 1)
record_tags = st.builds(RecordTag, u64, u32, u64, u64)
markers = st.builds(Marker, u64, u32, u64, u64, u64, u32)
restores = st.builds(RestoreCommand, u64, u32, u64, u64, u64, u32)
retireds = st.builds(Retired, u64, u32, u64, u64, u64, u32)
tags = st.one_of(record_tags, markers, restores, retireds)
other_headers = st.lists(
    st.tuples(st.text(max_size=12).filter(lambda n: n != HEADER), st.none() | st.binary(max_size=16)),
    max_size=4,
)


@given(tags)
def test_encode_decode_round_trip(tag: RecordTag | Marker | RestoreCommand) -> None:
    data = encode(tag)
    assert data[0] == FORMAT_VERSION
    assert decode(data) == tag
    assert type(decode(data)) is type(tag)


@given(tags, other_headers, st.data())
def test_classify_finds_the_tag_among_other_headers(
    tag: RecordTag | Marker | RestoreCommand, others: list[tuple[str, bytes | None]], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(others)))
    headers = [*others[:at], *headers_for(tag), *others[at:]]
    assert classify(headers) == tag


@given(record_tags)
def test_the_fast_record_header_equals_the_general_encoding(tag: RecordTag) -> None:
    header = record_header(tag.producer, tag.generation, tag.version, tag.sequence)
    assert header == (HEADER, encode(tag))
    assert classify([header]) == tag


def test_sizes_are_fixed_and_small() -> None:
    assert len(encode(RecordTag(1, 2, 3, 4))) == 30
    assert len(encode(Marker(1, 2, 3, 4, 5, 6))) == 42
    assert len(encode(RestoreCommand(1, 2, 3, 4, 5, 6))) == 42


def test_markers_and_restores_are_told_apart_from_the_header_alone() -> None:
    marker = Marker(7, 1, 5, sequence=10, job=3, tasks=4)
    restore = RestoreCommand(7, 1, 5, sequence=10, job=3, tasks=4)
    # Same fields, different kinds: the kind byte alone separates them.
    assert encode(marker)[2:] == encode(restore)[2:]
    assert isinstance(classify(headers_for(marker)), Marker)
    assert isinstance(classify(headers_for(restore)), RestoreCommand)
    assert classify(headers_for(RecordTag(7, 1, 5, 11))) == RecordTag(7, 1, 5, 11)


@pytest.mark.parametrize("headers", [None, [], [("trace", b"x")], [("samsa.eos2", b"\x01\x00")]])
def test_a_record_without_the_header_is_not_exactly_once(headers: list[tuple[str, bytes]] | None) -> None:
    assert classify(headers) is None


def test_an_unknown_format_version_names_the_header_and_says_what_to_do() -> None:
    data = bytes([FORMAT_VERSION + 1]) + encode(RecordTag(1, 2, 3, 4))[1:]
    with pytest.raises(ProtocolError, match=r"samsa\.eos header has format version 2.*upgrade"):
        classify([(HEADER, data)])


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (None, "null value"),
        (b"", "0 bytes, too short"),
        (b"\x01", "1 bytes, too short"),
        (bytes([FORMAT_VERSION, 9]) + bytes(28), "unknown kind 9"),
        (bytes([FORMAT_VERSION, 0]) + bytes(40), "data record holds 42 bytes, expected 30"),
        (bytes([FORMAT_VERSION, 1]) + bytes(28), "marker holds 30 bytes, expected 42"),
        (bytes([FORMAT_VERSION, 2]) + bytes(3), "restore command holds 5 bytes, expected 42"),
    ],
)
def test_malformed_headers_raise_a_protocol_error(data: bytes | None, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem) as info:
        classify([("other", b""), (HEADER, data)])
    assert HEADER in str(info.value)
    assert isinstance(info.value, ExactlyOnceError) and isinstance(info.value, SamsaError)


def test_two_tags_on_one_record_are_refused() -> None:
    headers = headers_for(RecordTag(1, 1, 1, 1)) + headers_for(RecordTag(1, 1, 1, 2))
    with pytest.raises(ProtocolError, match=r"more than one samsa\.eos header"):
        classify(headers)


@given(st.binary(max_size=50))
def test_arbitrary_bytes_decode_or_raise_a_protocol_error(data: bytes) -> None:
    try:
        tag = decode(data)
    except ProtocolError:
        return
    assert encode(tag) == data


def test_classify_message_names_the_record() -> None:
    msg = SimpleMessage("words", 3, 1234, b"k", b"v", headers=[(HEADER, b"\x07\x00")])
    with pytest.raises(
        ProtocolError, match=r"record words#3@1234: the samsa\.eos header has format version 7"
    ):
        classify_message(msg)
    ok = SimpleMessage("words", 3, 1235, b"k", b"v", headers=headers_for(RecordTag(1, 2, 3, 4)))
    assert classify_message(ok) == RecordTag(1, 2, 3, 4)


@pytest.mark.parametrize(
    "tag",
    [
        RecordTag(-1, 0, 0, 0),
        RecordTag(0, 2**32, 0, 0),
        RecordTag(0, 0, 2**64, 0),
        Marker(0, 0, 0, tasks=2**32),
        RestoreCommand(0, 0, 0, job=-5),
    ],
)
def test_out_of_range_fields_are_refused_at_encoding(tag: RecordTag | Marker | RestoreCommand) -> None:
    with pytest.raises(ProtocolError, match=r"cannot encode .* generation and tasks in \[0, 2\*\*32\)"):
        encode(tag)


def test_record_header_refuses_out_of_range_fields_too() -> None:
    with pytest.raises(ProtocolError, match="cannot encode RecordTag"):
        record_header(1, -1, 0, 0)


def test_encode_refuses_other_objects() -> None:
    with pytest.raises(ProtocolError, match="not a RecordTag, Marker, RestoreCommand or Retired"):
        encode((1, 2, 3, 4))  # type: ignore[arg-type]


def test_producer_ids_are_stable_and_unique_across_jobs_and_tasks() -> None:
    a = Producer.of("split", "1", "Partition 0")
    assert a == Producer.of("split", "1", "Partition 0")
    assert a.name == "split-1/Partition 0"
    others = [
        Producer.of("split", "1", "Partition 1"),
        Producer.of("split", "2", "Partition 0"),
        Producer.of("split2", "1", "Partition 0"),
        # The separator cannot be forged by moving text between the parts.
        Producer.of("split1", "", "Partition 0"),
    ]
    assert len({a.id, *(p.id for p in others)}) == 5
    assert a.job == job_id_of("split", "1") == others[0].job
    assert a.job != others[1].job
    assert 0 <= a.id < 2**64 and 0 <= a.job < 2**64
    # The ids fit the header.
    assert classify(headers_for(Marker(a.id, 0, 1, job=a.job, tasks=2))) == Marker(a.id, 0, 1, 0, a.job, 2)


def test_control_values_carry_the_readable_producer_name() -> None:
    p = Producer.of("count", "7", "Partition 3")
    assert producer_name(p.control_value()) == "count-7/Partition 3"
    assert control_value("é") == "é".encode()
    assert producer_name(None) == producer_name(b"") == ""
    assert producer_name(b"\xff") == "\ufffd"


def test_the_header_layout_is_big_endian_and_documented() -> None:
    # Pins the bytes: other implementations (and older Samsa versions) read exactly this.
    data = encode(Marker(0x0102030405060708, 9, 10, 11, 12, 13))
    assert data == struct.pack(">BBQIQQQI", 1, 1, 0x0102030405060708, 9, 10, 11, 12, 13)
    assert encode(RecordTag(1, 2, 3, 4)) == b"\x01\x00" + struct.pack(">QIQQ", 1, 2, 3, 4)


def test_a_retired_record_is_a_control_record_of_its_own_kind() -> None:
    retired = Retired(7, 3, 12, sequence=40, job=5, tasks=4)
    data = encode(retired)
    # The marker layout within format version 1, kind 3: told apart by the kind byte alone.
    assert data == struct.pack(">BBQIQQQI", FORMAT_VERSION, 3, 7, 3, 12, 40, 5, 4)
    assert encode(Marker(7, 3, 12, 40, 5, 4))[2:] == data[2:]
    found = classify(headers_for(retired))
    assert type(found) is Retired and found == retired
    assert found != Marker(7, 3, 12, 40, 5, 4)


def test_a_reader_that_predates_the_retired_kind_refuses_it_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    # A reader of format version 1 from before the retired kind knew kinds 0-2 only.
    import samsa.exactly_once.protocol as protocol

    monkeypatch.setattr(protocol, "_CONTROL_KINDS", frozenset((1, 2)))
    monkeypatch.setattr(protocol, "_KIND_NAMES", {0: "data record", 1: "marker", 2: "restore command"})
    with pytest.raises(ProtocolError, match=r"samsa\.eos header has unknown kind 3 .*upgrade the consuming"):
        classify(headers_for(Retired(7, 3, 12)))
