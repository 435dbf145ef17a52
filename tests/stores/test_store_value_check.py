"""A key or value the store's serde cannot write fails at the `put`, not at the cache's later flush, with
a message naming the store, the type, the serde setting and the fix; what the serde's cheap check lets
through fails at the flush with a note that the entry was put earlier."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde
from samsa.serde.exceptions import SerializationError
from samsa.stores.cached import CachedStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.serialized import SerializedStore


def _cached(key_serde: Any, msg_serde: Any) -> Any:
    return CachedStore(SerializedStore(InMemoryStore("s"), key_serde, msg_serde), 100, 50)


_REFUSED = [
    (LongSerde(), "notanumber"),
    (LongSerde(), 2**63),
    (IntegerSerde(), 2**31),
    (LongSerde(), 1.5),
    (StringSerde(), 42),
    (StringSerde(), "\ud800"),  # a lone surrogate: not utf-8
    (BytesSerde(), "text"),
    (JsonSerde(), {1, 2}),
    (JsonSerde(), float("nan")),
]


@pytest.mark.parametrize(("serde", "bad"), _REFUSED, ids=[f"{s.name}-{b!r}" for s, b in _REFUSED])
def test_a_value_the_serde_refuses_fails_at_put(serde: Any, bad: Any) -> None:
    store = _cached(StringSerde(), serde)
    with pytest.raises(SerializationError) as info:
        store.put("k", bad)
    notes = "\n".join(info.value.__notes__)
    assert "in store 's': put('k', ...)" in notes
    assert f"the value is of type {type(bad).__name__}" in notes
    assert "stores.s.msg.serde" in notes and f"the {serde.name} serde" in notes
    assert store.get("k") is None, "the refused put left nothing behind"
    store.flush()  # nothing bad is held for later


def test_a_key_the_serde_refuses_fails_at_put_and_get() -> None:
    store = _cached(StringSerde(), LongSerde())
    with pytest.raises(SerializationError) as info:
        store.put(7, 1)
    assert any("the key is of type int" in n and "stores.s.key.serde" in n for n in info.value.__notes__)
    with pytest.raises(SerializationError):
        store.get(7)
    store.flush()


def test_values_the_serde_takes_pass_the_check() -> None:
    store = _cached(StringSerde(), LongSerde())
    store.put("a", 2**63 - 1)
    store.put("b", True)
    store.put("c", None)
    store.flush()
    assert store.get("a") == 2**63 - 1


def test_what_the_json_check_lets_through_fails_at_flush_saying_it_was_put_earlier() -> None:
    store = _cached(StringSerde(), JsonSerde())
    store.put("bad", {"inner": {1, 2}})  # the JSON check looks at the outer type only
    with pytest.raises(SerializationError) as info:
        store.flush()
    notes = "\n".join(info.value.__notes__)
    assert "put('bad', ...)" in notes and "the value is of type dict" in notes
    assert "put earlier and held in the object cache" in notes


def test_a_user_serde_without_a_check_still_fails_at_flush() -> None:
    class Strict:
        name = "strict"

        def to_bytes(self, obj: str) -> bytes:
            if not obj.startswith("ok"):
                raise SerializationError(self.name, f"refuses {obj!r}")
            return obj.encode()

        def from_bytes(self, data: bytes) -> str:
            return data.decode()

    store = _cached(StringSerde(), Strict())
    store.put("k", "bad")
    with pytest.raises(SerializationError) as info:
        store.flush()
    assert any("stores.s.msg.serde (the strict serde)" in n for n in info.value.__notes__)


def test_an_engine_failure_is_not_blamed_on_the_serdes() -> None:
    from samsa.stores.exceptions import StoreClosedError

    inner = InMemoryStore("s")
    store = SerializedStore(inner, StringSerde(), LongSerde())
    inner.close()
    with pytest.raises(StoreClosedError) as info:
        store.put("k", 1)
    assert info.value.__notes__ == ["in store 's': put('k', ...)"]


def test_a_flush_failure_at_a_commit_names_the_task() -> None:
    from samsa.stores.backend import TaskStoresContext
    from samsa.stores.storage_manager import TaskStorage

    store = _cached(StringSerde(), JsonSerde())
    store.put("bad", [{1, 2}])
    context = TaskStoresContext("job-1", "Partition 3", 3, {}, {})
    with pytest.raises(SerializationError) as info:
        TaskStorage(context, {"s": store}).flush()
    assert "task Partition 3: while flushing its stores for a commit" in info.value.__notes__
