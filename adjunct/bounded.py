"""A bounded dataset's adjunct store as an engine: reads see the last sealed version, writes build the next.

The storage manager layers it like any engine (serdes, cache), so the adjunct handler writes records with
`put_all` and the task reads through the same read-only view as other adjunct stores. A message carrying
the `END_OF_DATASET` header seals the version being built (`seal`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from samsa.adjunct.versioned import VersionedStore
from samsa.kafka.record_marks import RecordMark
from samsa.stores.api import KeyValueSnapshot, KeyValueStore
from samsa.stores.factory import StoreSpec, open_engine

END_OF_DATASET = "samsa.end.of.dataset"
"""The control header that ends a dataset: the version built so far is sealed (the message is not stored)."""


def has_end_marker(headers: Iterable[tuple[str, bytes | None]] | None) -> bool:
    return any(name == END_OF_DATASET for name, _ in headers or ())


class BoundedDatasetEngine(KeyValueStore[bytes, bytes]):
    """`KeyValueStore[bytes, bytes]` over a `VersionedStore`: `offset` and `first` are the stream offsets of
    the last and the first record whose entries the next `put_all` writes (set by the adjunct handler;
    `first` None when unknown)."""

    def __init__(self, spec: StoreSpec, root: Path) -> None:
        self.name = spec.name
        root.mkdir(parents=True, exist_ok=True)
        self.versions = VersionedStore(root, lambda path: open_engine(spec, path), spec.name)
        self._reader = self.versions.reader()
        self.offset = -1
        self.first: int | None = None

    @property
    def resume_offset(self) -> int | None:
        """Where the stream is read from after a start: the start of the version still being built."""
        return self.versions.resume_offset

    def seal(self, next_offset: int, mark: RecordMark | None = None) -> int | None:
        """Seals the version built so far (`VersionedStore.seal`); the version served after it."""
        return self.versions.seal(next_offset, mark)

    def skips(self, offset: int) -> bool:
        """Whether records up to `offset` are not written (`VersionedStore.skips`): discarded or replayed."""
        return self.versions.skips(offset)

    def get(self, key: bytes) -> bytes | None:
        return self._reader.get(key)

    def get_all(self, keys: Iterable[bytes]) -> dict[bytes, bytes]:
        return self._reader.get_all(keys)

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self._reader.range(from_key, to_key)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._reader.all()

    def snapshot(self, from_key: bytes, to_key: bytes) -> KeyValueSnapshot[bytes, bytes]:
        return self._reader.snapshot(from_key, to_key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.put_all([(key, value)])

    def delete(self, key: bytes) -> None:
        self.put_all([(key, None)])

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        self.versions.write(entries, self.offset, self.first)

    def flush(self) -> None:
        self.versions.flush()

    def close(self) -> None:
        self.versions.close()
