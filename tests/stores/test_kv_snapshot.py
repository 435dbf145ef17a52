"""`snapshot(from, to)` (Samza's `KeyValueSnapshot`) on both engines under every layer: each `iterator()`
walks the range as of the call, whatever is written since; closing the snapshot or the store ends it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pytest
from changelog_sends import Sent
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from samsa.adjunct.versioned import VersionedStore
from samsa.exactly_once.overlay import OverlayStore
from samsa.serde.builtin import BytesSerde, LongSerde, StringSerde
from samsa.stores.api import KeyValueSnapshot, KeyValueStore
from samsa.stores.cached import CachedStore
from samsa.stores.exceptions import SnapshotClosedError, StoreClosedError
from samsa.stores.logged import LoggedStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.readonly import ReadOnlyStore
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.serialized import SerializedStore
from samsa.stores.snapshot_gate import SnapshotGate

Store = KeyValueStore[bytes, bytes]
Entries = list[tuple[bytes, bytes]]


@dataclass
class Stack:
    """A store as a task sees it (`store`), what writes to it (`writer`, closed to close it all), and the
    system's step that moves held writes below (`settle`: a commit, a checkpoint's release)."""

    store: Store
    writer: Store
    settle: Callable[[], object]


def _typed(below: Store) -> SerializedStore[bytes, bytes]:
    return SerializedStore(below, BytesSerde(), BytesSerde())


def build(name: str, engine: Store) -> Stack:
    """The stack `name` over `engine`."""
    if name == "engine":
        return Stack(engine, engine, engine.flush)
    if name == "logged":
        logged = LoggedStore(engine, Sent(), "cl", 0)
        return Stack(logged, logged, logged.flush)
    if name in ("gate", "gate-held"):
        gate = SnapshotGate(engine)
        if name == "gate-held":
            gate.hold()  # writes wait in memory, as while a commit takes the checkpoint
        return Stack(gate, gate, gate.release)
    if name == "overlay":
        overlay = OverlayStore(engine)
        return Stack(overlay, overlay, overlay.commit)
    if name == "serialized":
        typed = _typed(engine)
        return Stack(typed, typed, typed.flush)
    if name == "cached":
        cached = CachedStore(_typed(engine), 100, 50)  # large enough that the tests' writes stay dirty
        return Stack(cached, cached, cached.flush)
    if name == "runtime":  # the exactly-once stack of the storage manager, top to bottom
        overlay = OverlayStore(LoggedStore(SnapshotGate(engine), Sent(), "cl", 0))
        full = CachedStore(_typed(overlay), 100, 50)

        def commit() -> None:
            full.flush()
            overlay.commit()

        return Stack(full, full, commit)
    assert name == "read-only"
    return Stack(ReadOnlyStore(engine, "test", "stream kafka.feed"), engine, engine.flush)


STACKS = ["engine", "logged", "gate", "gate-held", "overlay", "serialized", "cached", "runtime", "read-only"]


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest, engine: Store) -> Stack:
    return build(request.param, engine)


def fill(stack: Stack, *keys: bytes) -> None:
    stack.writer.put_all([(key, b"v-" + key) for key in keys])


def entries(*keys: bytes) -> Entries:
    return [(key, b"v-" + key) for key in keys]


def test_writes_and_deletes_after_the_snapshot_are_not_seen(stack: Stack) -> None:
    fill(stack, b"a", b"b", b"c", b"d", b"e")
    snapshot = stack.store.snapshot(b"b", b"e")
    before = snapshot.iterator()
    writer = stack.writer
    writer.put(b"c", b"changed")
    writer.delete(b"b")
    writer.put(b"bb", b"new")
    writer.put_all([(b"d", None), (b"b\x00", b"new")])
    writer.delete_all([b"c"])
    stack.settle()
    writer.flush()
    expected = entries(b"b", b"c", b"d")
    assert list(before) == expected
    assert list(snapshot.iterator()) == expected
    assert list(stack.store.range(b"b", b"e")) == [(b"b\x00", b"new"), (b"bb", b"new")], "the store moved on"
    snapshot.close()


def test_iterators_agree_and_a_partial_walk_resumes_after_a_full_one(stack: Stack) -> None:
    fill(stack, b"a", b"b", b"c", b"d")
    snapshot = stack.store.snapshot(b"", b"\xff")
    first = snapshot.iterator()
    assert [next(first), next(first)] == entries(b"a", b"b")
    stack.writer.put(b"c", b"changed")
    stack.writer.delete(b"d")
    stack.settle()
    assert list(snapshot.iterator()) == entries(b"a", b"b", b"c", b"d")
    assert list(first) == entries(b"c", b"d")
    third, fourth = snapshot.iterator(), snapshot.iterator()  # interleaved walks
    assert [next(third), next(fourth), next(third)] == entries(b"a", b"a", b"b")
    assert list(fourth) == entries(b"b", b"c", b"d")
    assert list(third) == entries(b"c", b"d")
    snapshot.close()
    snapshot.close()  # idempotent


def test_an_empty_or_reversed_range_is_empty(stack: Stack) -> None:
    fill(stack, b"a", b"b", b"c")
    for low, high in ((b"b", b"b"), (b"c", b"a")):
        with stack.store.snapshot(low, high) as snapshot:
            assert list(snapshot.iterator()) == []
            assert list(snapshot.iterator()) == []


def test_use_after_close_raises(stack: Stack) -> None:
    fill(stack, b"a", b"b")
    snapshot = stack.store.snapshot(b"a", b"z")
    walking = snapshot.iterator()
    assert next(walking) == (b"a", b"v-a")
    snapshot.close()
    with pytest.raises(SnapshotClosedError, match="take a new one"):
        snapshot.iterator()
    with pytest.raises(StoreClosedError):
        next(walking)
    assert stack.store.get(b"a") == b"v-a", "the store stays open"


def test_closing_the_store_ends_it(stack: Stack) -> None:
    fill(stack, b"a", b"b", b"c")
    walked, fresh = stack.store.snapshot(b"a", b"z"), stack.store.snapshot(b"a", b"z")
    assert list(walked.iterator()) == entries(b"a", b"b", b"c")  # read whole: replayed from memory
    walking = fresh.iterator()
    next(walking)
    stack.writer.close()
    for snapshot in (walked, fresh):
        with pytest.raises(StoreClosedError):
            snapshot.iterator()
    with pytest.raises(StoreClosedError):
        next(walking)
    with pytest.raises(StoreClosedError):
        stack.store.snapshot(b"a", b"z")
    fresh.close()
    walked.close()


def test_the_cache_writes_its_dirty_entries_before_the_snapshot(engine: Store) -> None:
    cached = CachedStore(SerializedStore(engine, StringSerde(), LongSerde()), 100, 50)
    cached.put_all([("a", 1), ("b", 2), ("c", 3)])
    assert list(engine.all()) == [], "the writes are still dirty in the cache"
    snapshot = cached.snapshot("a", "c")
    cached.put("a", 10)
    cached.put("bb", 20)
    cached.flush()
    assert list(snapshot.iterator()) == [("a", 1), ("b", 2)], "typed by the serdes, as a range is"
    assert list(snapshot.iterator()) == [("a", 1), ("b", 2)]
    snapshot.close()


def test_keys_are_bounded_and_ordered_by_their_serialized_form(engine: Store) -> None:
    typed: SerializedStore[int, str] = SerializedStore(engine, LongSerde(), StringSerde())
    typed.put_all([(-1, "minus"), (1, "one"), (300, "many")])
    with typed.snapshot(0, 1000) as snapshot:  # LongSerde is big-endian two's complement: -1 sorts last
        assert list(snapshot.iterator()) == [(1, "one"), (300, "many")]
    with typed.snapshot(1, -1) as snapshot:
        assert list(snapshot.iterator()) == [(1, "one"), (300, "many")]


def test_a_snapshot_under_a_checkpoint_holds_across_its_release(engine: Store) -> None:
    gate = SnapshotGate(engine)
    gate.put_all([(b"a", b"1"), (b"b", b"2")])
    gate.hold()
    gate.put(b"c", b"3")
    snapshot = gate.snapshot(b"a", b"z")
    gate.put(b"a", b"changed")
    gate.release()
    gate.delete(b"b")  # settles: the held writes go into the engine
    assert engine.get(b"a") == b"changed"
    assert list(snapshot.iterator()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]


def test_an_overlay_snapshot_merges_both_sides_as_of_the_call(engine: Store) -> None:
    engine.put_all([(b"a", b"1"), (b"b", b"2"), (b"d", b"4")])
    overlay = OverlayStore(engine)
    overlay.put_all([(b"b", None), (b"c", b"3"), (b"d", b"40")])
    snapshot = overlay.snapshot(b"a", b"z")
    overlay.put(b"e", b"5")
    overlay.commit()
    engine.put(b"a", b"10")
    expected = [(b"a", b"1"), (b"c", b"3"), (b"d", b"40")]
    assert list(snapshot.iterator()) == expected
    overlay.discard()
    assert list(snapshot.iterator()) == expected


@pytest.mark.parametrize("kind", ["rocksdb", "inmemory"])
def test_an_adjunct_reader_keeps_the_version_of_its_snapshot(kind: str, tmp_path: Path) -> None:
    def engine(path: Path) -> Store:
        return RocksDbStore(path, name="ds") if kind == "rocksdb" else InMemoryStore("ds")

    versions = VersionedStore(tmp_path / "ds", engine, "ds")
    reader = versions.reader()
    with reader.snapshot(b"a", b"z") as empty:  # no version sealed yet
        assert list(empty.iterator()) == []
    versions.write([(b"a", b"1"), (b"b", b"2")], 0)
    versions.seal(1)
    snapshot = reader.snapshot(b"a", b"z")
    versions.write([(b"a", b"new")], 2)
    versions.seal(3)
    assert reader.get(b"a") == b"new"
    assert list(snapshot.iterator()) == [(b"a", b"1"), (b"b", b"2")]
    if kind == "rocksdb":
        assert (tmp_path / "ds" / "v1").exists(), "the snapshot keeps its version's files"
    snapshot.close()
    assert not (tmp_path / "ds" / "v1").exists(), "closing the snapshot drops the replaced version"
    kept, empty = reader.snapshot(b"a", b"z"), reader.snapshot(b"x", b"z")
    versions.close()
    for ended in (kept, empty):
        with pytest.raises(StoreClosedError):
            ended.iterator()


def test_a_rocksdb_store_closed_under_a_snapshot_can_reopen(tmp_path: Path) -> None:
    store = RocksDbStore(tmp_path / "db", name="s")
    store.put_all([(b"a", b"1"), (b"b", b"2")])
    snapshot = store.snapshot(b"a", b"z")
    next(snapshot.iterator())
    store.close()  # releases the snapshot's RocksDB iterator, and with it the database's lock
    reopened = RocksDbStore(tmp_path / "db", name="s")
    assert reopened.get(b"b") == b"2"
    reopened.close()


def test_a_store_without_its_own_snapshot_gets_a_copy_of_the_range() -> None:
    class DictStore(KeyValueStore[bytes, bytes]):
        """A custom engine that implements only the abstract methods."""

        def __init__(self) -> None:
            self.data: dict[bytes, bytes] = {}

        def get(self, key: bytes) -> bytes | None:
            return self.data.get(key)

        def put(self, key: bytes, value: bytes | None) -> None:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value

        def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
            return ((k, self.data[k]) for k in sorted(self.data) if from_key <= k < to_key)

        def all(self) -> Iterator[tuple[bytes, bytes]]:
            return iter(sorted(self.data.items()))

        def flush(self) -> None: ...

        def close(self) -> None: ...

    store = DictStore()
    store.put_all([(b"a", b"1"), (b"b", b"2")])
    snapshot = store.snapshot(b"a", b"z")
    store.put(b"a", b"changed")
    store.put(b"c", b"3")
    assert list(snapshot.iterator()) == [(b"a", b"1"), (b"b", b"2")]


# -- property: random writes, snapshots taken between them, each walked again and again -------------------

keys = st.binary(max_size=2).map(lambda b: bytes(x % 4 for x in b))
values = st.binary(max_size=3)


class SnapshotMachine(RuleBasedStateMachine):
    """Writes to a random stack over a random engine; every open snapshot must keep its model range."""

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[bytes, bytes] = {}
        self.snapshots: list[tuple[KeyValueSnapshot[bytes, bytes], Entries]] = []
        # Partial walks: the snapshot, the walk, what it has left.
        self.walks: list[tuple[KeyValueSnapshot[bytes, bytes], Iterator[tuple[bytes, bytes]], Entries]] = []
        self.dir = Path(tempfile.mkdtemp(prefix="samsa-snapshot-"))

    @initialize(name=st.sampled_from(STACKS), kind=st.sampled_from(["rocksdb", "inmemory"]))
    def open(self, name: str, kind: str) -> None:
        engine: Store = RocksDbStore(self.dir / "db", name="s") if kind == "rocksdb" else InMemoryStore("s")
        self.stack = build(name, engine)

    @rule(key=keys, value=st.none() | values)
    def put(self, key: bytes, value: bytes | None) -> None:
        self.stack.writer.put(key, value)
        if value is None:
            self.model.pop(key, None)
        else:
            self.model[key] = value

    @rule(wanted=st.lists(keys, max_size=3))
    def delete_all(self, wanted: list[bytes]) -> None:
        self.stack.writer.delete_all(wanted)
        for key in wanted:
            self.model.pop(key, None)

    @rule()
    def settle(self) -> None:
        self.stack.settle()

    @rule(low=keys, high=keys)
    def snapshot(self, low: bytes, high: bytes) -> None:
        expected = sorted((k, v) for k, v in self.model.items() if low <= k < high)
        self.snapshots.append((self.stack.store.snapshot(low, high), expected))

    @precondition(lambda self: self.snapshots)
    @rule(pick=st.integers(0), take=st.integers(0, 3))
    def walk_partly(self, pick: int, take: int) -> None:
        snapshot, expected = self.snapshots[pick % len(self.snapshots)]
        walk = snapshot.iterator()
        got = list(islice(walk, take))  # not zip: it would take one more from the walk
        assert got == expected[: len(got)]
        if len(got) == take:  # not run to its end
            self.walks.append((snapshot, walk, expected[len(got) :]))

    @precondition(lambda self: self.snapshots)
    @rule(pick=st.integers(0))
    def close_one(self, pick: int) -> None:
        snapshot, _ = self.snapshots.pop(pick % len(self.snapshots))
        snapshot.close()
        with pytest.raises(StoreClosedError):
            snapshot.iterator()

    @invariant()
    def snapshots_hold(self) -> None:
        for snapshot, expected in self.snapshots:
            assert list(snapshot.iterator()) == expected

    @precondition(lambda self: self.walks)
    @rule()
    def finish_walks(self) -> None:
        """A partial walk of an open snapshot ends where it would have; of a closed one, raises."""
        still_open = [snapshot for snapshot, _ in self.snapshots]
        walks, self.walks = self.walks, []
        for snapshot, walk, rest in walks:
            if any(snapshot is other for other in still_open):
                assert list(walk) == rest
            else:
                with pytest.raises(StoreClosedError):
                    list(walk)

    def teardown(self) -> None:
        if hasattr(self, "stack"):
            self.stack.writer.close()
        shutil.rmtree(self.dir, ignore_errors=True)


TestSnapshotModel = SnapshotMachine.TestCase
TestSnapshotModel.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)


@pytest.mark.parametrize("layer", ["reader", "serialized"])
def test_an_adjunct_snapshot_walk_keeps_its_version_while_it_runs(tmp_path: Path, layer: str) -> None:
    versions = VersionedStore(tmp_path / "ds", lambda p: RocksDbStore(p, name="ds"), "ds")
    reader: KeyValueStore[bytes, bytes] = versions.reader()
    if layer == "serialized":
        reader = SerializedStore(reader, BytesSerde(), BytesSerde())
    versions.write([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], 0)
    versions.seal(1)
    walk = reader.snapshot(b"a", b"z").iterator()  # the usual `for k, v in store.snapshot(a, b).iterator()`
    assert next(walk) == (b"a", b"1")
    versions.write([(b"a", b"new")], 2)
    versions.seal(3)  # the adjunct stream's next version
    assert list(walk) == [(b"b", b"2"), (b"c", b"3")]  # as a range() iterator
    versions.close()


def test_a_closed_snapshots_suspended_walk_keeps_none_of_its_entries(tmp_path: Path) -> None:
    store = RocksDbStore(tmp_path / "db", name="db")
    store.put_all([(b"k%04d" % i, b"v") for i in range(1000)])
    snapshot = store.snapshot(b"k", b"l")
    walk = snapshot.iterator()
    assert sum(1 for _ in zip(range(500), walk, strict=False)) == 500
    snapshot.close()
    assert walk.gi_frame is not None  # suspended, not ended
    held = [v for v in walk.gi_frame.f_locals.values() if isinstance(v, list)]
    assert held == []  # the entries read went with close(), though the walk is still referenced
    with pytest.raises(StoreClosedError):
        next(walk)
    store.close()
