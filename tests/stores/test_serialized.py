"""SerializedStore: typed keys and values over a bytes engine, with tiny fake serdes."""

import json
from typing import Any

import pytest

from samsa.stores.api import KeyValueStore
from samsa.stores.exceptions import StoreClosedError, StoreSerdeMismatchError
from samsa.stores.memory import InMemoryStore
from samsa.stores.serialized import SerializedStore


class StrSerde:
    def to_bytes(self, obj: str) -> bytes:
        if not isinstance(obj, str):
            raise TypeError(f"not a str: {obj!r}")
        return obj.encode()

    def from_bytes(self, data: bytes) -> str:
        return data.decode()


class JsonSerde:
    def __init__(self) -> None:
        self.calls = 0

    def to_bytes(self, obj: Any) -> bytes:
        self.calls += 1
        return json.dumps(obj).encode()

    def from_bytes(self, data: bytes) -> Any:
        self.calls += 1
        return json.loads(data)


def typed(engine: KeyValueStore[bytes, bytes]) -> SerializedStore[str, Any]:
    return SerializedStore(engine, StrSerde(), JsonSerde())


def test_round_trip_stores_serialized_bytes(engine: KeyValueStore[bytes, bytes]) -> None:
    store = typed(engine)
    store.put("word", {"n": 1})
    assert store.get("word") == {"n": 1}
    assert engine.get(b"word") == b'{"n": 1}'


def test_absent_and_none(engine: KeyValueStore[bytes, bytes]) -> None:
    serde = JsonSerde()
    store: SerializedStore[str, Any] = SerializedStore(engine, StrSerde(), serde)
    assert store.get("missing") is None
    store.put("k", 1)
    store.put("k", None)  # deletes; the value serde never sees None
    assert store.get("k") is None
    assert engine.get(b"k") is None
    assert serde.calls == 1


def test_falsy_values_are_values(engine: KeyValueStore[bytes, bytes]) -> None:
    store = typed(engine)
    store.put("zero", 0)
    store.put("empty", "")
    assert store.get("zero") == 0
    assert store.get("empty") == ""


def test_delete(engine: KeyValueStore[bytes, bytes]) -> None:
    store = typed(engine)
    store.put("a", 1)
    store.delete("a")
    assert store.get("a") is None


def test_put_all_and_get_all(engine: KeyValueStore[bytes, bytes]) -> None:
    store = typed(engine)
    store.put("old", 0)
    store.put_all([("a", 1), ("b", [2]), ("old", None)])
    assert store.get_all(["a", "b", "old", "nope"]) == {"a": 1, "b": [2]}


def test_range_and_all_follow_serialized_key_order(engine: KeyValueStore[bytes, bytes]) -> None:
    store = typed(engine)
    for n in (9, 10, 100, 2):
        store.put(str(n), n)
    # "10" < "100" < "2" < "9" as bytes: the order is the serialized one, not the numeric one.
    assert [k for k, _ in store.all()] == ["10", "100", "2", "9"]
    assert list(store.range("100", "9")) == [("100", 100), ("2", 2)]


def test_iterator_abandoned_then_store_closed(engine: KeyValueStore[bytes, bytes]) -> None:
    store = typed(engine)
    store.put_all([("a", 1), ("b", 2)])
    it = store.all()
    assert next(it) == ("a", 1)
    store.close()
    with pytest.raises(StoreClosedError):
        next(it)


def test_flush_and_close_reach_the_engine() -> None:
    engine = InMemoryStore("counts")
    store = typed(engine)
    assert store.name == "counts"
    assert store.inner is engine
    store.flush()
    store.close()
    with pytest.raises(StoreClosedError):
        engine.get(b"a")


def test_serde_errors_propagate_with_a_note_naming_store_and_key() -> None:
    store = typed(InMemoryStore("counts"))
    with pytest.raises(TypeError) as info:
        store.put(42, 1)  # type: ignore[arg-type]
    assert any("'counts'" in note and "put(42" in note for note in info.value.__notes__)


def test_bad_stored_bytes_name_the_key_when_read() -> None:
    engine = InMemoryStore("counts")
    engine.put(b"k", b"not json")
    store = typed(engine)
    # Bytes the serde cannot read: the serde changed under stored data (test_store_serde_mismatch.py).
    with pytest.raises(StoreSerdeMismatchError, match=r"get\('k'\)") as info:
        store.get("k")
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(StoreSerdeMismatchError, match="iterating at key 'k'"):
        list(store.all())


def test_a_wrong_type_through_the_fast_path_gets_the_serdes_error_and_names_the_store() -> None:
    from samsa.serde.builtin import LongSerde, StringSerde
    from samsa.serde.exceptions import SerializationError
    from samsa.stores.memory import InMemoryStore

    store = SerializedStore(InMemoryStore("counts"), StringSerde(), LongSerde())
    with pytest.raises(SerializationError, match="expected str") as info:
        store.put(7, 1)  # type: ignore[arg-type]
    assert any("counts" in note for note in info.value.__notes__)
    with pytest.raises(SerializationError, match="int"):
        store.put("k", "one")  # type: ignore[arg-type]
