"""The uncommitted-write overlay: the plain store contract, commit/discard, and a dict model."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from samsa.exactly_once.overlay import OverlayStore
from samsa.stores.api import KeyValueStore
from samsa.stores.exceptions import StoreClosedError
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore

Store = KeyValueStore[bytes, bytes]

# -- the engine contract of tests/stores/test_engines.py, run on overlays --------------------------------

_spec = importlib.util.spec_from_file_location(
    "eos_overlay_engine_contract", Path(__file__).parents[1] / "stores" / "test_engines.py"
)
assert _spec is not None and _spec.loader is not None
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
for _name in dir(_contract):
    if _name.startswith("test_"):
        globals()[f"test_contract_{_name[5:]}"] = getattr(_contract, _name)


class _Committing(OverlayStore):
    """Commits after every `every`-th write, so entries sit on both sides of the overlay."""

    def __init__(self, inner: Store, every: int) -> None:
        super().__init__(inner)
        self._every = every
        self._writes = 0

    def _wrote(self) -> None:
        self._writes += 1
        if self._writes % self._every == 0:
            self.commit()

    def put(self, key: bytes, value: bytes | None) -> None:
        super().put(key, value)
        self._wrote()

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        super().put_all(entries)
        self._wrote()


@pytest.fixture(params=["rocksdb", "inmemory"])
def below(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store: Store = (
        RocksDbStore(tmp_path / "db", name="test") if request.param == "rocksdb" else InMemoryStore("test")
    )
    yield store
    store.close()


@pytest.fixture(params=["pending", "every-write", "every-other-write"])
def engine(request: pytest.FixtureRequest, below: Store) -> Store:
    """The contract tests' store: an overlay never committed, committed at each write, or every other."""
    if request.param == "pending":
        return OverlayStore(below)
    return _Committing(below, 1 if request.param == "every-write" else 2)


# -- commit and discard ----------------------------------------------------------------------------


def test_writes_stay_in_the_overlay_until_commit(below: Store) -> None:
    below.put(b"a", b"old")
    below.put(b"gone", b"x")
    store = OverlayStore(below)
    store.put(b"a", b"new")
    store.put(b"b", b"1")
    store.delete(b"gone")
    assert store.get(b"a") == b"new" and store.get(b"gone") is None
    assert list(store.all()) == [(b"a", b"new"), (b"b", b"1")]
    assert list(below.all()) == [(b"a", b"old"), (b"gone", b"x")], "nothing reached the store yet"
    assert store.pending_count == 3
    assert store.commit() == 3
    assert list(below.all()) == [(b"a", b"new"), (b"b", b"1")]
    assert store.pending_count == 0 and store.pending_bytes == 0


def test_discard_drops_uncommitted_writes_only(below: Store) -> None:
    store = OverlayStore(below)
    store.put(b"a", b"1")
    store.commit()
    store.put(b"a", b"2")
    store.delete(b"a")
    store.put(b"b", b"3")
    assert store.discard() == 2
    assert list(store.all()) == [(b"a", b"1")]
    assert store.get(b"b") is None


def test_commit_is_one_batch_below() -> None:
    class Recording(InMemoryStore):
        def __init__(self) -> None:
            super().__init__("rec")
            self.batches: list[list[tuple[bytes, bytes | None]]] = []

        def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
            entries = list(entries)
            self.batches.append(entries)
            super().put_all(entries)

    inner = Recording()
    store = OverlayStore(inner)
    for i in range(5):
        store.put(bytes([i]), b"v")
    store.delete(b"\x01")
    assert store.commit() == 5
    assert len(inner.batches) == 1 and (b"\x01", None) in inner.batches[0]
    assert store.commit() == 0
    assert len(inner.batches) == 1, "an empty overlay writes nothing"


def test_pending_bytes_tracks_overwrites_and_tombstones() -> None:
    store = OverlayStore(InMemoryStore())
    store.put(b"ab", b"1234")
    assert store.pending_bytes == 6
    store.put(b"ab", b"1")
    assert store.pending_bytes == 3
    store.delete(b"ab")
    assert store.pending_bytes == 2
    store.put(b"c", b"")
    assert store.pending_bytes == 3


def test_an_iterator_keeps_the_overlay_it_started_with(below: Store) -> None:
    store = OverlayStore(below)
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    it = store.all()
    assert next(it) == (b"a", b"1")
    store.put(b"b", b"changed")
    store.discard()
    assert list(it) == [(b"b", b"2")]


def test_get_all_merges_overlay_and_store(below: Store) -> None:
    below.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    store = OverlayStore(below)
    store.put(b"b", b"two")
    store.delete(b"c")
    store.put(b"d", b"4")
    assert store.get_all([b"a", b"b", b"c", b"d", b"e"]) == {b"a": b"1", b"b": b"two", b"d": b"4"}


def test_close_drops_the_overlay_and_closes_below() -> None:
    inner = InMemoryStore("s")
    store = OverlayStore(inner)
    store.put(b"a", b"1")
    store.close()
    with pytest.raises(StoreClosedError, match="'s' is closed"):
        store.commit()
    with pytest.raises(StoreClosedError):
        store.discard()
    with pytest.raises(StoreClosedError):
        inner.get(b"a")


# -- model: committed dict + pending dict ---------------------------------------------------------

keys = st.binary(max_size=3).map(lambda b: bytes(x % 4 for x in b)) | st.sampled_from([b"", b"\xff", b"\x00"])
values = st.binary(max_size=6)


class OverlayMachine(RuleBasedStateMachine):
    """Random writes, reads, commits and discards against two dicts: what is committed, what is not."""

    def __init__(self) -> None:
        super().__init__()
        self.committed: dict[bytes, bytes] = {}
        self.pending: dict[bytes, bytes | None] = {}
        self.below = self.open_below()
        self.store = OverlayStore(self.below)

    def open_below(self) -> Store:
        return InMemoryStore("model")

    def view(self) -> dict[bytes, bytes]:
        merged = dict(self.committed)
        for key, value in self.pending.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return merged

    @rule(key=keys, value=st.none() | values)
    def put(self, key: bytes, value: bytes | None) -> None:
        self.store.put(key, value)
        self.pending[key] = value

    @rule(key=keys)
    def delete(self, key: bytes) -> None:
        self.store.delete(key)
        self.pending[key] = None

    @rule(entries=st.lists(st.tuples(keys, st.none() | values), max_size=6))
    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        self.store.put_all(entries)
        self.pending.update(entries)

    @rule()
    def commit(self) -> None:
        assert self.store.commit() == len(self.pending)
        self.committed = self.view()
        self.pending = {}
        assert list(self.below.all()) == sorted(self.committed.items())

    @rule()
    def discard(self) -> None:
        assert self.store.discard() == len(self.pending)
        self.pending = {}

    @rule(key=keys)
    def get(self, key: bytes) -> None:
        assert self.store.get(key) == self.view().get(key)

    @rule(wanted=st.lists(keys, max_size=5))
    def get_all(self, wanted: list[bytes]) -> None:
        view = self.view()
        assert self.store.get_all(wanted) == {k: view[k] for k in wanted if k in view}

    @rule(lo=keys, hi=keys, take=st.none() | st.integers(0, 3))
    def range(self, lo: bytes, hi: bytes, take: int | None) -> None:
        expected = sorted((k, v) for k, v in self.view().items() if lo <= k < hi)
        it = self.store.range(lo, hi)
        got = list(it) if take is None else [e for e, _ in zip(it, range(take), strict=False)]
        assert got == expected[: len(got)] and (take is not None or len(got) == len(expected))

    @invariant()
    def all_matches(self) -> None:
        assert list(self.store.all()) == sorted(self.view().items())
        assert list(self.below.all()) == sorted(self.committed.items()), "uncommitted writes leaked below"
        assert self.store.pending_count == len(self.pending)

    def teardown(self) -> None:
        self.store.close()


class RocksDbOverlayMachine(OverlayMachine):
    def open_below(self) -> Store:
        self.dir = Path(tempfile.mkdtemp(prefix="samsa-overlay-"))
        return RocksDbStore(self.dir / "db", name="model")

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.dir, ignore_errors=True)


TestOverlayModel = OverlayMachine.TestCase
TestOverlayModel.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
TestRocksDbOverlayModel = RocksDbOverlayMachine.TestCase
TestRocksDbOverlayModel.settings = settings(max_examples=30, stateful_step_count=30, deadline=None)
