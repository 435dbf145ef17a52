"""In-memory engine specifics: iterators as of their call (copied only when written), the sorted-key cache."""

import pytest

from samsa.stores.exceptions import StoreClosedError
from samsa.stores.memory import InMemoryStore


def test_iterator_yields_the_store_as_of_the_call() -> None:
    store = InMemoryStore()
    store.put_all([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    it = store.all()
    store.put(b"b", b"2")
    store.delete(b"c")
    store.put(b"bb", b"added")
    assert list(it) == [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]


def test_iterators_copy_only_what_they_have_left_and_only_when_the_store_is_written() -> None:
    store = InMemoryStore()
    store.put_all([(bytes([i]), b"v") for i in range(10)])
    done, dropped, walking = store.all(), store.all(), store.range(b"\x02", b"\x08")
    assert list(done) == store_items(store)  # finished: forgotten
    del dropped  # abandoned: forgotten
    assert next(walking) == (b"\x02", b"v")
    assert len(store._readers) == 1
    data = store._data
    store.put(b"\x05", b"new")
    assert store._data is data, "the store's dict is written in place, never copied"
    assert not store._readers and len(walking._data) == 5  # the entries it had left, as they were
    assert list(walking) == [(bytes([i]), b"v") for i in range(3, 8)]


def store_items(store: InMemoryStore) -> list[tuple[bytes, bytes]]:
    return sorted(store._data.items())


def test_sorted_keys_follow_inserts_and_deletes() -> None:
    store = InMemoryStore()
    store.put(b"b", b"1")
    assert [k for k, _ in store.all()] == [b"b"]
    store.put(b"a", b"1")
    assert [k for k, _ in store.all()] == [b"a", b"b"]
    store.delete(b"b")
    assert [k for k, _ in store.all()] == [b"a"]
    store.put(b"b", b"again")
    assert list(store.range(b"a", b"c")) == [(b"a", b"1"), (b"b", b"again")]


def test_overwrite_keeps_the_sorted_key_list() -> None:
    store = InMemoryStore()
    store.put_all([(b"a", b"1"), (b"b", b"1")])
    list(store.all())
    cached = store._sorted
    store.put(b"a", b"2")
    store.delete(b"missing")
    assert store._sorted is cached
    assert len(store) == 2


def test_close_drops_the_data() -> None:
    store = InMemoryStore("s")
    store.put(b"a", b"1")
    store.close()
    assert len(store) == 0
    assert "closed" in repr(store)


def test_iterators_still_referenced_hold_no_entries_once_finished_or_closed() -> None:
    """A finished iterator, or one of a closed store, must not keep the store's entries alive (one that
    copied what it had left before a write keeps that copy while referenced)."""
    store = InMemoryStore("s")
    store.put_all([(bytes([i]), b"v") for i in range(10)])
    finished, walking = store.all(), store.all()
    list(finished)
    next(walking)
    store.put(b"\x05", b"new")  # `walking` now holds its own copy of what it has left
    held = store.all()
    next(held)
    store.close()
    assert finished._data == {} and held._data == {}
    for reader in (held, walking):  # a detached copy is never read again either
        with pytest.raises(StoreClosedError):
            next(reader)
