"""RocksDB tuning from `stores.<s>.rocksdb.*` and `job.container.rocksdb.*` keys (applied in `rocksdb.py`)."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from samsa.stores.exceptions import StoreConfigError

COMPRESSIONS = ("none", "snappy", "lz4", "lz4hc", "zstd", "zlib", "bz2")
COMPACTION_STYLES = ("level", "universal", "fifo")
_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RocksDbOptions:
    """The RocksDB options Samsa exposes; defaults are RocksDB's own, plus a bloom filter.

    Samza defaults to universal compaction; Samsa keeps RocksDB's leveled compaction, which reads
    faster for the per-message point lookups stores mostly serve.
    """

    compression: str = "snappy"
    compaction_style: str = "level"
    block_size_bytes: int = 4096
    # Bloom filters let a get of an absent key (every first sight of a key) skip reading SST blocks.
    bloom_filter_bits_per_key: int = 10
    write_buffer_size_bytes: int = 64 * _MIB
    num_write_buffers: int = 2
    max_open_files: int = -1
    max_background_jobs: int = 2
    # None: the store reads through the container's shared block cache (`RocksDbMemory`). Set, the store
    # gets its own LRU cache of this size, shared by all of its task instances in the container, so
    # memory stays bounded however many tasks a container runs.
    block_cache_size_bytes: int | None = None

    @classmethod
    def from_config(cls, store: str, store_config: Mapping[str, str]) -> "RocksDbOptions":
        """Parse the `rocksdb.*` entries of one store's config (keys without the `stores.<s>.` prefix).

        Unknown `rocksdb.*` keys are rejected: this module owns that namespace.
        """
        values: dict[str, Any] = {}
        for sub, raw in store_config.items():
            if not sub.startswith("rocksdb."):
                continue
            key = f"stores.{store}.{sub}"
            option = ROCKSDB_KEYS.get(sub)
            if option is None:
                known = ", ".join(sorted(ROCKSDB_KEYS))
                raise StoreConfigError(key, f"unknown RocksDB option; known ones: {known}")
            values[option.field] = option.parse(key, raw.strip())
        return cls(**values)


@dataclass(frozen=True, slots=True)
class RocksDbMemory:
    """Memory bounds shared by every RocksDB store of a container (`job.container.rocksdb.*` keys).

    Block caches: stores that do not set their own size share one LRU cache of `block_cache_size_bytes`;
    index and filter blocks are held in the cache too, so it bounds them as well (with max open files
    unlimited they would otherwise grow with the data). Memtables: `write_buffer_total_bytes` bounds the
    memtables of all stores together (RocksDB flushes the largest when the total is reached); 0 leaves
    only each store's own `write.buffer.size.bytes` x `num.write.buffers` bound.
    """

    block_cache_size_bytes: int = 256 * _MIB
    write_buffer_total_bytes: int = 256 * _MIB

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> "RocksDbMemory":
        """Parse the `job.container.rocksdb.*` keys of a job config (other keys are ignored)."""
        values: dict[str, Any] = {}
        for key, option in CONTAINER_ROCKSDB_KEYS.items():
            raw = config.get(key)
            if raw is not None:
                values[option.field] = option.parse(key, raw.strip())
        return cls(**values)


class RocksDbKey(NamedTuple):
    """One RocksDB config key: the option field it sets, its parser and its documentation."""

    field: str
    parse: Callable[[str, str], object]
    doc: str


def _int(minimum: int) -> Callable[[str, str], object]:
    def parse(key: str, raw: str) -> object:
        try:
            value = int(raw)
        except ValueError:
            raise StoreConfigError(key, f"expected an integer, got {raw!r}") from None
        if value < minimum:
            raise StoreConfigError(key, f"must be >= {minimum}, got {value}")
        return value

    return parse


def _choice(choices: tuple[str, ...]) -> Callable[[str, str], object]:
    def parse(key: str, raw: str) -> object:
        value = raw.lower()
        if value not in choices:
            raise StoreConfigError(key, f"expected one of {', '.join(choices)}, got {raw!r}")
        return value

    return parse


#: Every `stores.<s>.rocksdb.*` key suffix, for the config registry's documentation and validation.
ROCKSDB_KEYS: dict[str, RocksDbKey] = {
    "rocksdb.compression": RocksDbKey(
        "compression", _choice(COMPRESSIONS), "SST block compression: " + " | ".join(COMPRESSIONS)
    ),
    "rocksdb.compaction.style": RocksDbKey(
        "compaction_style", _choice(COMPACTION_STYLES), "compaction: " + " | ".join(COMPACTION_STYLES)
    ),
    "rocksdb.block.size.bytes": RocksDbKey("block_size_bytes", _int(1), "SST data block size"),
    "rocksdb.bloom.filter.bits.per.key": RocksDbKey(
        "bloom_filter_bits_per_key", _int(0), "bloom filter bits per key; 0 disables the filter"
    ),
    "rocksdb.write.buffer.size.bytes": RocksDbKey(
        "write_buffer_size_bytes", _int(1), "size of one memtable before it is flushed to an SST"
    ),
    "rocksdb.num.write.buffers": RocksDbKey("num_write_buffers", _int(1), "memtables kept in memory"),
    "rocksdb.max.open.files": RocksDbKey("max_open_files", _int(-1), "open SST file limit; -1 = no limit"),
    "rocksdb.max.background.jobs": RocksDbKey(
        "max_background_jobs", _int(1), "threads for flushes and compactions"
    ),
    "rocksdb.block.cache.size.bytes": RocksDbKey(
        "block_cache_size_bytes",
        _int(1),
        "LRU block cache of this store, shared by its task instances in a container; "
        "unset: the store uses the container's shared cache (job.container.rocksdb.block.cache.size.bytes)",
    ),
}

#: Container-wide RocksDB memory keys (full names), for the config registry. They live outside `stores.`
#: because the second segment of a `stores.` key names a store (`stores.rocksdb.*` would be store `rocksdb`).
CONTAINER_ROCKSDB_KEYS: dict[str, RocksDbKey] = {
    "job.container.rocksdb.block.cache.size.bytes": RocksDbKey(
        "block_cache_size_bytes",
        _int(1),
        "LRU block cache shared by every RocksDB store of a container that sets no "
        "stores.<s>.rocksdb.block.cache.size.bytes; holds data, index and filter blocks (default 256 MiB)",
    ),
    "job.container.rocksdb.write.buffer.total.bytes": RocksDbKey(
        "write_buffer_total_bytes",
        _int(0),
        "bound on the memtables of all RocksDB stores of a container together; the largest is flushed "
        "when it is reached; 0 = no container bound (default 256 MiB)",
    ),
}
