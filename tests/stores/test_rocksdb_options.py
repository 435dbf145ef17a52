"""Parsing `stores.<s>.rocksdb.*` keys into RocksDbOptions."""

from dataclasses import fields

import pytest

from samsa.stores.exceptions import StoreConfigError
from samsa.stores.rocksdb_options import (
    CONTAINER_ROCKSDB_KEYS,
    ROCKSDB_KEYS,
    RocksDbMemory,
    RocksDbOptions,
)


def test_defaults_when_nothing_is_set() -> None:
    assert RocksDbOptions.from_config("s", {"factory": "rocksdb"}) == RocksDbOptions()


def test_every_key_sets_its_field() -> None:
    config = {
        "rocksdb.compression": " ZSTD ",
        "rocksdb.compaction.style": "universal",
        "rocksdb.block.size.bytes": "16384",
        "rocksdb.bloom.filter.bits.per.key": "0",
        "rocksdb.write.buffer.size.bytes": "1048576",
        "rocksdb.num.write.buffers": "3",
        "rocksdb.max.open.files": "-1",
        "rocksdb.max.background.jobs": "4",
        "rocksdb.block.cache.size.bytes": "8388608",
    }
    assert RocksDbOptions.from_config("s", config) == RocksDbOptions(
        compression="zstd",
        compaction_style="universal",
        block_size_bytes=16384,
        bloom_filter_bits_per_key=0,
        write_buffer_size_bytes=1048576,
        num_write_buffers=3,
        max_open_files=-1,
        max_background_jobs=4,
        block_cache_size_bytes=8388608,
    )


def test_key_table_covers_every_field() -> None:
    assert {k.field for k in ROCKSDB_KEYS.values()} == {f.name for f in fields(RocksDbOptions)}


@pytest.mark.parametrize(
    ("sub", "value", "message"),
    [
        ("rocksdb.compression", "brotli", "expected one of"),
        ("rocksdb.block.size.bytes", "4k", "expected an integer"),
        ("rocksdb.num.write.buffers", "0", "must be >= 1"),
        ("rocksdb.max.open.files", "-2", "must be >= -1"),
        ("rocksdb.cache.size", "1", "unknown RocksDB option"),
        ("rocksdb.block.cache.size.bytes", "0", "must be >= 1"),
    ],
)
def test_bad_values_name_the_full_key(sub: str, value: str, message: str) -> None:
    with pytest.raises(StoreConfigError, match=message) as info:
        RocksDbOptions.from_config("counts", {sub: value})
    assert info.value.key == f"stores.counts.{sub}"
    assert str(info.value).startswith(f"stores.counts.{sub}:")


def test_store_block_cache_defaults_to_the_shared_one() -> None:
    assert RocksDbOptions.from_config("s", {}).block_cache_size_bytes is None


def test_container_memory_defaults_and_keys() -> None:
    assert RocksDbMemory.from_config({"stores.s.factory": "rocksdb"}) == RocksDbMemory()
    memory = RocksDbMemory.from_config(
        {
            "job.container.rocksdb.block.cache.size.bytes": " 1048576 ",
            "job.container.rocksdb.write.buffer.total.bytes": "0",
        }
    )
    assert memory == RocksDbMemory(block_cache_size_bytes=1048576, write_buffer_total_bytes=0)
    assert {k.field for k in CONTAINER_ROCKSDB_KEYS.values()} == {f.name for f in fields(RocksDbMemory)}


def test_container_keys_stay_out_of_the_store_namespace() -> None:
    # `stores.<x>.…` names store <x>: a container key there would pass for a store's setting.
    assert all(not key.startswith("stores.") for key in CONTAINER_ROCKSDB_KEYS)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("job.container.rocksdb.block.cache.size.bytes", "0", "must be >= 1"),
        ("job.container.rocksdb.write.buffer.total.bytes", "-1", "must be >= 0"),
        ("job.container.rocksdb.write.buffer.total.bytes", "1GB", "expected an integer"),
    ],
)
def test_bad_container_values_name_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(StoreConfigError, match=message) as info:
        RocksDbMemory.from_config({key: value})
    assert info.value.key == key
