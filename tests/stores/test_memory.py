"""In-memory engine specifics: its documented iteration semantics and the sorted-key cache."""

from samsa.stores.memory import InMemoryStore


def test_iterator_sees_updated_values_and_skips_deleted_keys() -> None:
    store = InMemoryStore()
    store.put_all([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    it = store.all()
    store.put(b"b", b"2")
    store.delete(b"c")
    store.put(b"bb", b"added")
    assert list(it) == [(b"a", b"1"), (b"b", b"2")]


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
