"""Writes the messages of an adjunct store's stream into the store, a chunk at a time."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from samsa.adjunct.bounded import BoundedDatasetEngine, has_end_marker
from samsa.adjunct.extractors import Entry, EnvelopeExtractor, KeyValueExtractor
from samsa.adjunct.offsets import RecordMark
from samsa.runtime.task import IncomingMessageEnvelope
from samsa.stores.api import KeyValueStore
from samsa.stores.backend import RestoreProgress

log = logging.getLogger(__name__)


class Count(Protocol):
    def inc(self, n: float = 1) -> None: ...


class AdjunctWriter:
    """The run loop's writer for one adjunct store of one task: extracts each message's entries and writes a
    chunk with one `put_all` (one engine batch). A bounded dataset's end marker seals its version."""

    def __init__(
        self,
        store: str,
        task: str,
        writer: KeyValueStore[Any, Any],
        extractor: KeyValueExtractor,
        stored: Count,
        progress: RestoreProgress | None = None,
        bounded: BoundedDatasetEngine | None = None,
    ) -> None:
        self.store = store
        self.task = task
        self._writer = writer
        self._extract = extractor.extract
        self._stored = stored
        self._progress = progress
        self._bounded = bounded
        #: The messages' keys and values are the entries (the default extractor, no versions): the run loop
        #: may hand over (key, value) pairs instead of envelopes (`write_pairs`).
        self.plain = isinstance(extractor, EnvelopeExtractor) and bounded is None
        #: Whether the run loop may hand over the messages' raw bytes (`write_raw_pairs`).
        self.raw_pairs = False
        self._raw: Any = None

    def write_raw_to(self, engine: Any) -> None:
        """From now on `write_raw_pairs` may write the messages' own bytes into `engine`, the byte store
        below the serde layer (the stream's serdes are the store's and keep keys byte for byte)."""
        self._raw = engine
        self.raw_pairs = self.plain

    def write_raw_pairs(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
        """Writes keyed messages' raw (key, value) bytes, already checked to decode (`raw_pairs` only)."""
        if pairs:
            self._raw.put_all(pairs)
            self._stored.inc(len(pairs))
            if self._progress is not None:
                self._progress.records += len(pairs)

    def write_pairs(self, pairs: list[Entry]) -> None:
        """Writes decoded (key, value) pairs of keyed messages (`plain` writers only)."""
        self._put(pairs, -1)

    def write(self, envelopes: list[IncomingMessageEnvelope]) -> None:
        """Writes the chunk's entries, sealing a bounded dataset's version at its end marker. Every message
        is extracted before anything is written: an `ExtractionError` leaves the chunk unwritten (the run
        loop applies the bad-message policy to that message and writes the others again)."""
        bounded, extract = self._bounded, self._extract
        extracted = [
            None if bounded is not None and has_end_marker(envelope.headers) else _all(extract(envelope))
            for envelope in envelopes
        ]
        entries: list[Entry] = []
        for envelope, found in zip(envelopes, extracted, strict=True):
            if found is None:
                assert self._bounded is not None
                self._put(entries, envelope.offset - 1)
                entries = []
                self._writer.flush()  # every record of the version reaches it before the seal
                # The marker's mark: a restart checks the topic still holds it (not recreated since).
                stamp = envelope.timestamp
                mark = None if stamp is None else RecordMark(envelope.offset, stamp)
                version = self._bounded.seal(envelope.offset + 1, mark)
                log.info("adjunct store %s of %s: version %d sealed", self.store, self.task, version)
                continue
            entries.extend(found)
        if envelopes:
            self._put(entries, envelopes[-1].offset)

    def _put(self, entries: list[Entry], offset: int) -> None:
        if not entries:
            return
        if self._bounded is not None:
            self._bounded.offset = offset
        self._writer.put_all(entries)
        self._stored.inc(len(entries))
        if self._progress is not None:
            self._progress.records += len(entries)


def _all(entries: Iterable[Entry]) -> Iterable[Entry]:
    """The entries, a lazy extractor's (a generator) run to its end: its errors surface before any write."""
    return entries if isinstance(entries, (tuple, list)) else list(entries)
