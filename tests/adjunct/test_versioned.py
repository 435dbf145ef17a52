"""Versioned bounded datasets: readers see exactly the last sealed version across seals, restarts, crashes."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.adjunct import versioned
from samsa.adjunct.versioned import POINTER_FILE, VersionedStore
from samsa.stores.api import KeyValueStore
from samsa.stores.exceptions import ReadOnlyStoreError, StoreClosedError, StoreError
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore

NAME = "models"
KEYS = [b"a", b"b", b"c", b"d"]
MARKER = None  # an end-of-dataset marker in a simulated stream
Event = tuple[bytes, bytes | None] | None


class Engines:
    """Opens a versioned store's engines of one kind, and remembers them so a test can "kill" the process."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.opened: list[KeyValueStore[bytes, bytes]] = []

    def __call__(self, path: Path) -> KeyValueStore[bytes, bytes]:
        engine: KeyValueStore[bytes, bytes]
        engine = RocksDbStore(path, name=NAME) if self.kind == "rocksdb" else InMemoryStore(NAME)
        self.opened.append(engine)
        return engine

    def kill(self) -> None:
        """What a killed process leaves behind: the files as they are, and no engine holding them open."""
        for engine in self.opened:
            engine.close()
        self.opened.clear()


class Crash(BaseException):
    """The process dying at an injected step (a BaseException: no handler in the code catches it)."""


@pytest.fixture(params=["rocksdb", "inmemory"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def engines(kind: str) -> Iterator[Engines]:
    made = Engines(kind)
    yield made
    made.kill()


@pytest.fixture
def rocks() -> Iterator[Engines]:
    made = Engines("rocksdb")
    yield made
    made.kill()


def content(store: VersionedStore) -> dict[bytes, bytes]:
    entries = list(store.reader().all())
    assert entries == sorted(entries), "all() must be ascending by key"
    return dict(entries)


def version_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir()}


def feed(store: VersionedStore, stream: list[Event], start: int, batch: int) -> None:
    """Deliver stream[start:] as the adjunct manager does: records in batches, each marker seals."""
    pending: list[tuple[bytes, bytes | None]] = []
    for offset in range(start, len(stream)):
        event = stream[offset]
        if event is MARKER:
            if pending:
                store.write(pending, offset - 1)
                pending = []
            store.seal(offset + 1)
            continue
        pending.append(event)
        if len(pending) == batch:
            store.write(pending, offset)
            pending = []
    if pending:
        store.write(pending, len(stream) - 1)


def last_sealed(stream: list[Event]) -> dict[bytes, bytes]:
    """The model: the dataset between the last two markers, applied to an empty dict."""
    markers = [i for i, event in enumerate(stream) if event is MARKER]
    if not markers:
        return {}
    first = markers[-2] + 1 if len(markers) > 1 else 0
    data: dict[bytes, bytes] = {}
    for event in stream[first : markers[-1]]:
        assert event is not MARKER
        key, value = event
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def expected_resume(stream: list[Event]) -> int | None:
    markers = [i for i, event in enumerate(stream) if event is MARKER]
    return markers[-1] + 1 if markers else None


def test_readers_see_the_sealed_version_until_the_next_seals(tmp_path: Path, engines: Engines) -> None:
    store = VersionedStore(tmp_path, engines, NAME)
    reader = store.reader()  # fetched once: it must follow the seals by itself
    store.write([(b"a", b"1"), (b"b", b"1"), (b"gone", b"1")], offset=2)
    assert reader.get(b"a") is None and list(reader.all()) == []
    assert store.seal(next_offset=4) == 1
    assert content(store) == {b"a": b"1", b"b": b"1", b"gone": b"1"}

    store.write([(b"a", b"2"), (b"c", b"2")], offset=5)
    store.write([(b"b", b"2"), (b"b", None)], offset=7)
    assert content(store) == {b"a": b"1", b"b": b"1", b"gone": b"1"}
    assert reader.get_all([b"a", b"c"]) == {b"a": b"1"}
    assert version_dirs(tmp_path) == {"v1", "v2"}

    assert store.seal(next_offset=9) == 2
    assert content(store) == {b"a": b"2", b"c": b"2"}
    assert reader.get(b"gone") is None and reader.get(b"b") is None
    assert list(reader.range(b"b", b"z")) == [(b"c", b"2")]
    assert version_dirs(tmp_path) == {"v2"}
    assert (store.sealed_version, store.resume_offset) == (2, 9)
    store.close()


def test_a_seal_without_records_seals_an_empty_version(tmp_path: Path, engines: Engines) -> None:
    store = VersionedStore(tmp_path, engines, NAME)
    store.write([(b"a", b"1")], offset=0)
    store.seal(next_offset=2)
    assert store.seal(next_offset=3) == 2
    assert content(store) == {}
    assert version_dirs(tmp_path) == {"v2"}
    store.close()


def test_a_restart_mid_build_serves_the_sealed_version_and_resumes_at_the_build_start(
    tmp_path: Path, rocks: Engines
) -> None:
    store = VersionedStore(tmp_path, rocks, NAME)
    store.write([(b"a", b"1"), (b"b", b"1")], offset=1)
    store.seal(next_offset=3)  # the marker was at offset 2
    store.write([(b"a", b"2")], offset=3)
    store.write([(b"c", b"2")], offset=10)
    store.close()

    again = VersionedStore(tmp_path, rocks, NAME)
    assert again.sealed_version == 1
    assert again.resume_offset == 3
    assert content(again) == {b"a": b"1", b"b": b"1"}
    assert version_dirs(tmp_path) == {"v1"}, "the partial build must be deleted"
    again.write([(b"a", b"2"), (b"c", b"2")], offset=10)
    assert again.seal(next_offset=12) == 2
    assert content(again) == {b"a": b"2", b"c": b"2"}
    again.close()


def test_a_restart_before_any_seal_serves_nothing_and_rereads_from_the_beginning(
    tmp_path: Path, rocks: Engines
) -> None:
    store = VersionedStore(tmp_path, rocks, NAME)
    assert (store.sealed_version, store.resume_offset) == (None, None)
    store.write([(b"a", b"1")], offset=5)
    store.close()

    again = VersionedStore(tmp_path, rocks, NAME)
    assert (again.sealed_version, again.resume_offset) == (None, None)
    assert again.reader().get(b"a") is None and content(again) == {}
    assert version_dirs(tmp_path) == set()
    again.close()


def test_an_in_memory_engine_starts_over_after_a_restart(tmp_path: Path) -> None:
    # Its sealed data died with the process: serving the pointer's version would serve an empty dataset.
    engines = Engines("inmemory")
    store = VersionedStore(tmp_path, engines, NAME)
    store.write([(b"a", b"1")], offset=0)
    store.seal(next_offset=2)
    store.close()

    again = VersionedStore(tmp_path, engines, NAME)
    assert (again.sealed_version, again.resume_offset) == (None, None)
    assert version_dirs(tmp_path) == set()
    again.close()


def test_replayed_records_and_markers_of_sealed_versions_are_ignored(tmp_path: Path, rocks: Engines) -> None:
    stream: list[Event] = [(b"a", b"1"), (b"b", b"1"), MARKER, (b"a", b"2"), MARKER, (b"c", b"3")]
    store = VersionedStore(tmp_path, rocks, NAME)
    feed(store, stream, 0, batch=2)
    store.close()

    again = VersionedStore(tmp_path, rocks, NAME)
    feed(again, stream, 0, batch=1)  # at-least-once: redelivered from the beginning
    assert again.sealed_version == 2
    assert content(again) == {b"a": b"2"}
    stream.append(MARKER)
    feed(again, stream, len(stream) - 1, batch=1)
    assert content(again) == {b"c": b"3"}, "the replayed first dataset must not leak into the build"
    assert again.sealed_version == 3
    again.close()


def test_an_iteration_over_the_old_version_outlives_the_seal(tmp_path: Path, engines: Engines) -> None:
    store = VersionedStore(tmp_path, engines, NAME)
    store.write([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], offset=2)
    store.seal(next_offset=4)
    reader = store.reader()
    unfinished = reader.all()
    abandoned = reader.range(b"a", b"z")
    assert next(unfinished) == (b"a", b"1")
    assert next(abandoned) == (b"a", b"1")

    store.write([(b"z", b"2")], offset=4)
    store.seal(next_offset=6)
    assert content(store) == {b"z": b"2"}
    assert list(unfinished) == [(b"b", b"1"), (b"c", b"1")], "an iterator keeps reading its own version"
    assert version_dirs(tmp_path) == {"v1", "v2"}, "v1 is dropped once its last read ends"
    del abandoned
    assert version_dirs(tmp_path) == {"v2"}
    store.close()


def test_close_ends_reads(tmp_path: Path, engines: Engines) -> None:
    store = VersionedStore(tmp_path, engines, NAME)
    store.write([(b"a", b"1"), (b"b", b"1")], offset=1)
    store.seal(next_offset=3)
    reader = store.reader()
    iterator = reader.all()
    next(iterator)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreClosedError, match=NAME):
        reader.get(b"a")
    with pytest.raises(StoreClosedError):
        next(iterator)
    with pytest.raises(StoreClosedError):
        store.write([(b"a", b"2")], offset=3)


def test_writes_through_the_reader_fail_naming_the_store(tmp_path: Path, engines: Engines) -> None:
    store = VersionedStore(tmp_path, engines, NAME)
    reader = store.reader()
    for write in (
        lambda: reader.put(b"a", b"1"),
        lambda: reader.delete(b"a"),
        lambda: reader.put_all([(b"a", b"1")]),
    ):
        with pytest.raises(
            ReadOnlyStoreError, match=rf"store '{NAME}' is read-only.*stores\.{NAME}\.adstore"
        ):
            write()
    reader.flush()
    reader.close()  # the owner closes the store: the view stays usable
    assert reader.get(b"a") is None
    store.close()


def test_a_corrupt_pointer_rebuilds_from_the_beginning(tmp_path: Path, rocks: Engines) -> None:
    store = VersionedStore(tmp_path, rocks, NAME)
    store.write([(b"a", b"1")], offset=0)
    store.seal(next_offset=2)
    store.close()
    pointer = tmp_path / POINTER_FILE
    pointer.write_text(pointer.read_text().replace('"next-build-start": 2', '"next-build-start": 7'))

    again = VersionedStore(tmp_path, rocks, NAME)
    assert (again.sealed_version, again.resume_offset) == (None, None)
    assert content(again) == {} and version_dirs(tmp_path) == set()
    again.close()


def test_a_pointer_of_another_schema_version_is_refused(tmp_path: Path, rocks: Engines) -> None:
    VersionedStore(tmp_path, rocks, NAME).close()
    versioned.write_checked_json(tmp_path / POINTER_FILE, {"schema-version": 99, "sealed-version": 4})
    with pytest.raises(StoreError, match=rf"{POINTER_FILE}.*schema-version 99.*delete {tmp_path}"):
        VersionedStore(tmp_path, rocks, NAME)


def test_concurrent_readers_always_see_one_whole_version(tmp_path: Path, rocks: Engines) -> None:
    # Version n maps every key to n: a read mixing versions, or of a closed engine, fails the reader.
    store = VersionedStore(tmp_path, rocks, NAME)
    keys = [b"%03d" % i for i in range(20)]
    store.write([(k, b"0") for k in keys], offset=0)
    store.seal(next_offset=1)
    reader = store.reader()
    done = threading.Event()
    failures: list[BaseException] = []
    started = [threading.Event() for _ in range(2)]

    def read(started: threading.Event) -> None:
        try:
            while not done.is_set():
                values = set()
                for _, value in reader.all():
                    values.add(value)
                    time.sleep(0)  # hand the GIL over mid-iteration, so seals land inside iterations
                assert len(values) == 1, values
                assert reader.get(b"007") is not None
                started.set()
        except BaseException as e:
            failures.append(e)
            started.set()

    threads = [threading.Thread(target=read, args=(event,)) for event in started]
    for thread in threads:
        thread.start()
    for event in started:
        event.wait()
    for n in range(1, 8):
        store.write([(k, b"%d" % n) for k in keys], offset=2 * n)
        store.seal(next_offset=2 * n + 1)
    done.set()
    for thread in threads:
        thread.join()
    assert failures == []
    assert set(dict(reader.all()).values()) == {b"7"}
    store.close()
    assert version_dirs(tmp_path) == {"v8"}


# --- property: random streams, seals, restarts and crashes --------------------------------------------------

CRASH_STEPS = ["kill", "before-switch", "torn-pointer", "after-switch", "before-delete"]
records = st.lists(
    st.tuples(st.sampled_from(KEYS), st.none() | st.sampled_from([b"1", b"2", b""])), min_size=1, max_size=5
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("records"), records),
        st.just(("marker",)),
        st.tuples(st.just("restart"), st.booleans()),
        st.tuples(st.just("crash"), st.sampled_from(CRASH_STEPS)),
    ),
    min_size=4,
    max_size=24,
)


def crashing_at(step: str) -> AbstractContextManager[Any]:
    """A patch making the next seal die at `step`."""
    save, delete = versioned._save_pointer, versioned._delete_dir

    def save_pointer(root: Path, pointer: Any) -> None:
        switch = pointer.building is None  # the seal's write (a build start records its building version)
        if switch and step == "before-switch":
            raise Crash
        if switch and step == "torn-pointer":
            (root / f"{POINTER_FILE}.tmp").write_text('{"schema-version": 1, "sealed-')
            raise Crash
        save(root, pointer)
        if switch and step == "after-switch":
            raise Crash

    def delete_dir(path: Path) -> None:
        if step == "before-delete":
            raise Crash
        delete(path)

    if step == "before-delete":
        return mock.patch.object(versioned, "_delete_dir", delete_dir)
    return mock.patch.object(versioned, "_save_pointer", save_pointer)


def check(store: VersionedStore, stream: list[Event]) -> None:
    """The invariant: the reader shows exactly the last sealed dataset, and only its dirs are on disk."""
    expected = last_sealed(stream)
    assert content(store) == expected
    reader = store.reader()
    assert {k: reader.get(k) for k in KEYS} == {k: expected.get(k) for k in KEYS}
    sealed = store.sealed_version
    assert sealed == (sum(event is MARKER for event in stream) or None)
    assert store.resume_offset == expected_resume(stream)
    allowed = {f"v{n}" for n in (sealed or 0, (sealed or 0) + 1)}
    assert version_dirs(store.root) <= allowed


def restart(root: Path, engines: Engines, stream: list[Event], batch: int, *, rewind: bool) -> VersionedStore:
    """Open the store again and re-feed the stream from its resume offset (or, `rewind`, from the start)."""
    store = VersionedStore(root, engines, NAME)
    assert version_dirs(root) <= {f"v{store.sealed_version}"}, "a restart keeps the sealed version only"
    assert {p.name for p in root.iterdir() if not p.is_dir()} <= {POINTER_FILE}, "no leftover temp file"
    start = 0 if rewind else store.resume_offset or 0
    feed(store, stream, start, batch)
    return store


@pytest.mark.parametrize("engine_kind", ["rocksdb", "inmemory"])
@settings(max_examples=40, deadline=None)
@given(ops=operations, batch=st.integers(1, 3))
def test_a_version_switch_never_exposes_a_partial_dataset(
    engine_kind: str, ops: list[tuple[Any, ...]], batch: int
) -> None:
    engines = Engines(engine_kind)
    stream: list[Event] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / NAME
        store = VersionedStore(root, engines, NAME)
        try:
            for op in ops:
                if op[0] == "records":
                    start = len(stream)
                    stream.extend(op[1])
                    feed(store, stream, start, batch)
                elif op[0] == "marker":
                    stream.append(MARKER)
                    feed(store, stream, len(stream) - 1, batch)
                elif op[0] == "restart":
                    store.close()
                    store = restart(root, engines, stream, batch, rewind=op[1])
                else:
                    store = crash_and_recover(root, engines, store, stream, batch, op[1])
                check(store, stream)
        finally:
            engines.kill()


def crash_and_recover(
    root: Path, engines: Engines, store: VersionedStore, stream: list[Event], batch: int, step: str
) -> VersionedStore:
    before = last_sealed(stream)
    if step != "kill":  # "kill": the process dies mid-build, with no seal under way
        stream.append(MARKER)
        with crashing_at(step), suppress(Crash):
            feed(store, stream, len(stream) - 1, batch)
    engines.kill()
    survivor = VersionedStore(root, engines, NAME)
    switched = step in ("after-switch", "before-delete")
    if engines.kind == "rocksdb":
        assert content(survivor) == (last_sealed(stream) if switched else before), "old or new, never a mix"
    else:
        assert content(survivor) == {} and survivor.resume_offset is None
    survivor.close()
    return restart(root, engines, stream, batch, rewind=False)


def test_the_pointer_file_is_checksummed_json(tmp_path: Path, rocks: Engines) -> None:
    store = VersionedStore(tmp_path, rocks, NAME)
    store.write([(b"a", b"1")], offset=0)
    document = json.loads((tmp_path / POINTER_FILE).read_text())
    assert document["building-version"] == 1 and document["sealed-version"] is None
    store.seal(next_offset=2)
    document = json.loads((tmp_path / POINTER_FILE).read_text())
    assert {k: document[k] for k in ("schema-version", "sealed-version", "next-build-start")} == {
        "schema-version": 1,
        "sealed-version": 1,
        "next-build-start": 2,
    }
    assert isinstance(document["crc32"], int)
    store.close()
