"""RocksDB key-value engine over bytes, on `rocksdict` in raw mode (the only module importing rocksdict)."""

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, cast
from weakref import WeakSet

from rocksdict import (
    BlockBasedOptions,
    Cache,
    Checkpoint,
    DBCompactionStyle,
    DBCompressionType,
    IngestExternalFileOptions,
    Options,
    Rdict,
    SstFileWriter,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from samsa.stores.api import KeyValueSnapshot, KeyValueStore, ReplayedSnapshot
from samsa.stores.exceptions import STORE_DIR_FIX, StoreClosedError, StoreError, corrupt, no_room
from samsa.stores.rocksdb_options import RocksDbMemory, RocksDbOptions

_COMPRESSION: dict[str, Callable[[], DBCompressionType]] = {
    "none": DBCompressionType.none,
    "snappy": DBCompressionType.snappy,
    "lz4": DBCompressionType.lz4,
    "lz4hc": DBCompressionType.lz4hc,
    "zstd": DBCompressionType.zstd,
    "zlib": DBCompressionType.zlib,
    "bz2": DBCompressionType.bz2,
}
_COMPACTION: dict[str, Callable[[], DBCompactionStyle]] = {
    "level": DBCompactionStyle.level,
    "universal": DBCompactionStyle.universal,
    "fifo": DBCompactionStyle.fifo,
}


class RocksDbMemoryPool:
    """The block caches and the memtable budget that the RocksDB stores of one container share.

    Stores setting no `block_cache_size_bytes` share one LRU cache; a store that sets it gets one cache
    per store name, shared by its task instances. One write buffer manager bounds the memtables of all
    stores. `configure` resizes all of these in place, so stores already open follow. Thread-safe (stores
    open from parallel restore threads).
    """

    def __init__(self, memory: RocksDbMemory | None = None) -> None:
        self._memory = memory or RocksDbMemory()
        self._lock = threading.Lock()
        self._shared_cache: Cache | None = None
        self._store_caches: dict[str, Cache] = {}
        self._write_buffers: WriteBufferManager | None = None

    @property
    def memory(self) -> RocksDbMemory:
        return self._memory

    def configure(self, memory: RocksDbMemory) -> None:
        """Apply the container's bounds; call before opening stores (later calls resize live caches)."""
        with self._lock:
            self._memory = memory
            if self._shared_cache is not None:
                self._shared_cache.set_capacity(memory.block_cache_size_bytes)
            manager, total = self._write_buffers, memory.write_buffer_total_bytes
            if manager is not None:
                if (manager.get_buffer_size() > 0) == (total > 0):
                    manager.set_buffer_size(total)
                else:
                    # Size 0 disables a manager, and RocksDB only counts memory while it is enabled:
                    # switching a live one on or off would unbalance its count. Stores opened from now
                    # on get a new manager; open ones keep the old setting until reopened.
                    self._write_buffers = None

    def usage(self) -> dict[str, int]:
        """Bytes in use, for metrics: `block.cache` (shared), `block.cache.<store>`, `write.buffers`."""
        with self._lock:
            used = {f"block.cache.{name}": cache.get_usage() for name, cache in self._store_caches.items()}
            used["block.cache"] = self._shared_cache.get_usage() if self._shared_cache else 0
            used["write.buffers"] = self._write_buffers.get_usage() if self._write_buffers else 0
            return used

    def _block_cache(self, store: str, size: int | None) -> Cache:
        """The cache a store named `store` reads through (`size` None: the shared one)."""
        with self._lock:
            if size is None:
                if self._shared_cache is None:
                    self._shared_cache = Cache(self._memory.block_cache_size_bytes)
                return self._shared_cache
            cache = self._store_caches.get(store)
            if cache is None:
                cache = self._store_caches[store] = Cache(size)
            else:
                cache.set_capacity(size)  # the task instances of a store share one config: a no-op
            return cache

    def _write_buffer_manager(self) -> WriteBufferManager:
        with self._lock:
            if self._write_buffers is None:
                # allow_stall=False: reaching the budget triggers flushes, never blocks the task's writes.
                self._write_buffers = WriteBufferManager(self._memory.write_buffer_total_bytes, False)
            return self._write_buffers


_CONTAINER_MEMORY = RocksDbMemoryPool()


def container_memory() -> RocksDbMemoryPool:
    """The process-wide pool every `RocksDbStore` uses unless given another; configure it at start."""
    return _CONTAINER_MEMORY


class RocksDbStore(KeyValueStore[bytes, bytes]):
    """A RocksDB database at `path` holding raw bytes keys and values.

    Writes go through the write-ahead log, so a crash loses nothing `put` returned for; `flush()` moves
    memtables into SST files. Iterators read a consistent snapshot taken when `range`/`all` is called; a
    `snapshot()` is one such iterator that keeps the entries it reads until it is closed.
    `checkpoint()` may run on another thread while this one writes (RocksDB allows it); everything else
    expects the single task thread. Block caches and memtable memory come from `memory` (default: the
    container's pool, `container_memory()`).
    """

    def __init__(
        self,
        path: Path,
        options: RocksDbOptions | None = None,
        *,
        name: str | None = None,
        memory: RocksDbMemoryPool | None = None,
    ) -> None:
        self.path = path
        self.name = name or path.name
        options = options or RocksDbOptions()
        pool = memory or _CONTAINER_MEMORY
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = Rdict(
                str(path),
                _rocksdict_options(
                    options,
                    pool._block_cache(self.name, options.block_cache_size_bytes),
                    pool._write_buffer_manager(),
                ),
            )
        except Exception as e:  # rocksdict raises bare Exception for every RocksDB status
            failure = no_room(self.name, path, "open", e) or corrupt(self.name, path, "open", e)
            raise failure or StoreError(_open_failure(self.name, path, e)) from e
        self._db: Rdict | None = db
        self._bulk_load = False
        # Live iterators pin the database open (the LOCK file stays held), so close() must end them.
        self._iterators: WeakSet[_RocksIterator] = WeakSet()
        # Bound once: get/put run per message, and an attribute lookup chain per call adds up.
        self._get: Callable[[bytes], bytes | None] = db.get
        self._put: Callable[[bytes, bytes], None] = db.put
        self._delete: Callable[[bytes], None] = db.delete

    def get(self, key: bytes) -> bytes | None:
        try:  # free when nothing is raised (3.11's zero-cost try)
            return self._get(key)
        except Exception as e:
            self._raise_failure("read", e)

    def put(self, key: bytes, value: bytes | None) -> None:
        try:  # free when nothing is raised (3.11's zero-cost try)
            if value is None:
                self._delete(key)
            else:
                self._put(key, value)
        except Exception as e:
            self._raise_failure("write", e)

    def delete(self, key: bytes) -> None:
        try:
            self._delete(key)
        except Exception as e:
            self._raise_failure("write", e)

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply all entries atomically in one write batch."""
        db = self._open_db()
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete  # bound once: restores call this with 10k entries
        for key, value in entries:
            if value is None:
                delete(key)
            else:
                put(key, value)
        if not batch.is_empty():
            try:
                db.write(batch)
            except Exception as e:
                self._raise_failure("write", e)

    def get_all(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        db = self._open_db()
        wanted = list(keys)
        try:
            values = cast(list[bytes | None], db.get(cast(list[Any], wanted)))  # one RocksDB multi-get
        except Exception as e:
            self._raise_failure("read", e)
        return {key: value for key, value in zip(wanted, values, strict=True) if value is not None}

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        db = self._open_db()
        if from_key >= to_key:
            return iter(())
        return self._track(_RocksIterator(db.items(from_key=from_key), to_key, self, from_key))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._track(_RocksIterator(self._open_db().items(), None, self, None))

    def snapshot(self, from_key: bytes, to_key: bytes) -> KeyValueSnapshot[bytes, bytes]:
        # One RocksDB iterator opened now pins the state of this call; the snapshot keeps what it reads
        # so that later walks replay it (rocksdict's Snapshot iterates the live database, not itself).
        return ReplayedSnapshot(self.range(from_key, to_key), self.name, self._open_db)

    def flush(self) -> None:
        """Flush memtables to SST files and wait for it."""
        db = self._open_db()
        try:
            db.flush(True)
        except Exception as e:
            error = StoreError(f"store {self.name!r} at {self.path}: flush failed: {e}")
            raise (
                no_room(self.name, self.path, "flush", e)
                or corrupt(self.name, self.path, "flush", e)
                or error
            ) from e

    @property
    def bulk_loading(self) -> bool:
        return self._bulk_load

    def begin_bulk_load(self) -> None:
        """Make writes skip the write-ahead log, for a restore that rebuilds this store.

        Until `end_bulk_load()` (or `close()`), a crash loses every write since the last flush: use it only
        on a store whose restore starts over after a crash (it has no marker of its own to trust).
        """
        db = self._open_db()
        db.set_write_options(_write_options(wal=False))
        self._bulk_load = True

    def end_bulk_load(self) -> None:
        """Flush what the bulk load wrote (now durable) and send later writes through the log again."""
        db = self._open_db()
        if not self._bulk_load:
            return
        self.flush()
        db.set_write_options(_write_options(wal=True))
        self._bulk_load = False

    def checkpoint(self, dest_dir: Path) -> Path:
        """Write a consistent copy of the store into `dest_dir` and return it.

        RocksDB flushes the memtable first (a no-op after `flush()`), then hard-links every SST and copies
        only the small MANIFEST/CURRENT/OPTIONS files, so the cost does not grow with the store's size.
        `dest_dir` must not exist; it opens as a regular `RocksDbStore`.
        """
        db = self._open_db()
        if dest_dir.exists():
            raise StoreError(
                f"cannot checkpoint store {self.name!r} into {dest_dir}: it already exists; "
                "remove it or use a new checkpoint id"
            )
        dest_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            Checkpoint(db).create_checkpoint(str(dest_dir))
        except Exception as e:
            error = StoreError(f"checkpoint of store {self.name!r} into {dest_dir} failed: {e}")
            damaged = corrupt(self.name, self.path, "checkpoint", e)
            raise no_room(self.name, dest_dir, "checkpoint", e) or damaged or error from e
        return dest_dir

    def ingest(self, sst_files: Sequence[Path], move: bool = True) -> None:
        """Add SST files written by `write_sst` to the store: their entries win over what it holds.

        `move` hard-links the files into the store (they must be on its filesystem; RocksDB copies
        otherwise) instead of copying them. Files of one call must not overlap in keys.
        """
        db = self._open_db()
        options = IngestExternalFileOptions()
        options.set_move_files(move)
        try:
            db.ingest_external_file([str(path) for path in sst_files], options)
        except Exception as e:
            names = ", ".join(str(path) for path in sst_files)
            error = StoreError(f"store {self.name!r} at {self.path}: cannot ingest {names}: {e}")
            raise (
                no_room(self.name, self.path, "ingest", e)
                or corrupt(self.name, self.path, "ingest", e)
                or error
            ) from e

    def close(self) -> None:
        db = self._db
        if db is None:
            return
        for iterator in list(self._iterators):
            iterator.invalidate()
        self._db = None
        self._get = self._put = self._delete = self._raise_closed
        try:
            if self._bulk_load:
                self._bulk_load = False
                db.flush(True)  # writes outside the log survive only once in an SST
            db.close()
        except Exception as e:
            self._raise_failure("close", e)

    def _open_db(self) -> Rdict:
        db = self._db
        if db is None:
            raise StoreClosedError(self.name)
        return db

    def _raise_closed(self, *_: object) -> NoReturn:
        raise StoreClosedError(self.name)

    def _raise_failure(self, action: str, error: Exception) -> NoReturn:
        """Raises `StoreDiskFullError` for a write refused for want of room, `StoreCorruptError` for damaged
        files (RocksDB's "Corruption:"), else `error` as it was."""
        failure = no_room(self.name, self.path, action, error) or corrupt(self.name, self.path, action, error)
        if failure is None:
            raise error
        raise failure from error

    def _track(self, iterator: "_RocksIterator") -> "_RocksIterator":
        self._iterators.add(iterator)
        return iterator

    def __repr__(self) -> str:
        state = "closed" if self._db is None else "open"
        return f"RocksDbStore({self.name!r}, {str(self.path)!r}, {state})"


class _RocksIterator(Iterator[tuple[bytes, bytes]]):
    """Entries of a rocksdict items iterator up to an exclusive bound; drops the native iterator at the end.

    Dropping the native iterator (end reached, `close()`, garbage collection, or the store closing) is
    what releases RocksDB's snapshot and the database handle. rocksdict's items iterator ends silently on an
    error (a damaged block reads as the end of the store): an end before the bound is checked with one seek
    past the last entry, which raises RocksDB's error (`StoreCorruptError` for damaged files).
    """

    __slots__ = ("__weakref__", "_entries", "_from", "_last", "_store", "_store_closed", "_to")

    def __init__(
        self, entries: Iterator[object], to_key: bytes | None, store: RocksDbStore, from_key: bytes | None
    ) -> None:
        self._entries: Iterator[tuple[bytes, bytes]] | None = cast(Iterator[tuple[bytes, bytes]], entries)
        self._to = to_key
        self._from = from_key
        self._last: bytes | None = None
        self._store = store
        self._store_closed = False

    def __iter__(self) -> "_RocksIterator":
        return self

    def __next__(self) -> tuple[bytes, bytes]:
        entries = self._entries
        if entries is None:
            if self._store_closed:
                raise StoreClosedError(self._store.name)
            raise StopIteration
        try:
            entry = next(entries)
        except StopIteration:
            self._entries = None
            self._check_end()
            raise
        to = self._to
        if to is not None and entry[0] >= to:
            self._entries = None
            raise StopIteration
        self._last = entry[0]
        return entry

    def _check_end(self) -> None:
        """Raises the error that ended the native iterator early, if one did (none at the true end)."""
        db = self._store._db
        if db is None:
            return
        probe = db.iter()
        try:
            if self._last is not None:
                probe.seek(self._last)
                if probe.valid():
                    probe.next()
            elif self._from is not None:
                probe.seek(self._from)
            else:
                probe.seek_to_first()
            probe.status()
        except Exception as e:  # rocksdict raises bare Exception with RocksDB's status text
            self._store._raise_failure("iterate", e)
        finally:
            del probe  # releases the native iterator (and its pin on the database) now

    def close(self) -> None:
        """Release the native iterator now rather than at garbage collection."""
        self._entries = None

    def invalidate(self) -> None:
        """Called by the store's close(): release, and make further use raise `StoreClosedError`."""
        if self._entries is not None:
            self._entries = None
            self._store_closed = True


def write_sst(
    path: Path,
    entries: Iterable[tuple[bytes, bytes]],
    options: RocksDbOptions | None = None,
    store: str | None = None,
    fix: str = STORE_DIR_FIX,
) -> int:
    """Writes `entries` (keys strictly ascending, bytewise) into a new SST file at `path` for
    `RocksDbStore.ingest` (of `store`); returns how many. No entries: no file (RocksDB cannot finish an
    empty one).

    A key out of order or repeated raises `StoreError` naming it and the file, and leaves no file; so does
    a disk without room (`StoreDiskFullError`, whose message ends with `fix`).
    """
    opts = Options(raw_mode=True)
    opts.set_compression_type(_COMPRESSION[(options or RocksDbOptions()).compression]())
    writer = SstFileWriter(opts)
    count, last = 0, None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for key, value in entries:
            if count == 0:
                writer.open(str(path))
            elif key <= last:  # type: ignore[operator]
                problem = "repeated" if key == last else "out of order"
                raise StoreError(f"cannot write SST file {path}: key {key!r} is {problem} (after {last!r})")
            writer[key] = value
            last = key
            count += 1
        if count:
            writer.finish()
    except BaseException as e:
        # Dropped now, not when the traceback goes: the writer holds the file open (its room, on a full disk).
        del writer
        path.unlink(missing_ok=True)
        # rocksdict raises bare Exception with RocksDB's status text; the entries' own errors go up as is.
        engine = type(e) is Exception or isinstance(e, OSError)
        full = no_room(store, path, "write SST file", e, fix) if engine else None
        if full is None:
            raise
        raise full from e
    return count


def _write_options(*, wal: bool) -> WriteOptions:
    write = WriteOptions()
    # rocksdict's stub declares disable_wal a method; at run time it is a property.
    setattr(write, "disable_wal", not wal)  # noqa: B010
    return write


_MAX_LOG_FILE_BYTES = 4 << 20
_KEEP_LOG_FILES = 2
# Rolled over at this size (a new MANIFEST starts from a snapshot of the current files): a store of tens
# of thousands of SST files still fits, and a commit copies and uploads at most this much of it.
_MAX_MANIFEST_BYTES = 4 << 20


def _rocksdict_options(options: RocksDbOptions, cache: Cache, write_buffers: WriteBufferManager) -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_compression_type(_COMPRESSION[options.compression]())
    opts.set_compaction_style(_COMPACTION[options.compaction_style]())
    opts.set_write_buffer_size(options.write_buffer_size_bytes)
    opts.set_max_write_buffer_number(options.num_write_buffers)
    opts.set_max_open_files(options.max_open_files)
    opts.set_max_background_jobs(options.max_background_jobs)
    opts.set_write_buffer_manager(write_buffers)
    # Bounded on disk for a container that runs for months: RocksDB's defaults keep one LOG of unlimited
    # size (a few lines per commit: 2 MB a minute with task.commit.ms=200) and a MANIFEST of up to 1 GiB,
    # which every commit's checkpoint copies and a blob-store commit uploads again (its size changes).
    opts.set_max_log_file_size(_MAX_LOG_FILE_BYTES)
    opts.set_keep_log_file_num(_KEEP_LOG_FILES)
    opts.set_max_manifest_file_size(_MAX_MANIFEST_BYTES)
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    # Index and filter blocks live in the cache so that it bounds them; L0's stay pinned because every
    # lookup reads them, and evicting them would cost a disk read per get.
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    table.set_block_size(options.block_size_bytes)
    if options.bloom_filter_bits_per_key > 0:
        table.set_bloom_filter(options.bloom_filter_bits_per_key, False)  # full filter, not block-based
    opts.set_block_based_table_factory(table)
    return opts


def _open_failure(name: str, path: Path, error: Exception) -> str:
    text = str(error)
    # RocksDB's lock error only, which names the LOCK file ("IO error: While lock file: <dir>/LOCK: Resource
    # temporarily unavailable", or "lock hold by current process ... <dir>/LOCK: No locks available"): a
    # "block checksum mismatch" is damage, not a lock.
    if text.startswith("IO error") and "/LOCK:" in text:
        return (
            f"cannot open store {name!r} at {path}: it is locked ({text}); another container or an "
            "unclosed store in this process holds it - stop that one, or close the store first"
        )
    return f"cannot open store {name!r} at {path}: {text}"
