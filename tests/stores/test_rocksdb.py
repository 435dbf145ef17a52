"""RocksDB engine specifics: persistence, snapshots, checkpoints, locking, options (real RocksDB)."""

import gc
import os
import re
import time
from pathlib import Path

import pytest

from samsa.stores.exceptions import StoreClosedError, StoreError
from samsa.stores.rocksdb import RocksDbMemoryPool, RocksDbStore, container_memory
from samsa.stores.rocksdb_options import COMPACTION_STYLES, COMPRESSIONS, RocksDbMemory, RocksDbOptions


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


# --- memory: block caches and the memtable budget, read back from what RocksDB logs of its options ---


def _logged_options(db_dir: Path) -> str:
    # RocksDB writes every option of an open into the `LOG` file (and most into OPTIONS-*): proof that a
    # setting reached RocksDB, not just our wrapper.
    return (db_dir / "LOG").read_text(errors="replace")


def _logged(db_dir: Path, name: str) -> str:
    """The value RocksDB logged for option `name` at the latest open (`Options.<name>: v` or `<name> : v`)."""
    found = re.findall(rf"(?:Options\.|^\s*){re.escape(name)}\s*:\s*(\S+)", _logged_options(db_dir), re.M)
    assert found, f"RocksDB did not log {name} in {db_dir / 'LOG'}"
    return str(found[-1])


def _options_file(db_dir: Path) -> str:
    newest = max(db_dir.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    return newest.read_text()


def test_per_store_options_reach_rocksdb(tmp_path: Path) -> None:
    options = RocksDbOptions(write_buffer_size_bytes=3 * 1024 * 1024, num_write_buffers=3)
    with RocksDbStore(tmp_path / "s", options, memory=RocksDbMemoryPool()):
        written = _options_file(tmp_path / "s")
    assert "write_buffer_size=3145728" in written
    assert "max_write_buffer_number=3" in written
    assert "cache_index_and_filter_blocks=true" in written
    assert "pin_l0_filter_and_index_blocks_in_cache=true" in written


def test_stores_without_own_cache_share_the_container_cache(tmp_path: Path) -> None:
    pool = RocksDbMemoryPool(RocksDbMemory(block_cache_size_bytes=7_000_000))
    with (
        RocksDbStore(tmp_path / "a", name="a", memory=pool),
        RocksDbStore(tmp_path / "b", name="b", memory=pool),
    ):
        a_cache, b_cache = _logged(tmp_path / "a", "block_cache"), _logged(tmp_path / "b", "block_cache")
        assert a_cache == b_cache  # the same cache object: one bound for both stores
        assert _logged(tmp_path / "a", "capacity") == "7000000"
        assert _logged(tmp_path / "a", "write_buffer_manager") == _logged(
            tmp_path / "b", "write_buffer_manager"
        )


def test_store_cache_is_shared_by_its_task_instances_only(tmp_path: Path) -> None:
    pool = RocksDbMemoryPool(RocksDbMemory(block_cache_size_bytes=7_000_000))
    own = RocksDbOptions(block_cache_size_bytes=5_000_000)
    with (
        RocksDbStore(tmp_path / "t0" / "counts", own, name="counts", memory=pool),
        RocksDbStore(tmp_path / "t1" / "counts", own, name="counts", memory=pool),
        RocksDbStore(tmp_path / "t0" / "other", name="other", memory=pool),
    ):
        t0, t1 = (
            _logged(tmp_path / "t0" / "counts", "block_cache"),
            _logged(tmp_path / "t1" / "counts", "block_cache"),
        )
        assert t0 == t1
        assert t0 != _logged(tmp_path / "t0" / "other", "block_cache")
        assert _logged(tmp_path / "t0" / "counts", "capacity") == "5000000"


def test_reads_fill_the_cache_the_store_uses(tmp_path: Path) -> None:
    pool = RocksDbMemoryPool()
    with (
        RocksDbStore(tmp_path / "shared", name="shared", memory=pool) as shared,
        RocksDbStore(
            tmp_path / "own", RocksDbOptions(block_cache_size_bytes=1 << 20), name="own", memory=pool
        ) as own,
    ):
        for store in (shared, own):
            store.put_all((b"k%05d" % i, b"v" * 100) for i in range(2000))
            store.flush()
        before = pool.usage()
        shared.get(b"k00001")
        after_shared = pool.usage()
        own.get(b"k00001")
        after_own = pool.usage()
    assert after_shared["block.cache"] > before["block.cache"]
    assert after_shared["block.cache.own"] == before["block.cache.own"]
    assert after_own["block.cache.own"] > after_shared["block.cache.own"]


def test_configure_resizes_live_caches(tmp_path: Path) -> None:
    pool = RocksDbMemoryPool()
    with RocksDbStore(tmp_path / "s", memory=pool) as store:
        store.put_all((b"k%05d" % i, b"v" * 1000) for i in range(2000))
        store.flush()
        for i in range(2000):
            store.get(b"k%05d" % i)
        assert pool.usage()["block.cache"] > 1_000_000
        pool.configure(RocksDbMemory(block_cache_size_bytes=64 * 1024))
        assert pool.usage()["block.cache"] <= 200 * 1024  # evicted down to (about) the new capacity
        assert store.get(b"k00001") == b"v" * 1000


def test_write_buffer_budget_flushes_before_the_store_limit(tmp_path: Path) -> None:
    # The store alone would hold 64 MiB in its memtable; the container budget of 1 MiB forces flushes.
    pool = RocksDbMemoryPool(RocksDbMemory(write_buffer_total_bytes=1 << 20))
    with RocksDbStore(tmp_path / "s", memory=pool) as store:
        for batch in range(40):
            store.put_all((b"k%03d%05d" % (batch, i), os.urandom(100)) for i in range(1000))
        assert list((tmp_path / "s").glob("*.sst"))
    unbounded = RocksDbMemoryPool(RocksDbMemory(write_buffer_total_bytes=0))
    with RocksDbStore(tmp_path / "u", memory=unbounded) as store:
        for batch in range(40):
            store.put_all((b"k%03d%05d" % (batch, i), os.urandom(100)) for i in range(1000))
        assert not list((tmp_path / "u").glob("*.sst"))


def test_default_pool_is_process_wide(tmp_path: Path) -> None:
    assert container_memory() is container_memory()
    with RocksDbStore(tmp_path / "a") as a, RocksDbStore(tmp_path / "b") as b:
        assert _logged(a.path, "block_cache") == _logged(b.path, "block_cache")


# --- bulk load (restore) ---


def _wal_bytes(db_dir: Path) -> int:
    return sum(p.stat().st_size for p in db_dir.glob("*.log"))


def test_bulk_load_skips_the_wal_and_end_makes_it_durable(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = RocksDbStore(path)
    store.begin_bulk_load()
    assert store.bulk_loading
    store.put_all((b"k%05d" % i, b"v" * 100) for i in range(5000))
    store.put(b"single", b"1")
    assert _wal_bytes(path) == 0
    store.end_bulk_load()
    assert not store.bulk_loading
    assert list(path.glob("*.sst"))
    store.put(b"after", b"2")
    assert _wal_bytes(path) > 0  # normal writes are logged again
    store.close()
    with RocksDbStore(path) as again:
        assert again.get(b"k04999") == b"v" * 100
        assert again.get(b"single") == b"1"
        assert again.get(b"after") == b"2"


def test_close_during_bulk_load_keeps_the_writes(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = RocksDbStore(path)
    store.begin_bulk_load()
    store.put_all((b"k%05d" % i, b"v") for i in range(100))
    store.close()
    with RocksDbStore(path) as again:
        assert again.get(b"k00099") == b"v"
        again.put(b"x", b"y")
        assert _wal_bytes(path) > 0  # a reopen is a normal, logged store


def test_end_bulk_load_without_begin_is_a_no_op(tmp_path: Path) -> None:
    with RocksDbStore(tmp_path / "s") as store:
        store.end_bulk_load()
        store.put(b"a", b"1")
        assert _wal_bytes(tmp_path / "s") > 0


def test_switching_the_write_buffer_budget_on_later_applies_to_new_stores(tmp_path: Path) -> None:
    pool = RocksDbMemoryPool(RocksDbMemory(write_buffer_total_bytes=0))
    with RocksDbStore(tmp_path / "before", memory=pool):
        pool.configure(RocksDbMemory(write_buffer_total_bytes=1 << 20))
        with RocksDbStore(tmp_path / "after", memory=pool) as after:
            for batch in range(40):
                after.put_all((b"k%03d%05d" % (batch, i), os.urandom(100)) for i in range(1000))
            assert list((tmp_path / "after").glob("*.sst"))
            # A soft bound (about the budget, not 64 MiB): the flushes it triggers run in RocksDB's
            # background threads, which a loaded machine delays.
            deadline = time.monotonic() + 10
            while pool.usage()["write.buffers"] >= 4 << 20 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert pool.usage()["write.buffers"] < 4 << 20
        assert _logged(tmp_path / "before", "write_buffer_manager") != _logged(
            tmp_path / "after", "write_buffer_manager"
        )


def test_the_store_bounds_its_log_and_manifest_files(tmp_path: Path) -> None:
    # RocksDB's defaults (one LOG of unlimited size, a MANIFEST of up to 1 GiB) grew a long-running store
    # by 2 MB a minute at a high commit rate; RocksDB records the options it runs with in OPTIONS-*.
    store = RocksDbStore(tmp_path / "s")
    try:
        store.put(b"k", b"v")
        store.flush()
        options = max((tmp_path / "s").glob("OPTIONS-*")).read_text()
    finally:
        store.close()
    assert "max_log_file_size=4194304" in options
    assert "keep_log_file_num=2" in options
    assert "max_manifest_file_size=4194304" in options
