"""Property test: the RocksDB engine (and the in-memory one) behave like a plain dict model."""

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from samsa.stores.api import KeyValueStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore

# A tiny alphabet makes keys collide, share prefixes and sit on range bounds often.
keys = st.binary(max_size=3).map(lambda b: bytes(x % 4 for x in b)) | st.sampled_from([b"", b"\xff", b"\x00"])
values = st.binary(max_size=6)


class StoreMachine(RuleBasedStateMachine):
    """Random put/delete/put_all/get/get_all/range/all (and reopen for RocksDB) against a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[bytes, bytes] = {}
        self.store = self.open()

    def open(self) -> KeyValueStore[bytes, bytes]:
        raise NotImplementedError

    @rule(key=keys, value=values)
    def put(self, key: bytes, value: bytes) -> None:
        self.store.put(key, value)
        self.model[key] = value

    @rule(key=keys)
    def put_none(self, key: bytes) -> None:
        self.store.put(key, None)
        self.model.pop(key, None)

    @rule(key=keys)
    def delete(self, key: bytes) -> None:
        self.store.delete(key)
        self.model.pop(key, None)

    @rule(entries=st.lists(st.tuples(keys, st.none() | values), max_size=6))
    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        self.store.put_all(entries)
        for key, value in entries:
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

    @rule(key=keys)
    def get(self, key: bytes) -> None:
        assert self.store.get(key) == self.model.get(key)

    @rule(wanted=st.lists(keys, max_size=5))
    def get_all(self, wanted: list[bytes]) -> None:
        expected = {k: self.model[k] for k in wanted if k in self.model}
        assert self.store.get_all(wanted) == expected

    @rule(lo=keys, hi=keys, take=st.none() | st.integers(0, 3))
    def range(self, lo: bytes, hi: bytes, take: int | None) -> None:
        expected = sorted((k, v) for k, v in self.model.items() if lo <= k < hi)
        it = self.store.range(lo, hi)
        if take is None:
            assert list(it) == expected
        else:  # take a few, then abandon the iterator
            got = [entry for entry, _ in zip(it, range(take), strict=False)]
            assert got == expected[: len(got)]

    @invariant()
    def all_matches(self) -> None:
        assert list(self.store.all()) == sorted(self.model.items())

    def teardown(self) -> None:
        self.store.close()


class RocksDbMachine(StoreMachine):
    def open(self) -> KeyValueStore[bytes, bytes]:
        if not hasattr(self, "dir"):
            self.dir = Path(tempfile.mkdtemp(prefix="samsa-model-"))
        return RocksDbStore(self.dir / "db")

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self.open()

    @rule()
    def flush(self) -> None:
        self.store.flush()

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.dir, ignore_errors=True)


class InMemoryMachine(StoreMachine):
    def open(self) -> KeyValueStore[bytes, bytes]:
        return InMemoryStore()


TestRocksDbModel = RocksDbMachine.TestCase
TestRocksDbModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestInMemoryModel = InMemoryMachine.TestCase
TestInMemoryModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
