"""`delete_all(keys)` (Samza's `deleteAll`) on every store implementation: the keys go, absent keys are
no-ops, a logged store writes a tombstone per key, and read-only views refuse it like their other writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from changelog_sends import Sent

from samsa.adjunct.versioned import VersionedStore
from samsa.exactly_once.overlay import OverlayStore
from samsa.serde.builtin import LongSerde, StringSerde
from samsa.stores.api import KeyValueStore
from samsa.stores.cached import CachedStore
from samsa.stores.exceptions import ReadOnlyStoreError, StoreClosedError
from samsa.stores.logged import LoggedStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.readonly import ReadOnlyStore
from samsa.stores.serialized import SerializedStore
from samsa.stores.snapshot_gate import SnapshotGate


def _filled(store: KeyValueStore[bytes, bytes]) -> KeyValueStore[bytes, bytes]:
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    return store


def test_engines_delete_the_keys(engine: KeyValueStore[bytes, bytes]) -> None:
    _filled(engine).delete_all(iter([b"a", b"c", b"missing"]))  # any iterable, absent keys ignored
    assert dict(engine.all()) == {b"b": b"2"}
    engine.delete_all([])
    assert dict(engine.all()) == {b"b": b"2"}


def test_a_logged_store_writes_a_tombstone_per_key(engine: KeyValueStore[bytes, bytes]) -> None:
    sent = Sent()
    store = _filled(LoggedStore(engine, sent, "cl", 0))
    sent.records.clear()
    store.delete_all([b"a", b"b"])
    assert dict(engine.all()) == {b"c": b"3"}
    assert sent.records == [(b"a", None), (b"b", None)]


def test_the_typed_and_cached_layers_delete_through_to_the_changelog() -> None:
    engine, sent = InMemoryStore("s"), Sent()
    typed = SerializedStore(LoggedStore(engine, sent, "cl", 0), StringSerde(), LongSerde())
    cached = CachedStore(typed, 10, 5)
    cached.put_all([("a", 1), ("b", 2), ("c", 3)])
    cached.flush()
    sent.records.clear()
    cached.delete_all(["a", "b", "missing"])
    assert cached.get("a") is None and cached.get("c") == 3, "the cache sees the deletes at once"
    cached.flush()
    assert dict(engine.all()) == {b"c": LongSerde().to_bytes(3)}
    assert sorted(sent.records) == [(b"a", None), (b"b", None), (b"missing", None)]
    typed.delete_all(["c"])
    assert dict(engine.all()) == {}


def test_the_exactly_once_overlay_holds_tombstones_until_commit(engine: KeyValueStore[bytes, bytes]) -> None:
    overlay = OverlayStore(_filled(engine))
    overlay.delete_all([b"a", b"b"])
    assert dict(overlay.all()) == {b"c": b"3"}
    assert engine.get(b"a") == b"1", "nothing reaches the store below before the commit"
    overlay.commit()
    assert dict(engine.all()) == {b"c": b"3"}


def test_the_snapshot_gate_deletes_while_held_and_after(engine: KeyValueStore[bytes, bytes]) -> None:
    gate = SnapshotGate(_filled(engine))
    gate.hold()
    gate.delete_all([b"a"])
    assert engine.get(b"a") == b"1" and gate.get(b"a") is None
    gate.release()
    gate.delete_all([b"b"])
    assert dict(engine.all()) == {b"c": b"3"}


def test_read_only_views_refuse_it() -> None:
    inner = _filled(InMemoryStore("adj"))
    view = ReadOnlyStore(inner, "adj", "stream kafka.feed")
    with pytest.raises(ReadOnlyStoreError, match="'adj' is read-only"):
        view.delete_all([b"a"])
    assert inner.get(b"a") == b"1"


def test_a_versioned_adjunct_reader_refuses_it(tmp_path: Path) -> None:
    versions = VersionedStore(tmp_path, lambda path: InMemoryStore("ds"), "ds")
    versions.write([(b"a", b"1")], 0)
    versions.seal(1)
    reader = versions.reader()
    with pytest.raises(ReadOnlyStoreError, match="'ds' is read-only"):
        reader.delete_all([b"a"])
    assert reader.get(b"a") == b"1"
    versions.close()


def test_a_closed_cached_store_refuses_it() -> None:
    store = CachedStore(SerializedStore(InMemoryStore("s"), StringSerde(), LongSerde()), 10, 5)
    store.close()
    with pytest.raises(StoreClosedError):
        store.delete_all(["a"])
    with pytest.raises(StoreClosedError):
        store.put_all([("a", 1)])
