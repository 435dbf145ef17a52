"""The KeyValueStore contract, checked on both bytes engines (RocksDB in tmp_path, in-memory)."""

import gc

import pytest

from samsa.stores.api import KeyValueStore
from samsa.stores.exceptions import StoreClosedError

Store = KeyValueStore[bytes, bytes]


def fill(store: Store, *keys: bytes) -> None:
    for key in keys:
        store.put(key, b"v-" + key)


def test_get_absent_is_none(engine: Store) -> None:
    assert engine.get(b"nope") is None


def test_put_then_get_and_overwrite(engine: Store) -> None:
    engine.put(b"k", b"1")
    engine.put(b"k", b"2")
    assert engine.get(b"k") == b"2"


def test_empty_value_is_a_value_not_a_delete(engine: Store) -> None:
    engine.put(b"k", b"")
    assert engine.get(b"k") == b""
    assert list(engine.all()) == [(b"k", b"")]


def test_put_none_deletes(engine: Store) -> None:
    engine.put(b"k", b"1")
    engine.put(b"k", None)
    assert engine.get(b"k") is None
    assert list(engine.all()) == []


def test_delete_and_delete_absent(engine: Store) -> None:
    fill(engine, b"a", b"b")
    engine.delete(b"a")
    engine.delete(b"never-there")
    assert engine.get(b"a") is None
    assert [k for k, _ in engine.all()] == [b"b"]


def test_put_all_with_deletes(engine: Store) -> None:
    fill(engine, b"gone")
    engine.put_all([(b"x", b"1"), (b"y", b"2"), (b"gone", None), (b"x", b"3")])
    assert list(engine.all()) == [(b"x", b"3"), (b"y", b"2")]


def test_put_all_accepts_a_generator_and_empty(engine: Store) -> None:
    engine.put_all([])
    engine.put_all((bytes([i]), b"v") for i in range(3))
    assert [k for k, _ in engine.all()] == [b"\x00", b"\x01", b"\x02"]


def test_get_all_leaves_missing_keys_out(engine: Store) -> None:
    fill(engine, b"a", b"c")
    assert engine.get_all([b"a", b"b", b"c"]) == {b"a": b"v-a", b"c": b"v-c"}
    assert engine.get_all([]) == {}


def test_all_is_ordered_by_unsigned_bytes(engine: Store) -> None:
    keys = [b"\xff", b"b", b"a\x00", b"a", b"", b"\x00", b"B"]
    fill(engine, *keys)
    assert [k for k, _ in engine.all()] == sorted(keys)


def test_range_includes_from_excludes_to(engine: Store) -> None:
    fill(engine, b"a", b"b", b"c", b"d")
    assert [k for k, _ in engine.range(b"b", b"d")] == [b"b", b"c"]


def test_range_bounds_need_not_exist(engine: Store) -> None:
    fill(engine, b"a", b"b", b"c", b"d")
    assert [k for k, _ in engine.range(b"a\x00", b"c\x00")] == [b"b", b"c"]
    assert [k for k, _ in engine.range(b"", b"\xff")] == [b"a", b"b", b"c", b"d"]


def test_range_prefix_boundaries(engine: Store) -> None:
    fill(engine, b"ab", b"abc", b"ab\xff", b"ac")
    assert [k for k, _ in engine.range(b"ab", b"ac")] == [b"ab", b"abc", b"ab\xff"]


def test_range_empty_or_inverted(engine: Store) -> None:
    fill(engine, b"a", b"b")
    assert list(engine.range(b"b", b"b")) == []
    assert list(engine.range(b"b", b"a")) == []
    assert list(engine.range(b"x", b"z")) == []


def test_range_values(engine: Store) -> None:
    fill(engine, b"a", b"b")
    assert list(engine.range(b"a", b"z")) == [(b"a", b"v-a"), (b"b", b"v-b")]


def test_deleted_keys_do_not_appear_in_range(engine: Store) -> None:
    fill(engine, b"a", b"b", b"c")
    engine.delete(b"b")
    assert [k for k, _ in engine.range(b"a", b"z")] == [b"a", b"c"]


def test_abandoned_iterators_leave_the_store_usable(engine: Store) -> None:
    fill(engine, *(bytes([i]) for i in range(50)))
    for _ in range(100):
        it = engine.range(b"\x00", b"\x30")
        next(it)
        del it
    gc.collect()
    engine.put(b"\x01", b"new")
    assert engine.get(b"\x01") == b"new"
    assert len(list(engine.all())) == 50


def test_deleting_while_iterating_is_safe(engine: Store) -> None:
    fill(engine, b"a", b"b", b"c", b"d")
    seen = []
    for key, _ in engine.all():
        seen.append(key)
        engine.delete(key)
        engine.delete(b"d")
    # Both engines yield the keys present at the call, deleted since or not.
    assert seen == [b"a", b"b", b"c", b"d"]
    assert list(engine.all()) == []


def test_insert_while_iterating_is_not_seen(engine: Store) -> None:
    fill(engine, b"a", b"c")
    seen = []
    for key, _ in engine.all():
        seen.append(key)
        engine.put(b"b", b"late")
    assert seen == [b"a", b"c"]
    assert engine.get(b"b") == b"late"


def test_use_after_close_raises(engine: Store) -> None:
    engine.put(b"k", b"v")
    engine.close()
    engine.close()  # idempotent
    with pytest.raises(StoreClosedError, match="'test' is closed"):
        engine.get(b"k")
    with pytest.raises(StoreClosedError):
        engine.put(b"k", b"v")
    with pytest.raises(StoreClosedError):
        engine.put(b"k", None)
    with pytest.raises(StoreClosedError):
        engine.delete(b"k")
    with pytest.raises(StoreClosedError):
        engine.all()
    with pytest.raises(StoreClosedError):
        engine.range(b"a", b"z")
    with pytest.raises(StoreClosedError):
        engine.flush()


def test_iterator_used_after_close_raises(engine: Store) -> None:
    fill(engine, b"a", b"b", b"c")
    it = engine.all()
    assert next(it)[0] == b"a"
    engine.close()
    with pytest.raises(StoreClosedError):
        next(it)


def test_exhausted_iterator_stays_exhausted(engine: Store) -> None:
    fill(engine, b"a")
    it = engine.all()
    assert list(it) == [(b"a", b"v-a")]
    assert list(it) == []


def test_flush_keeps_data(engine: Store) -> None:
    fill(engine, b"a")
    engine.flush()
    assert engine.get(b"a") == b"v-a"


def test_context_manager_closes(engine: Store) -> None:
    with engine as store:
        store.put(b"a", b"1")
    with pytest.raises(StoreClosedError):
        engine.get(b"a")
