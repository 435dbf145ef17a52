"""Built-in serdes: round trips, exact bytes, errors and tombstones."""

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde
from samsa.serde.exceptions import DeserializationError, SerializationError

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.binary())
def test_bytes_round_trip(data: bytes) -> None:
    serde = BytesSerde()
    assert serde.from_bytes(serde.to_bytes(data)) == data


@given(st.binary())
def test_bytes_accepts_bytearray_and_memoryview(data: bytes) -> None:
    serde = BytesSerde()
    assert serde.to_bytes(bytearray(data)) == data
    assert serde.to_bytes(memoryview(data)) == data
    assert type(serde.to_bytes(memoryview(data))) is bytes


def test_bytes_is_identity_for_bytes() -> None:
    data = b"abc"
    assert BytesSerde().to_bytes(data) is data


def test_bytes_refuses_str() -> None:
    with pytest.raises(SerializationError, match=r"expected bytes.*got str") as info:
        BytesSerde().to_bytes("abc")  # type: ignore[call-overload]
    assert info.value.serde == "bytes"


@given(st.text())
def test_string_round_trip(text: str) -> None:
    serde = StringSerde()
    assert serde.from_bytes(serde.to_bytes(text)) == text


def test_string_is_utf8_by_default_and_honours_encoding() -> None:
    assert StringSerde().to_bytes("é") == b"\xc3\xa9"
    assert StringSerde("latin-1").to_bytes("é") == b"\xe9"
    assert StringSerde("latin-1").from_bytes(b"\xe9") == "é"


def test_string_errors_keep_the_cause() -> None:
    with pytest.raises(DeserializationError, match="not valid utf-8") as info:
        StringSerde().from_bytes(b"\xff\xfe")
    assert isinstance(info.value.__cause__, UnicodeDecodeError)
    assert "utf-8" in info.value.reason
    with pytest.raises(SerializationError, match="expected str, got int"):
        StringSerde().to_bytes(7)  # type: ignore[call-overload]
    with pytest.raises(SerializationError, match="not encodable"):
        StringSerde().to_bytes("\ud800")  # a lone surrogate has no utf-8 form


@given(JSON.filter(lambda v: v is not None))
def test_json_round_trip(value: Any) -> None:
    serde = JsonSerde()
    assert serde.from_bytes(serde.to_bytes(value)) == value


def test_json_is_compact_utf8() -> None:
    assert JsonSerde().to_bytes({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'.encode()


@pytest.mark.parametrize("value", [math.nan, math.inf, {1, 2}, object()])
def test_json_refuses_values_json_cannot_hold(value: Any) -> None:
    with pytest.raises(SerializationError, match="JSON-compatible"):
        JsonSerde().to_bytes(value)


@pytest.mark.parametrize("data", [b"{", b"\xff", b""])
def test_json_refuses_bad_documents(data: bytes) -> None:
    with pytest.raises(DeserializationError, match="utf-8 JSON"):
        JsonSerde().from_bytes(data)


@given(INT32)
def test_integer_round_trip(value: int) -> None:
    serde = IntegerSerde()
    assert serde.from_bytes(serde.to_bytes(value)) == value


@given(INT64)
def test_long_round_trip(value: int) -> None:
    serde = LongSerde()
    assert serde.from_bytes(serde.to_bytes(value)) == value


def test_integer_and_long_are_big_endian_signed_like_samza() -> None:
    assert IntegerSerde().to_bytes(1) == b"\x00\x00\x00\x01"
    assert IntegerSerde().to_bytes(-2) == b"\xff\xff\xff\xfe"
    assert IntegerSerde().to_bytes(0x01020304) == b"\x01\x02\x03\x04"
    assert LongSerde().to_bytes(1) == b"\x00" * 7 + b"\x01"
    assert LongSerde().to_bytes(-1) == b"\xff" * 8
    assert LongSerde().from_bytes(b"\x80" + b"\x00" * 7) == -(2**63)


@pytest.mark.parametrize(("serde", "value"), [(IntegerSerde(), 2**31), (LongSerde(), -(2**63) - 1)])
def test_integer_and_long_refuse_out_of_range(serde: IntegerSerde | LongSerde, value: int) -> None:
    with pytest.raises(SerializationError, match=r"signed .*-bit range"):
        serde.to_bytes(value)


@pytest.mark.parametrize(("serde", "size"), [(IntegerSerde(), 4), (LongSerde(), 8)])
def test_integer_and_long_need_exact_width(serde: IntegerSerde | LongSerde, size: int) -> None:
    with pytest.raises(DeserializationError, match=f"expected {size} bytes, got {size + 1}"):
        serde.from_bytes(b"\x00" * (size + 1))


@pytest.mark.parametrize("serde", [BytesSerde(), StringSerde(), JsonSerde(), IntegerSerde(), LongSerde()])
def test_tombstones_pass_through(serde: Any) -> None:
    assert serde.to_bytes(None) is None
    assert serde.from_bytes(None) is None
