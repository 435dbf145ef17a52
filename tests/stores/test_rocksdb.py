"""RocksDB engine specifics: persistence, snapshots, checkpoints, locking, options (real RocksDB)."""

import gc
import os
from pathlib import Path

import pytest

from samsa.stores.exceptions import StoreClosedError, StoreError
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.rocksdb_options import COMPACTION_STYLES, COMPRESSIONS, RocksDbOptions


def test_reopen_after_close_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with RocksDbStore(path) as store:
        store.put_all((b"k%03d" % i, b"v%d" % i) for i in range(100))
        store.delete(b"k050")
        # No flush: the write-ahead log alone must carry the writes across close/reopen.
    with RocksDbStore(path) as store:
        assert store.get(b"k001") == b"v1"
        assert store.get(b"k050") is None
        assert len(list(store.all())) == 99


def test_reopen_after_flush_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with RocksDbStore(path) as store:
        store.put(b"a", b"1")
        store.flush()
    with RocksDbStore(path) as store:
        assert store.get(b"a") == b"1"


def test_name_defaults_to_directory_name(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "counts") as store:
        assert store.name == "counts"
    with RocksDbStore(tmp_path / "x", name="configured") as store:
        assert store.name == "configured"


def test_creates_missing_parent_directories(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "job" / "task 0" / "store") as store:
        store.put(b"a", b"1")
    assert (tmp_path / "job" / "task 0" / "store" / "CURRENT").exists()


def test_second_open_of_same_dir_fails_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with RocksDbStore(path), pytest.raises(StoreError, match="locked") as info:
        RocksDbStore(path, name="counts")
    assert "'counts'" in str(info.value)
    assert str(path) in str(info.value)


def test_iterator_is_a_snapshot(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "s") as store:
        store.put_all([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
        it = store.all()
        store.put(b"b", b"2")
        store.delete(b"c")
        store.put(b"d", b"new")
        assert list(it) == [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]
        assert list(store.all()) == [(b"a", b"1"), (b"b", b"2"), (b"d", b"new")]


def test_snapshot_is_taken_at_call_not_first_next(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "s") as store:
        store.put(b"a", b"1")
        it = store.range(b"a", b"z")
        store.put(b"a", b"2")
        assert list(it) == [(b"a", b"1")]


def test_close_releases_abandoned_and_live_iterators(tmp_path: Path) -> None:
    # A native iterator pins the database (and its LOCK file); close must release every one of them.
    path = tmp_path / "s"
    store = RocksDbStore(path)
    store.put_all((bytes([i]), b"v") for i in range(10))
    live = store.all()
    next(live)
    abandoned = store.range(b"\x00", b"\x09")
    next(abandoned)
    del abandoned
    unstarted = store.all()
    store.close()
    with RocksDbStore(path) as again:
        assert again.get(b"\x05") == b"v"
    with pytest.raises(StoreClosedError):
        next(live)
    with pytest.raises(StoreClosedError):
        next(unstarted)


def test_abandoned_iterator_in_a_cycle_does_not_block_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = RocksDbStore(path)
    store.put(b"a", b"1")
    holder: list[object] = []
    holder.append(holder)  # a reference cycle: only the cycle collector would free it
    holder.append(store.all())
    del holder
    store.close()
    with RocksDbStore(path) as again:
        assert again.get(b"a") == b"1"
    gc.collect()


def test_iterator_close_releases_early(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "s") as store:
        store.put(b"a", b"1")
        it = store.all()
        it.close()  # type: ignore[attr-defined]
        assert list(it) == []


def test_get_all_multi_get_with_duplicates(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "s") as store:
        store.put(b"a", b"1")
        assert store.get_all([b"a", b"a", b"b"]) == {b"a": b"1"}


def test_checkpoint_reopens_with_same_data(tmp_path: Path) -> None:
    live = tmp_path / "task" / "store"
    with RocksDbStore(live) as store:
        store.put_all((b"k%03d" % i, b"v%d" % i) for i in range(200))
        store.flush()
        store.put(b"k000", b"after-flush")  # only in the memtable / WAL
        store.delete(b"k001")
        dest = store.checkpoint(tmp_path / "task" / "store-1700000000000-abc")
        store.put(b"k002", b"after-checkpoint")
        assert dest == tmp_path / "task" / "store-1700000000000-abc"
    with RocksDbStore(dest) as copy:
        assert copy.get(b"k000") == b"after-flush"
        assert copy.get(b"k001") is None
        assert copy.get(b"k002") == b"v2"
        assert len(list(copy.all())) == 199


def test_checkpoint_hard_links_sst_files(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "store") as store:
        store.put_all((b"k%05d" % i, b"x" * 100) for i in range(1000))
        store.flush()
        dest = store.checkpoint(tmp_path / "cp")
    ssts = list(dest.glob("*.sst"))
    assert ssts
    assert all(os.stat(sst).st_nlink >= 2 for sst in ssts)


def test_checkpoint_is_independent_of_later_writes(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "store") as store:
        store.put(b"a", b"1")
        dest = store.checkpoint(tmp_path / "cp")
        store.put(b"a", b"2")
        store.flush()
    with RocksDbStore(dest) as copy:
        copy.put(b"b", b"only-in-copy")
    with RocksDbStore(tmp_path / "store") as store, RocksDbStore(dest) as copy:
        assert store.get(b"a") == b"2"
        assert store.get(b"b") is None
        assert copy.get(b"a") == b"1"


def test_checkpoint_into_existing_dir_fails(tmp_path: Path) -> None:
    (tmp_path / "cp").mkdir()
    with RocksDbStore(tmp_path / "store") as store, pytest.raises(StoreError, match="already exists"):
        store.checkpoint(tmp_path / "cp")


def test_checkpoint_after_close_raises(tmp_path: Path) -> None:
    store = RocksDbStore(tmp_path / "store")
    store.close()
    with pytest.raises(StoreClosedError):
        store.checkpoint(tmp_path / "cp")


def test_put_all_is_one_atomic_batch(tmp_path: Path) -> None:
    def entries():  # type: ignore[no-untyped-def]
        yield b"a", b"1"
        raise RuntimeError("source failed mid-batch")

    with RocksDbStore(tmp_path / "s") as store:
        with pytest.raises(RuntimeError):
            store.put_all(entries())
        assert store.get(b"a") is None


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_compression_opens(tmp_path: Path, compression: str) -> None:
    options = RocksDbOptions(compression=compression)
    with RocksDbStore(tmp_path / "s", options) as store:
        store.put_all((b"k%05d" % i, b"abc" * 50) for i in range(500))
        store.flush()
    with RocksDbStore(tmp_path / "s", options) as store:
        assert store.get(b"k00007") == b"abc" * 50


@pytest.mark.parametrize("style", COMPACTION_STYLES)
def test_every_compaction_style_opens(tmp_path: Path, style: str) -> None:
    options = RocksDbOptions(compaction_style=style, bloom_filter_bits_per_key=0, block_size_bytes=16384)
    with RocksDbStore(tmp_path / "s", options) as store:
        store.put(b"a", b"1")
        store.flush()
        assert store.get(b"a") == b"1"


def test_repr_shows_state(tmp_path: Path) -> None:
    store = RocksDbStore(tmp_path / "s")
    assert "open" in repr(store)
    store.close()
    assert "closed" in repr(store)
