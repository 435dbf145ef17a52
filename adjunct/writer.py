"""Writes the messages of an adjunct store's stream into the store, a chunk at a time."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from samsa.adjunct.bounded import BoundedDatasetEngine, has_end_marker
from samsa.adjunct.exceptions import ExtractionError, StoreSerdeMismatchError
from samsa.adjunct.extractors import Entry, EnvelopeExtractor, KeyValueExtractor, extractor_factory_key
from samsa.kafka.record_marks import RecordMark
from samsa.runtime.task import IncomingMessageEnvelope
from samsa.stores.api import KeyValueStore
from samsa.stores.backend import RestoreProgress
from samsa.stores.serialized import SerializedStore

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
        self._extractor = extractor
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
        try:
            self._write(envelopes, extracted)
        except Exception as e:
            refused = self._refused(envelopes, extracted)
            if refused is None:
                raise  # not the store's serdes: the engine below failed
            raise refused from e

    def _write(
        self, envelopes: list[IncomingMessageEnvelope], extracted: list[Iterable[Entry] | None]
    ) -> None:
        entries: list[Entry] = []
        first: int | None = None  # the offset of the first record whose entries are in `entries`
        for envelope, found in zip(envelopes, extracted, strict=True):
            if found is None:
                assert self._bounded is not None
                self._put(entries, envelope.offset - 1, first)
                entries, first = [], None
                self._writer.flush()  # every record of the version reaches it before the seal
                # The marker's mark: a restart checks the topic still holds it (not recreated since).
                stamp = envelope.timestamp
                mark = None if stamp is None else RecordMark(envelope.offset, stamp)
                version = self._bounded.seal(envelope.offset + 1, mark)
                log.info(
                    "adjunct store %s of %s: end-of-dataset marker at offset %d read; serving version %s",
                    self.store,
                    self.task,
                    envelope.offset,
                    version,
                )
                continue
            if first is None:
                first = envelope.offset
            entries.extend(found)
        if envelopes:
            self._put(entries, envelopes[-1].offset, first)

    def _refused(
        self, envelopes: list[IncomingMessageEnvelope], extracted: list[Iterable[Entry] | None]
    ) -> Exception | None:
        """Why the store's serdes refused an entry of the chunk, found entry by entry (a failed write
        only): a `StoreSerdeMismatchError` when no record of the chunk fits the refusing serde and the
        store holds no row (nothing shows the serde fits this stream: every record would fail), else an
        `ExtractionError` of the first record refused (one bad record: the job's bad-message policy
        applies). None when the serdes take every entry."""
        serdes = store_serdes(self._writer)
        if serdes is None:
            return None
        fits = {"key": False, "msg": False}
        first: tuple[IncomingMessageEnvelope, str, Any, Exception] | None = None
        for envelope, found in zip(envelopes, extracted, strict=True):
            for key, value in found or ():
                refusal = _refusal(serdes, key, value)
                if refusal is None:
                    fits["key"] = True
                    fits["msg"] = fits["msg"] or value is not None
                elif first is None:
                    part, error = refusal
                    first = (envelope, part, key if part == "key" else value, error)
        if first is None:
            return None
        envelope, part, refused, error = first
        serde = serdes[0] if part == "key" else serdes[1]
        serde_name = getattr(serde, "name", type(serde).__name__)
        setting = f"stores.{self.store}.{part}.serde"
        what = "key" if part == "key" else "value"
        kind = type(refused).__name__
        where = (
            f"topic {envelope.stream} partition {envelope.partition} offset {envelope.offset} "
            f"(system {envelope.system})"
        )
        if isinstance(self._extractor, EnvelopeExtractor):  # the stream's serde made the value
            source = f"systems.{envelope.system}.streams.{envelope.stream}.samza.{part}.serde"
            made = f"the {what} of type {kind} that the stream's {part} serde ({source}) decoded from {where}"
            other = f"decode the stream with a serde giving {what}s the {serde_name!r} serde takes"
        else:
            extractor = f"{extractor_factory_key(self.store)} ({type(self._extractor).__name__})"
            made = f"the {what} of type {kind} that {extractor} made of {where}"
            other = f"use an extractor that makes {what}s the {serde_name!r} serde takes"
        if not fits[part] and self._empty():
            fitting = _SERDE_FOR.get(kind)
            serde_hint = f"a serde that takes {kind}" + (f" (e.g. {fitting})" if fitting else "")
            return StoreSerdeMismatchError(
                setting,
                f"the {serde_name!r} serde cannot store {made}, nor that of any other record read "
                f"({error}); no record fits it and the store is empty, so every record would fail the "
                f"same way: set {setting} to {serde_hint}, or {other}",
            )
        return ExtractionError(
            envelope,
            f"{setting} (the {serde_name!r} serde) cannot store the {what} of type {kind} extracted from it "
            f"({error}), though it takes other records of the stream",
        )

    def _empty(self) -> bool:
        """Whether the store holds no row (rows it holds show its serdes took records of this stream)."""
        try:
            return next(iter(self._writer.all()), None) is None
        except Exception:
            return True  # cannot tell: no evidence that the serde fits

    def _put(self, entries: list[Entry], offset: int, first: int | None = None) -> None:
        """Writes `entries`, of the records from offset `first` to `offset` (a bounded dataset's build
        starts at `first`)."""
        if not entries:
            return
        bounded = self._bounded
        if self._progress is not None:
            self._progress.records += len(entries)  # read, written or not: the progress is the stream's
        if bounded is not None:
            if bounded.skips(offset):
                return  # discarded or replayed: not written, so not counted as written
            bounded.offset, bounded.first = offset, first
        self._writer.put_all(entries)
        self._stored.inc(len(entries))


# A serde taking values of these types, suggested when a store's serde takes none of its records.
_SERDE_FOR = {"dict": "json", "list": "json", "str": "string", "bytes": "bytes", "int": "long"}


def store_serdes(store: KeyValueStore[Any, Any]) -> tuple[Any, Any] | None:
    """The (key, msg) serdes of the typed layer below `store`'s other layers; None without one."""
    layer: Any = store
    for _ in range(8):  # a handful of layers at most: never loops on a store pointing at itself
        if isinstance(layer, SerializedStore):
            return layer.key_serde, layer.msg_serde
        layer = getattr(layer, "inner", None)
        if layer is None:
            return None
    return None


def _refusal(serdes: tuple[Any, Any], key: Any, value: Any) -> tuple[str, Exception] | None:
    """("key" or "msg", the serde's error) when a serde of the store refuses the entry, else None."""
    for part, serde, obj in (("key", serdes[0], key), ("msg", serdes[1], value)):
        if obj is None and part == "msg":
            continue  # a delete: no value to serialize
        try:
            serde.to_bytes(obj)
        except Exception as e:
            return part, e
    return None


def _all(entries: Iterable[Entry]) -> Iterable[Entry]:
    """The entries, a lazy extractor's (a generator) run to its end: its errors surface before any write."""
    return entries if isinstance(entries, (tuple, list)) else list(entries)
