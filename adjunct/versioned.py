"""Sealed versions of a bounded adjunct dataset: readers see the last sealed one while the next is built.

A bounded dataset (a model, a reference file) arrives record by record on a stream and ends with an
end-of-dataset marker. Version N of it lives in its own engine dir `root/v<N>`; the pointer file
`root/VERSIONS` names the sealed version, so that rewriting the pointer (atomically) is the one switch
point between versions:

- a build writes into `v<N+1>` beside the sealed `v<N>`; readers keep reading `v<N>`;
- `seal` makes `v<N+1>` durable, rewrites the pointer, points the readers at it, then drops `v<N>`;
- a restart serves the version the pointer names and deletes every other `v<M>`: a build cut short (the
  stream is re-read from where that build started, `resume_offset`) or an old version whose deletion
  the crash interrupted;
- a build whose first records are gone (deleted by retention before they were read) is not made: the
  rest of its dataset is discarded up to its end-of-dataset marker (`discard_to_next_marker`), and the
  next version starts after that. So that records outside any dataset (a transaction's commit record
  after a marker) never pass for such a front, a build starts at the first record it reads
  (`write`'s `first`), and the next start moves past what was read after a seal (`read_past`);
- the pointer also records the settings the versions were built with (`samsa.adjunct.build`): a start
  with other settings drops every version before the store is opened (`drop_versions`, the pointer
  rewritten first) and the dataset is read again from the beginning of its stream.

A crash at any step thus leaves the old sealed version or the new one, never a mix or a partial one.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from samsa.kafka.record_marks import RecordMark
from samsa.stores.api import KeyValueSnapshot, KeyValueStore, LayeredSnapshot, ReplayedSnapshot
from samsa.stores.checkpoint_dirs import fsync_dir, read_checked_json, write_checked_json
from samsa.stores.exceptions import ReadOnlyStoreError, StoreClosedError, StoreError

log = logging.getLogger(__name__)

POINTER_FILE = "VERSIONS"
POINTER_SCHEMA_VERSION = 1
_VERSION_DIR = re.compile(r"v(\d+)")

Engine = KeyValueStore[bytes, bytes]


@runtime_checkable
class _BulkLoadable(Protocol):
    """An engine that can skip its write-ahead log while it is built (RocksDB)."""

    def begin_bulk_load(self) -> None: ...

    def end_bulk_load(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Pointer:
    """What `VERSIONS` records."""

    #: The version readers see; None before the first seal.
    sealed: int | None = None
    #: Offset where the build after `sealed` starts: the offset after its end-of-dataset marker, or the
    #: consumer's position past it when nothing read since wrote into a build (`read_past`).
    next_start: int | None = None
    #: The version being built and the offset its build started from: its first record read, not before
    #: `next_start` (None: the stream's beginning).
    building: int | None = None
    building_start: int | None = None
    #: The end-of-dataset marker before `next_start`, as read: a restart checks that the topic still holds
    #: it (a recreated topic holds other records there). None in the pointers of an older Samsa.
    next_mark: RecordMark | None = None
    #: The settings the sealed version and the build in progress were built with (`samsa.adjunct.build`).
    #: None in the pointers of an older Samsa, which did not record them.
    build: dict[str, object] | None = None


@dataclass(frozen=True)
class BuiltWith:
    """What a store's pointer says of the versions it names, read before the store is opened."""

    sealed: int | None
    building: int | None
    #: The settings they were built with; None in the pointer of an older Samsa (unknown).
    build: dict[str, object] | None


def built_with(root: Path) -> BuiltWith | None:
    """The versions the pointer in `root` names and the settings they were built with; None when it names
    none (no pointer, or an unreadable one: the store starts over anyway) or only a build in progress of
    an older Samsa (discarded at the start anyway, and read again with the current settings)."""
    path = root / POINTER_FILE
    _, document, _ = read_checked_json(path)
    pointer = None if document is None else _parse_pointer(document, path, root)
    if pointer is None or (pointer.sealed is None and (pointer.building is None or pointer.build is None)):
        return None
    return BuiltWith(pointer.sealed, pointer.building, pointer.build)


def drop_versions(root: Path, build: Mapping[str, object]) -> None:
    """Empties the store in `root` before it is opened, its versions built with other settings than
    `build`: the dataset is then read again from the beginning of its stream, built with `build`. The
    pointer naming no version (recording `build`) replaces the old one first, atomically: from then on no
    old version is served, even if a crash interrupts the deletion of their dirs (the next start deletes
    them); a crash before it leaves the old pointer, and the next start finds the change again."""
    _save_pointer(root, _Pointer(build=dict(build)))
    for _, version_dir in _version_dirs(root):
        _delete_dir(version_dir)


class VersionedStore:
    """Sealed versions of a bounded dataset in `root` (one engine dir per version + a pointer file).

    The feeding side (`write`, `seal`, `flush`, `close`) runs on one thread; `reader()` may be read from
    any thread (a broadcast store is read by every task of the container). A read pins the version it
    started on, so a seal never closes an engine under a `get` or an unfinished `all()`/`range()`
    iterator: the replaced version is closed and its dir deleted when its last read ends (an iterator
    is exhausted, closed or garbage collected). An iterator kept alive without being finished keeps the
    old version's files on disk until then; a restart deletes them in any case.

    The engine must keep its data in the version's dir: a restart trusts the pointer only when the sealed
    version's dir holds files. With an engine that writes nothing there (in-memory) a restart therefore
    starts over, `resume_offset` None: the dataset is re-read from the beginning of its stream.
    """

    def __init__(self, root: Path, open_engine: Callable[[Path], Engine], name: str) -> None:
        self.root = root
        self.name = name
        self._open_engine = open_engine
        self._closed = False
        self._building: _Version | None = None
        #: The first offset read while the records before the next end-of-dataset marker are discarded (the
        #: front of their dataset was deleted before it was read: `discard_to_next_marker`); else None.
        self._discarding: int | None = None
        root.mkdir(parents=True, exist_ok=True)
        self._pointer = self._recover()
        self._serving = _Serving(name)
        if self._pointer.sealed is not None:
            self._serving.swap(self._open(self._pointer.sealed))
        self._reader = VersionedReader(self._serving, name)

    @property
    def sealed_version(self) -> int | None:
        """The version readers see; None while no version was ever sealed."""
        return self._pointer.sealed

    @property
    def next_mark(self) -> RecordMark | None:
        """The mark of the end-of-dataset marker just before `resume_offset`, when recorded."""
        pointer = self._pointer
        return pointer.next_mark if pointer.next_start is not None else None

    def rebuild_next_from_start(self) -> None:
        """Builds the next version from the stream's beginning: its topic is not the one the sealed version
        was read from (deleted and recreated). The sealed version is served until the next one is sealed."""
        self._check_open()
        self._pointer = replace(
            self._pointer, next_start=None, next_mark=None, building=None, building_start=None
        )
        _save_pointer(self.root, self._pointer)

    def discard_to_next_marker(self, first: int) -> None:
        """The stream is read from offset `first`, past records of the dataset `resume_offset` starts that are
        gone (deleted by retention before they were read): the records up to the next end-of-dataset marker
        are the rest of an incomplete dataset. They are discarded, and that marker seals nothing: it only
        marks where the next version starts (`seal`). The sealed version is served meanwhile. Not recorded:
        a restart before the marker finds the resume offset below the partition's oldest one again."""
        self._check_open()
        self._discarding = first

    @property
    def discarding(self) -> bool:
        """Whether the records read are discarded until the next end-of-dataset marker."""
        return self._discarding is not None

    def record_build(self, build: Mapping[str, object]) -> None:
        """Records `build`, the settings the versions are built with from now on (`samsa.adjunct.build`),
        with the versions the pointer names. A pointer recording none (an older Samsa's, or a fresh one) gets
        them: its sealed version is taken as built with them. Versions recorded as built with other settings
        are refused (`StoreError`): they are dropped before the store is opened (`drop_versions`)."""
        self._check_open()
        settings = dict(build)
        pointer = self._pointer
        if pointer.build == settings:
            return
        holds = pointer.sealed is not None or pointer.building is not None
        if holds and pointer.build is not None and not _same_build(pointer.build, settings):
            raise StoreError(
                f"store {self.name!r}: its version pointer {self.root / POINTER_FILE} names versions built "
                "with other settings than the current ones; drop them before the store is opened "
                f"(samsa.adjunct.versioned.drop_versions), or delete {self.root} to rebuild the dataset "
                "from its stream"
            )
        self._pointer = replace(pointer, build=settings)
        _save_pointer(self.root, self._pointer)

    @property
    def resume_follows_marker(self) -> bool:
        """Whether `resume_offset` is the offset right after the last end-of-dataset marker, no build under
        way and nothing read after the marker recorded (`read_past`): the record there may be a
        transaction's commit record, which no consumer ever reads, rather than the next dataset's first."""
        pointer = self._pointer
        return (
            pointer.building is None
            and pointer.next_start is not None
            and (pointer.next_mark is None or pointer.next_start == pointer.next_mark.offset + 1)
        )

    def read_past(self, offset: int) -> None:
        """The stream was read up to `offset` (the consumer's position), every record before it handed to
        the store and none of them writing into a build: the next build starts there at the earliest. A
        consumer's position moves past a transaction's commit record, which it never delivers; recorded, a
        restart after retention deleted the sealed dataset up to that commit record does not take the
        commit record for the deleted front of the next dataset."""
        self._check_open()
        pointer = self._pointer
        if self._building is not None or self._discarding is not None or pointer.building is not None:
            return  # a build records where it started itself (`write`)
        if pointer.next_start is None or offset <= pointer.next_start:
            return
        self._pointer = replace(pointer, next_start=offset)
        _save_pointer(self.root, self._pointer)
        log.debug("store %r: the next version starts at offset %d at the earliest", self.name, offset)

    @property
    def resume_offset(self) -> int | None:
        """Offset to re-read the stream from after a restart: where the unfinished (or next) build starts.

        None means the stream's beginning (no version sealed yet).
        """
        pointer = self._pointer
        return pointer.building_start if pointer.building is not None else pointer.next_start

    def write(
        self, entries: Iterable[tuple[bytes, bytes | None]], offset: int, first: int | None = None
    ) -> None:
        """Apply `entries` (None values delete) to the version being built, starting one if none is.

        `offset` is the offset of the batch's last record, `first` (when known) that of its first: a build
        it starts records that it starts there, so a restart reads the stream again from the first record
        the build read, not from a record before it that no consumer reads (a transaction's commit
        record). A batch `skips` are not written.
        """
        self._check_open()
        if self.skips(offset):
            log.debug("store %r: not writing the records up to offset %d", self.name, offset)
            return
        building = self._building or self._start_build(first)
        building.engine.put_all(entries)

    def skips(self, offset: int) -> bool:
        """Whether `write` skips a batch whose last record is at `offset`: the rest of an incomplete dataset
        (`discard_to_next_marker`), or a redelivery of records a sealed version already holds (at-least-once
        replay: the batch is before the current build's start)."""
        start = self._pointer.next_start
        return self._discarding is not None or (start is not None and offset < start)

    def seal(self, next_offset: int, mark: RecordMark | None = None) -> int | None:
        """Seal the version being built (an empty one if nothing was written) and switch readers to it.

        `next_offset` is where the next build starts (the offset after the end-of-dataset marker, whose
        `mark` a restart checks).
        Returns the sealed version's number. A marker replayed from before the current build (its
        `next_offset` not beyond the last seal's) changes nothing and returns the sealed version. The marker
        ending an incomplete dataset (`discard_to_next_marker`) seals nothing: the next version starts after
        it, and the version still served is returned (None before the first seal).
        """
        self._check_open()
        pointer = self._pointer
        if (
            pointer.sealed is not None
            and pointer.next_start is not None
            and next_offset <= pointer.next_start
        ):
            log.info(
                "store %r: end-of-dataset marker before offset %d was already sealed as version %d; "
                "ignoring the replay",
                self.name,
                next_offset,
                pointer.sealed,
            )
            return pointer.sealed
        discarded_from = self._discarding
        if discarded_from is not None:
            self._pointer = replace(
                pointer, next_start=next_offset, next_mark=mark, building=None, building_start=None
            )
            _save_pointer(self.root, self._pointer)
            self._discarding = None
            log.warning(
                "store %r: discarded offsets %d to %d, the rest of a dataset whose first records were "
                "deleted before they were read; the next version starts at offset %d%s",
                self.name,
                discarded_from,
                next_offset - 1,
                next_offset,
                "" if pointer.sealed is None else f", version {pointer.sealed} served until it is sealed",
            )
            return pointer.sealed
        building = self._building or self._start_build(None)
        _finish_build(building.engine)
        # The pointer must never name a dir whose entry a power loss could still take away.
        fsync_dir(building.path)
        fsync_dir(self.root)
        sealed = _Pointer(sealed=building.number, next_start=next_offset, next_mark=mark, build=pointer.build)
        _save_pointer(self.root, sealed)  # the switch point: a restart now serves the new version
        self._pointer = sealed
        self._building = None
        self._serving.swap(building)
        log.info(
            "store %r: sealed version %d; the next one starts at offset %d",
            self.name,
            sealed.sealed,
            next_offset,
        )
        return building.number

    def reader(self) -> KeyValueStore[bytes, bytes]:
        """A read-only view that always reads the current sealed version (empty before the first seal)."""
        return self._reader

    def flush(self) -> None:
        """Nothing to make durable: a version is flushed when it is sealed, and a build in progress is
        discarded by a restart anyway, so flushing it would buy nothing."""
        self._check_open()

    def close(self) -> None:
        """Close every engine; readers then raise `StoreClosedError`. A partial build's dir is deleted at
        the next start (it is discarded there anyway). Idempotent."""
        if self._closed:
            return
        self._closed = True
        building, self._building = self._building, None
        try:
            if building is not None:
                building.engine.close()
        finally:
            self._serving.close()

    def _recover(self) -> _Pointer:
        """The pointer on disk, after deleting every version dir it does not name as sealed."""
        path = self.root / POINTER_FILE
        problem, document, _ = read_checked_json(path)
        pointer = _Pointer()
        if document is not None:
            parsed = _parse_pointer(document, path, self.root)
            if parsed is None:
                problem = "fields of the wrong type"
            else:
                pointer = parsed
        reset = problem not in ("", "missing")
        if reset:
            log.warning(
                "store %r: ignoring its version pointer %s (%s); the dataset is rebuilt from the "
                "beginning of its stream",
                self.name,
                path,
                problem,
            )
        if pointer.sealed is not None and not _holds_files(self._dir(pointer.sealed)):
            log.warning(
                "store %r: sealed version dir %s holds no data (the engine keeps none on disk, or the dir "
                "was removed); the dataset is rebuilt from the beginning of its stream",
                self.name,
                self._dir(pointer.sealed),
            )
            pointer, reset = _Pointer(), True
        for number, version_dir in _version_dirs(self.root):
            if number != pointer.sealed:
                log.info(
                    "store %r: deleting %s, a version that is not the sealed one", self.name, version_dir
                )
                _delete_dir(version_dir)
        path.with_name(f"{POINTER_FILE}.tmp").unlink(missing_ok=True)
        if reset:
            _save_pointer(self.root, pointer)
        if pointer.building is not None:
            log.info(
                "store %r: the build of version %d was cut short; it restarts from offset %s",
                self.name,
                pointer.building,
                pointer.building_start,
            )
        return pointer

    def _start_build(self, first: int | None) -> _Version:
        number = (self._pointer.sealed or 0) + 1
        start = self._pointer.next_start
        if first is not None:
            start = first if start is None else max(start, first)
        self._pointer = replace(self._pointer, building=number, building_start=start)
        _save_pointer(self.root, self._pointer)
        path = self._dir(number)
        if path.exists():
            _delete_dir(path)  # what an earlier attempt of this build left (a seal that failed to switch)
        path.mkdir()
        version = self._open(number)
        if isinstance(version.engine, _BulkLoadable):
            # A crash discards the build, so its writes need no write-ahead log until the seal flushes.
            version.engine.begin_bulk_load()
        self._building = version
        return version

    def _open(self, number: int) -> _Version:
        path = self._dir(number)
        return _Version(number, path, self._open_engine(path))

    def _dir(self, number: int) -> Path:
        return self.root / f"v{number}"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(self.name)

    def __repr__(self) -> str:
        pointer = self._pointer
        return (
            f"VersionedStore({self.name!r}, {self.root}, sealed={pointer.sealed}, building={pointer.building}"
            f"{', closed' if self._closed else ''})"
        )


class VersionedReader(KeyValueStore[bytes, bytes]):
    """What readers of a versioned store get: reads of its current sealed version, no writes.

    `flush` and `close` do nothing: the store's owner flushes and closes it.
    """

    def __init__(self, serving: _Serving, name: str) -> None:
        self._serving = serving
        self.name = name

    def get(self, key: bytes) -> bytes | None:
        version = self._serving.pin()
        if version is None:
            return None
        try:
            return version.engine.get(key)
        finally:
            self._serving.unpin(version)

    def get_all(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        version = self._serving.pin()
        if version is None:
            return {}
        try:
            return version.engine.get_all(keys)
        finally:
            self._serving.unpin(version)

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self._pinned(lambda engine: engine.range(from_key, to_key))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._pinned(lambda engine: engine.all())

    def snapshot(self, from_key: bytes, to_key: bytes) -> KeyValueSnapshot[bytes, bytes]:
        """The range in the current sealed version; that version stays open until the snapshot is
        closed (or garbage collected), as for an unfinished iterator."""
        serving = self._serving
        version = serving.pin()
        if version is None:
            return ReplayedSnapshot(iter(()), self.name, serving.check_open)
        try:
            below = version.engine.snapshot(from_key, to_key)
        except BaseException:
            serving.unpin(version)
            raise
        return LayeredSnapshot(below, iter, lambda: serving.unpin(version))

    def put(self, key: bytes, value: bytes | None) -> None:
        raise self._read_only()

    def delete(self, key: bytes) -> None:
        raise self._read_only()

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        raise self._read_only()

    def flush(self) -> None:
        """The store's owner flushes it."""

    def close(self) -> None:
        """The store's owner closes it."""

    def _pinned(
        self, read: Callable[[Engine], Iterator[tuple[bytes, bytes]]]
    ) -> Iterator[tuple[bytes, bytes]]:
        version = self._serving.pin()
        if version is None:
            return iter(())
        try:
            entries = read(version.engine)
        except BaseException:
            self._serving.unpin(version)
            raise
        return _PinnedEntries(self._serving, version, entries)

    def _read_only(self) -> ReadOnlyStoreError:
        return ReadOnlyStoreError(self.name, f"its input stream (stores.{self.name}.adstore.input)")

    def __repr__(self) -> str:
        return f"VersionedReader({self.name!r})"


class _Version:
    """One version's engine, with the count of reads still using it."""

    __slots__ = ("engine", "number", "path", "pins", "retired")

    def __init__(self, number: int, path: Path, engine: Engine) -> None:
        self.number = number
        self.path = path
        self.engine = engine
        self.pins = 0
        self.retired = False


class _Serving:
    """The sealed version readers see, swapped under a lock; a replaced one is dropped after its last read.

    The lock is reentrant because an iterator's unpin may run from garbage collection on a thread that
    already holds it.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.RLock()
        self._current: _Version | None = None
        self._draining: list[_Version] = []  # replaced versions some read still uses
        self._closed = False

    def pin(self) -> _Version | None:
        with self._lock:
            if self._closed:
                raise StoreClosedError(self._name)
            version = self._current
            if version is not None:
                version.pins += 1
            return version

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(self._name)

    def unpin(self, version: _Version) -> None:
        with self._lock:
            version.pins -= 1
            idle = version.retired and version.pins == 0
            if idle and version in self._draining:
                self._draining.remove(version)
        if idle:
            _drop(version)

    def swap(self, new: _Version) -> None:
        with self._lock:
            old, self._current = self._current, new
            if old is None:
                return
            old.retired = True
            idle = old.pins == 0
            if not idle:
                self._draining.append(old)
        if idle:
            _drop(old)
        else:
            log.debug("version dir %s is dropped once its %d open reads end", old.path, old.pins)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            current, self._current = self._current, None
            draining, self._draining = self._draining, []
        for version in draining:
            _drop(version)
        if current is not None:
            current.engine.close()


class _PinnedEntries(Iterator[tuple[bytes, bytes]]):
    """An iterator over one version that keeps that version open until it is exhausted or dropped."""

    def __init__(self, serving: _Serving, version: _Version, entries: Iterator[tuple[bytes, bytes]]) -> None:
        self._serving: _Serving | None = serving
        self._version = version
        self._entries: Iterator[tuple[bytes, bytes]] | None = entries
        self._store_closed = False

    def __next__(self) -> tuple[bytes, bytes]:
        entries = self._entries
        if entries is None:
            if self._store_closed:
                raise StoreClosedError(self._version.engine.name)
            raise StopIteration
        try:
            return next(entries)
        except StoreClosedError:
            self._store_closed = True
            self.close()
            raise
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the version now rather than at garbage collection."""
        serving, self._serving = self._serving, None
        self._entries = None
        if serving is not None:
            serving.unpin(self._version)

    def __del__(self) -> None:
        self.close()


def _finish_build(engine: Engine) -> None:
    if isinstance(engine, _BulkLoadable):
        engine.end_bulk_load()  # flushes what skipped the log, and logs later writes again
    else:
        engine.flush()


def _drop(version: _Version) -> None:
    """Close a replaced version and delete its dir; a dir left behind is deleted at the next start."""
    try:
        version.engine.close()
        _delete_dir(version.path)
    except StoreError as e:
        log.warning(
            "could not drop replaced version %d: %s; it is deleted at the next start", version.number, e
        )


def _delete_dir(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise StoreError(f"cannot delete version dir {path}: {e}; remove it by hand") from e


def _save_pointer(root: Path, pointer: _Pointer) -> None:
    payload: dict[str, Any] = {
        "schema-version": POINTER_SCHEMA_VERSION,
        "sealed-version": pointer.sealed,
        "next-build-start": pointer.next_start,
        "building-version": pointer.building,
        "building-start": pointer.building_start,
        "next-build-start-mark": None if pointer.next_mark is None else pointer.next_mark.to_json(),
        # An added field, not a new schema version: an older Samsa still reads the pointer (as before).
        "build-settings": pointer.build,
    }
    write_checked_json(root / POINTER_FILE, payload)


def _parse_pointer(document: dict[str, Any], path: Path, root: Path) -> _Pointer | None:
    """The pointer `document` holds; None when a field has the wrong type."""
    version = document.get("schema-version")
    if version != POINTER_SCHEMA_VERSION:
        raise StoreError(
            f"version pointer {path} has schema-version {version!r}, this Samsa reads "
            f"{POINTER_SCHEMA_VERSION}: run the Samsa that wrote it, or delete {root} to rebuild the dataset "
            "from its stream"
        )
    names = ("sealed-version", "next-build-start", "building-version", "building-start")
    fields = [document.get(name) for name in names]
    if not all(value is None or (isinstance(value, int) and not isinstance(value, bool)) for value in fields):
        return None
    # Absent from an older Samsa's pointer, or unreadable: nothing to check at the restart.
    sealed, next_start, building, building_start = fields
    build = document.get("build-settings")  # absent from the pointer of an older Samsa
    return _Pointer(
        sealed,
        next_start,
        building,
        building_start,
        RecordMark.from_json(document.get("next-build-start-mark")),
        build if isinstance(build, dict) else None,
    )


def _same_build(recorded: Mapping[str, object], current: Mapping[str, object]) -> bool:
    """Whether two recorded settings are the same, a key absent from one taken as unset (as
    `samsa.adjunct.build.build_change` does)."""
    return all(recorded.get(key) == current.get(key) for key in set(recorded) | set(current))


def _version_dirs(root: Path) -> list[tuple[int, Path]]:
    found = []
    for entry in root.iterdir():
        match = _VERSION_DIR.fullmatch(entry.name)
        if match is not None and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def _holds_files(path: Path) -> bool:
    try:
        return any(path.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return False
