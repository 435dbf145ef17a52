"""The object cache layer: hits skip the store below, dirty entries go down in batches, flush writes all."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.serde.builtin import LongSerde, StringSerde
from samsa.stores.api import KeyValueStore
from samsa.stores.cached import CachedStore, cache_settings
from samsa.stores.exceptions import StoreConfigError
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.serialized import SerializedStore


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


class Recording(KeyValueStore[Any, Any]):
    """A dict store that records the calls the cache makes to it."""

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.calls: list[str] = []
        self.name = "rec"

    def get(self, key: Any) -> Any:
        self.calls.append(f"get {key}")
        return self.data.get(_hashable(key))

    def put(self, key: Any, value: Any) -> None:
        self.calls.append(f"put {key}")
        key = _hashable(key)
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        entries = list(entries)
        self.calls.append("put_all " + ",".join(str(k) for k, _ in entries))
        for key, value in entries:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        self.calls.append("range")
        return iter(sorted((k, v) for k, v in self.data.items() if from_key <= k < to_key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        self.calls.append("all")
        return iter(sorted(self.data.items()))

    def flush(self) -> None:
        self.calls.append("flush")

    def close(self) -> None:
        self.calls.append("close")


def test_a_hit_does_not_reach_the_store_below() -> None:
    inner = Recording()
    inner.data["a"] = 1
    cached = CachedStore(inner, 10, 5)
    assert cached.get("a") == 1
    assert cached.get("a") == 1
    assert cached.get("missing") is None
    assert cached.get("missing") is None, "absence is cached too"
    assert inner.calls == ["get a", "get missing"]


def test_writes_go_down_in_one_batch_at_write_batch_size() -> None:
    inner = Recording()
    cached = CachedStore(inner, 10, 3)
    cached.put("a", 1)
    cached.put("b", 2)
    cached.put("a", 3)  # the same key twice is one dirty entry
    assert inner.calls == []
    cached.put("c", 4)
    assert inner.calls == ["put_all a,b,c"]
    assert inner.data == {"a": 3, "b": 2, "c": 4}


def test_flush_writes_dirty_entries_then_flushes_below() -> None:
    inner = Recording()
    cached = CachedStore(inner, 10, 5)
    cached.put("a", 1)
    cached.delete("b")
    cached.flush()
    assert inner.calls == ["put_all a,b", "flush"]
    cached.flush()
    assert inner.calls[-1] == "flush" and inner.calls.count("put_all a,b") == 1


def test_evicting_a_dirty_entry_writes_it_first() -> None:
    inner = Recording()
    cached = CachedStore(inner, 2, 2)
    cached.put("a", 1)
    cached.get("x")  # a miss caches x; now a (dirty) is the oldest
    cached.get("y")  # over size: a must go, so it is written first
    assert inner.data == {"a": 1}
    assert "put_all a" in inner.calls
    assert cached.get("a") == 1


def test_recently_used_entries_survive_eviction() -> None:
    inner = Recording()
    inner.data.update({"a": 1, "b": 2, "c": 3})
    cached = CachedStore(inner, 2, 1)
    cached.get("a")
    cached.get("b")
    cached.get("a")  # a is now the most recent
    cached.get("c")  # evicts b
    inner.calls.clear()
    cached.get("a")
    cached.get("b")
    assert inner.calls == ["get b"]


def test_scans_see_every_write() -> None:
    inner = Recording()
    cached = CachedStore(inner, 10, 5)
    cached.put("b", 2)
    cached.put("a", 1)
    assert list(cached.range("a", "c")) == [("a", 1), ("b", 2)]
    cached.put("c", 3)
    assert list(cached.all()) == [("a", 1), ("b", 2), ("c", 3)]


def test_unhashable_keys_bypass_the_cache_in_order() -> None:
    inner = Recording()
    cached = CachedStore(inner, 10, 5)
    cached.put("a", 1)
    cached.put(["list", "key"], 2)  # type: ignore[arg-type]
    assert inner.calls == ["put_all a", "put ['list', 'key']"]
    assert cached.get(["list", "key"]) == 2  # type: ignore[arg-type]


def test_close_writes_dirty_entries() -> None:
    inner = Recording()
    cached = CachedStore(inner, 10, 5)
    cached.put("a", 1)
    cached.close()
    assert inner.calls == ["put_all a", "close"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"object.cache.size": "-1"}, r"stores\.s\.object\.cache\.size"),
        ({"object.cache.size": "ten"}, r"stores\.s\.object\.cache\.size"),
        ({"object.cache.size": "10", "write.batch.size": "20"}, r"stores\.s\.write\.batch\.size"),
        ({"write.batch.size": "0"}, r"stores\.s\.write\.batch\.size"),
    ],
)
def test_bad_cache_settings_name_the_key(options: dict[str, str], message: str) -> None:
    with pytest.raises(StoreConfigError, match=message):
        cache_settings("s", options)


def test_cache_settings_defaults_are_samzas() -> None:
    assert cache_settings("s", {}) == (1000, 500)
    assert cache_settings("s", {"object.cache.size": "0"}) == (0, 500)


def test_committed_writes_reach_rocksdb_and_survive_reopen(tmp_path: Path) -> None:
    def open_store() -> CachedStore[str, int]:
        engine = RocksDbStore(tmp_path / "db", name="counts")
        return CachedStore(SerializedStore(engine, StringSerde(), LongSerde()), 100, 50)

    store = open_store()
    expected = {}
    for i in range(30):
        store.put(f"k{i % 7}", i)
        expected[f"k{i % 7}"] = i
    store.flush()
    store.close()
    reopened = open_store()
    assert {key: reopened.get(key) for key in expected} == expected
    reopened.close()


_ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "get", "range", "flush"]),
        st.text(alphabet="abcd", min_size=1, max_size=2),
        st.integers(0, 9),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(ops=_ops, size=st.integers(1, 5), batch=st.integers(1, 5))
def test_cached_rocksdb_behaves_like_a_dict(
    tmp_path_factory: pytest.TempPathFactory, ops, size, batch
) -> None:
    batch = min(batch, size)
    path = tmp_path_factory.mktemp("cache")
    store = CachedStore(
        SerializedStore(RocksDbStore(path / "db", name="m"), StringSerde(), LongSerde()), size, batch
    )
    model: dict[str, int] = {}
    for op, key, value in ops:
        if op == "put":
            store.put(key, value)
            model[key] = value
        elif op == "delete":
            store.delete(key)
            model.pop(key, None)
        elif op == "get":
            assert store.get(key) == model.get(key)
        elif op == "range":
            assert list(store.range("a", key)) == sorted((k, v) for k, v in model.items() if "a" <= k < key)
        else:
            store.flush()
    store.close()
    below = SerializedStore(RocksDbStore(path / "db", name="m"), StringSerde(), LongSerde())
    assert dict(below.all()) == model, "after close, the engine holds exactly the model"
    below.close()


def test_in_memory_engine_under_the_cache() -> None:
    store = CachedStore(SerializedStore(InMemoryStore("m"), StringSerde(), LongSerde()), 4, 2)
    for i in range(10):
        store.put(f"k{i}", i)
    assert [store.get(f"k{i}") for i in range(10)] == list(range(10))


def test_keys_equal_in_python_but_not_in_bytes_stay_apart() -> None:
    from samsa.serde.builtin import JsonSerde

    store = CachedStore(SerializedStore(InMemoryStore("m"), JsonSerde(), JsonSerde()), 10, 5)
    store.put(1, "one")
    assert store.get(True) is None, "JSON writes 1 and true differently"
    assert store.get(1.0) is None
    assert store.get(1) == "one"


def test_an_unhashable_write_drops_cached_entries_it_may_alias() -> None:
    from samsa.serde.builtin import JsonSerde

    store = CachedStore(SerializedStore(InMemoryStore("m"), JsonSerde(), JsonSerde()), 10, 5)
    store.put((1, 2), "tuple")
    store.put([1, 2], "list")  # the same JSON bytes as (1, 2)
    assert store.get((1, 2)) == "list"


def test_a_value_its_serde_rejects_is_named_with_its_key_when_written_down() -> None:
    from samsa.serde.builtin import JsonSerde
    from samsa.serde.exceptions import SerializationError

    store = CachedStore(SerializedStore(InMemoryStore("m"), StringSerde(), JsonSerde()), 10, 2)
    store.put("bad", {"inner": {1, 2}})  # the JSON check looks at the outer type only
    with pytest.raises(SerializationError) as info:
        store.put("next", 1)  # the batch goes down here
    notes = "\n".join(info.value.__notes__)
    assert "'bad'" in notes and "'m'" in notes
    assert "held in the object cache" in notes


def test_use_after_close_fails_at_once() -> None:
    from samsa.stores.exceptions import StoreClosedError

    store = CachedStore(SerializedStore(InMemoryStore("m"), StringSerde(), LongSerde()), 10, 5)
    store.close()
    store.close()
    with pytest.raises(StoreClosedError):
        store.put("a", 1)
    with pytest.raises(StoreClosedError):
        store.get("a")
