"""User adjunct store managers that the adjunct tests load by their `stores.adstore.manager.factory` path."""

from __future__ import annotations

from typing import Any, ClassVar

from samsa.runtime.task import IncomingMessageEnvelope


class UpperNameManager:
    """Stores each entry of the store's extractor with its `name` upper-cased (a None value deletes)."""

    plain = False

    def __init__(self, writer: Any, extractor: Any, records: Any) -> None:
        self._writer = writer
        self._extractor = extractor
        self._records = records

    def write(self, envelopes: list[IncomingMessageEnvelope]) -> None:
        entries = [
            (key, None if value is None else {**value, "name": value["name"].upper()})
            for envelope in envelopes
            for key, value in self._extractor.extract(envelope)
        ]
        if entries:
            self._writer.put_all(entries)
            self._records.inc(len(entries))

    def write_pairs(self, pairs: list[tuple[Any, Any]]) -> None:
        raise AssertionError("not plain: the run loop hands over envelopes")


class UpperNameManagerFactory:
    """Makes an `UpperNameManager` per (store, task) and records each call."""

    calls: ClassVar[list[tuple[str, str]]] = []

    def __call__(
        self,
        store: str,
        task_name: str,
        writer: Any,
        extractor: Any,
        records: Any,
        progress: Any,
        bounded: Any,
    ) -> UpperNameManager:
        UpperNameManagerFactory.calls.append((store, task_name))
        return UpperNameManager(writer, extractor, records)


def makes_no_manager(*args: Any) -> object:
    return object()


not_a_factory = 42
