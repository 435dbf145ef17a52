"""Fast paths give the same bytes as the serdes, and failures still get the serde's own error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.serde.base import explain, fast_from_bytes, fast_to_bytes
from samsa.serde.builtin import IntegerSerde, JsonSerde, LongSerde, StringSerde
from samsa.serde.exceptions import DeserializationError, SerializationError


@given(st.text())
def test_string_fast_paths_match(text: str) -> None:
    for serde in (StringSerde(), StringSerde("utf-16")):
        assert fast_to_bytes(serde)(text) == serde.to_bytes(text)
        assert fast_from_bytes(serde)(serde.to_bytes(text)) == text


@given(st.integers(-(2**63), 2**63 - 1))
def test_long_fast_path_matches(n: int) -> None:
    assert fast_to_bytes(LongSerde())(n) == LongSerde().to_bytes(n)


def test_serdes_without_fast_paths_use_their_methods() -> None:
    serde = JsonSerde()
    assert fast_to_bytes(serde) == serde.to_bytes
    long_serde = LongSerde()
    assert fast_from_bytes(long_serde) == long_serde.from_bytes
    with pytest.raises(DeserializationError):  # the exact-width check stays on the read path
        fast_from_bytes(long_serde)(b"\x00\x01")


@pytest.mark.parametrize(
    ("serde", "obj", "expected"),
    [
        (StringSerde(), 42, "expected str"),
        (IntegerSerde(), 2**40, "signed 32-bit"),
        (LongSerde(), "7", "int"),
    ],
)
def test_a_failed_fast_encode_is_explained_by_the_serde(serde, obj, expected) -> None:
    with pytest.raises(Exception) as terse:
        fast_to_bytes(serde)(obj)
    described = explain(serde.to_bytes, obj, terse.value)
    assert isinstance(described, SerializationError)
    assert expected in str(described)


def test_a_failed_fast_decode_is_explained_by_the_serde() -> None:
    serde = StringSerde()
    with pytest.raises(UnicodeDecodeError) as terse:
        fast_from_bytes(serde)(b"\xff\xfe")
    described = explain(serde.from_bytes, b"\xff\xfe", terse.value)
    assert isinstance(described, DeserializationError) and "utf-8" in str(described)


def test_explain_returns_the_original_when_the_serde_accepts() -> None:
    error = RuntimeError("elsewhere")
    assert explain(StringSerde().to_bytes, "fine", error) is error


@pytest.mark.parametrize(
    ("key_serde", "msg_serde", "passthrough"),
    [
        ("bytes", "bytes", True),
        ("string", "json", True),
        ("long", "string", True),
        ("json", "string", False),  # JSON keys: the producer's bytes need not be the store's
        ("string", "avro", False),
        (None, "string", False),
    ],
)
def test_raw_passthrough_only_for_serdes_that_keep_keys_byte_for_byte(key_serde, msg_serde, passthrough):
    from samsa.serde.base import raw_passthrough

    assert raw_passthrough(key_serde, msg_serde) is passthrough


@pytest.mark.parametrize("serde", ["bytes", "string", "integer", "long"])
def test_the_canonical_key_serdes_round_trip_their_bytes(serde):
    from samsa.serde.registry import SerdeRegistry

    codec = SerdeRegistry({}).get(serde)
    samples = {
        "bytes": b"\x00\xffk",
        "string": "kéy".encode(),
        "integer": b"\x00\x00\x00\x07",
        "long": bytes(8),
    }
    raw = samples[serde]
    assert codec.to_bytes(codec.from_bytes(raw)) == raw
