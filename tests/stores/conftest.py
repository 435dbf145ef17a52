"""Engine fixtures: every shared-behaviour test runs on real RocksDB and on the in-memory engine."""

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.stores.api import KeyValueStore
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore

# The shared helpers (changelog_sends), also when tests/stores runs alone.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

EngineFactory = Callable[[], KeyValueStore[bytes, bytes]]


@pytest.fixture(params=["rocksdb", "inmemory"])
def make_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EngineFactory]:
    """Opens fresh engines of one kind (each RocksDB one in its own directory) and closes them after."""
    opened: list[KeyValueStore[bytes, bytes]] = []

    def make() -> KeyValueStore[bytes, bytes]:
        store: KeyValueStore[bytes, bytes]
        if request.param == "rocksdb":
            store = RocksDbStore(tmp_path / f"db{len(opened)}", name="test")
        else:
            store = InMemoryStore("test")
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def engine(make_engine: EngineFactory) -> KeyValueStore[bytes, bytes]:
    return make_engine()
