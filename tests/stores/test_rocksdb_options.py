"""Parsing `stores.<s>.rocksdb.*` keys into RocksDbOptions."""

from dataclasses import fields

import pytest

from samsa.stores.exceptions import StoreConfigError
from samsa.stores.rocksdb_options import ROCKSDB_KEYS, RocksDbOptions


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
    ],
)
def test_bad_values_name_the_full_key(sub: str, value: str, message: str) -> None:
    with pytest.raises(StoreConfigError, match=message) as info:
        RocksDbOptions.from_config("counts", {sub: value})
    assert info.value.key == f"stores.counts.{sub}"
    assert str(info.value).startswith(f"stores.counts.{sub}:")
