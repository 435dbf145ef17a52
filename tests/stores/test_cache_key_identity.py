"""The object cache holds one entry per serialized key: keys of different types that a serde writes to the
same bytes (an enum member and its value) are one key, keys Python calls equal but the serde writes apart
(1, 1.0 and True under JSON) are several, and the last write of a key wins in the engine and changelog."""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Any

import pytest
from changelog_sends import Sent
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.serde.builtin import BytesSerde, JsonSerde, LongSerde, StringSerde
from samsa.stores.api import KeyValueStore
from samsa.stores.cached import CachedStore
from samsa.stores.logged import LoggedStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.serialized import SerializedStore


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


class Code(IntEnum):
    ONE = 1
    TWO = 2


def _cached(key_serde: Any, msg_serde: Any, engine: KeyValueStore[bytes, bytes] | None = None) -> Any:
    return CachedStore(
        SerializedStore(InMemoryStore("s") if engine is None else engine, key_serde, msg_serde), 100, 50
    )


def test_an_enum_key_and_its_plain_value_are_one_key() -> None:
    store = _cached(StringSerde(), StringSerde())
    store.put(Color.RED, "v1")
    assert store.get("red") == "v1"
    store.put("red", "v2")
    assert store.get(Color.RED) == "v2"
    assert list(store.all()) == [("red", "v2")]
    assert store.get(Color.RED) == "v2"


def test_the_last_write_wins_in_the_engine_and_the_changelog() -> None:
    engine, sent = InMemoryStore("s"), Sent()
    store = _cached(StringSerde(), StringSerde(), LoggedStore(engine, sent, "cl", 0))
    store.put("blue", "1")
    store.put(Color.BLUE, "2")
    store.put("blue", "3")
    store.flush()
    assert engine.get(b"blue") == b"3"
    assert sent.records == [(b"blue", b"3")], "one changelog record per key per flush, the last value"


def test_int_serdes_write_enum_members_and_bools_as_their_int() -> None:
    store = _cached(LongSerde(), LongSerde())
    store.put(Code.ONE, 10)
    assert store.get(1) == 10
    store.put(True, 11)  # the long serde writes True as 1
    assert store.get(1) == 11 and store.get(Code.ONE) == 11
    store.flush()
    assert dict(store.inner.inner.all()) == {LongSerde().to_bytes(1): LongSerde().to_bytes(11)}


def test_bytes_like_keys_are_one_key_under_the_bytes_serde() -> None:
    store = _cached(BytesSerde(), StringSerde())
    store.put(bytearray(b"k"), "a")
    assert store.get(b"k") == "a"
    store.put(memoryview(b"k"), "b")
    assert store.get(bytearray(b"k")) == "b"


def test_json_keys_equal_in_python_but_written_apart_stay_apart() -> None:
    store = _cached(JsonSerde(), JsonSerde())
    store.put(1, "int")
    store.put(True, "bool")
    store.put(1.0, "float")
    store.put(0.0, "zero")
    store.put(("a", 1), "tuple-int")
    store.put(("a", True), "tuple-bool")
    assert [store.get(k) for k in (1, True, 1.0, 0.0, -0.0)] == ["int", "bool", "float", "zero", None]
    assert store.get(("a", 1)) == "tuple-int" and store.get(("a", True)) == "tuple-bool"
    assert store.get(Code.ONE) == "int", "JSON writes an IntEnum as its int"


def test_json_keys_written_alike_are_one_key() -> None:
    store = _cached(JsonSerde(), JsonSerde())
    store.put((Color.RED, Code.TWO), "v1")
    assert store.get(("red", 2)) == "v1"
    store.put(["red", 2], "v2")  # a list writes as the tuple does
    assert store.get((Color.RED, 2)) == "v2"
    store.put(Color.BLUE, "b")
    assert store.get("blue") == "b"


class ByName:
    """A user serde writing a str subclass unlike its base (an enum by its name): only bytes tell keys
    apart, and it writes "RED" and Color.RED alike, "red" apart."""

    def to_bytes(self, obj: str) -> bytes:
        return (obj.name if isinstance(obj, Color) else obj).encode()

    def from_bytes(self, data: bytes) -> str:
        return data.decode()


def test_a_user_serde_is_trusted_only_through_its_bytes() -> None:
    store = _cached(ByName(), StringSerde())
    store.put(Color.RED, "enum")
    assert store.get("red") is None
    assert store.get("RED") == "enum"
    store.put("RED", "plain")
    assert store.get(Color.RED) == "plain"
    store.flush()
    assert dict(store.inner.inner.all()) == {b"RED": b"plain"}


_key_types = {
    "string": (StringSerde, st.one_of(st.sampled_from(["red", "blue", "x"]), st.sampled_from(list(Color)))),
    "long": (LongSerde, st.one_of(st.integers(0, 3), st.sampled_from(list(Code)), st.booleans())),
    "json": (
        JsonSerde,
        st.one_of(
            st.sampled_from(["red", "blue", "1"]),
            st.sampled_from(list(Color)),
            st.integers(0, 2),
            st.sampled_from(list(Code)),
            st.booleans(),
            st.sampled_from([0.0, -0.0, 1.0, 2.0]),
        ),
    ),
}
_op = st.sampled_from(["put", "put", "get", "delete", "delete_all", "flush"])


@pytest.mark.parametrize("serde", sorted(_key_types))
@settings(max_examples=150, deadline=None)
@given(data=st.data(), size=st.integers(1, 6), batch=st.integers(1, 6))
def test_the_cached_store_behaves_exactly_like_the_engine_without_a_cache(
    serde: str, data: st.DataObject, size: int, batch: int
) -> None:
    make_serde, keys = _key_types[serde]
    ops = data.draw(st.lists(st.tuples(_op, keys, st.integers(0, 9)), max_size=40))
    cached_engine, plain_engine = InMemoryStore("c"), InMemoryStore("p")
    cached_log, plain_log = Sent(), Sent()
    cached = CachedStore(
        SerializedStore(LoggedStore(cached_engine, cached_log, "cl", 0), make_serde(), LongSerde()),
        size,
        min(batch, size),
    )
    plain = SerializedStore(LoggedStore(plain_engine, plain_log, "cl", 0), make_serde(), LongSerde())
    for op, key, value in ops:
        if op == "put":
            cached.put(key, value)
            plain.put(key, value)
        elif op == "get":
            assert cached.get(key) == plain.get(key), f"get({key!r})"
        elif op == "delete":
            cached.delete(key)
            plain.delete(key)
        elif op == "delete_all":
            cached.delete_all([key])
            plain.delete_all([key])
        else:
            cached.flush()
            assert dict(cached_engine.all()) == dict(plain_engine.all())
    cached.flush()
    assert dict(cached_engine.all()) == dict(plain_engine.all())
    # The changelog may hold fewer records (one per key per flush) but compacts to the same state.
    assert dict(cached_log.records) == dict(plain_log.records)


def test_a_mutable_key_is_written_at_once_so_changing_it_later_changes_nothing() -> None:
    engine = InMemoryStore("s")
    store = _cached(JsonSerde(), JsonSerde(), engine)
    key = ["a", 1]
    store.put(key, "v")
    key.append(2)  # the task reuses its list
    store.flush()
    assert dict(engine.all()) == {b'["a",1]': b'"v"'}
    assert store.get(["a", 1]) == "v" and store.get(("a", 1)) == "v"
