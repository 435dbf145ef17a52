"""Tasks for the tests of what a task's close() does: it keeps a running total in memory and writes it to
its store `totals` only in close(); init() records what the store held (`SEEN_AT_INIT`)."""

from __future__ import annotations

from typing import Any

from samsa import StreamTask

SEEN_AT_INIT: list[int] = []


class CloseWriter(StreamTask):
    """Adds each message's value to a total kept in memory; close() writes it under key "total"."""

    def init(self, context: Any) -> None:
        self.store = context.store("totals")
        self.total = self.store.get("total") or 0
        SEEN_AT_INIT.append(self.total)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.total += int(envelope.value)

    def close(self) -> None:
        self.store.put("total", self.total)


class FailingClose(CloseWriter):
    """Writes its total, then raises in close()."""

    def close(self) -> None:
        super().close()
        raise RuntimeError("close failed on purpose")
