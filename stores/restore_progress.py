"""Shows restore progress: a bar on a terminal, periodic log lines otherwise (records, KB/MB, rate, ETA).

The restore metrics (`samsa_store_restored_records`, `..._remaining_records`) read the same `RestoreProgress`
objects at scrape time (`samsa.runtime.store_metrics`): what this logs and what is scraped agree."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from typing import TextIO

from samsa.stores.backend import RestoreProgress

log = logging.getLogger(__name__)

# Log lines are for people reading logs: every 10 s is enough; a terminal bar redraws faster.
_LOG_INTERVAL_S = 10.0
_BAR_INTERVAL_S = 0.5


def size(n: int) -> str:
    """Bytes for people: KB below 1 MB (`0.0 MB` hid a small store's restore), else MB."""
    if n < 1_000_000:
        return f"{n / 1e3:.1f} KB"
    return f"{n / 1e6:,.1f} MB"


def describe(p: RestoreProgress, elapsed: float) -> str:
    """`task/store: records [of total], MB, records/s, ETA` for one store."""
    rate = p.records / elapsed if elapsed > 0 else 0.0
    total = f" of {p.total_records:,}" if p.total_records is not None else ""
    eta = ""
    if p.total_records is not None and rate > 0 and not p.done:
        eta = f", ETA {max(0.0, (p.total_records - p.records) / rate):.0f} s"
    state = "done" if p.done else f"{rate:,.0f} records/s{eta}"
    if p.total_files is not None:  # a bulk download: files, not records
        files_rate = p.files / elapsed if elapsed > 0 else 0.0
        state = "done" if p.done else f"{p.bytes / 1e6 / max(elapsed, 1e-9):,.1f} MB/s"
        if not p.done and files_rate > 0:
            state += f", ETA {max(0.0, (p.total_files - p.files) / files_rate):.0f} s"
        return f"{p.task}/{p.store}: {p.files:,} of {p.total_files:,} files, {size(p.bytes)}, {state}"
    return f"{p.task}/{p.store}: {p.records:,}{total} records, {size(p.bytes)}, {state}"


class RestoreReporter:
    """Reports the progress of every store while a restore runs (a context manager)."""

    def __init__(
        self, progress: Sequence[RestoreProgress], out: TextIO | None = None, what: str = "restor"
    ) -> None:
        self._progress = progress
        self._what = what  # the verb's stem: "restor" (restoring/restored), "bootstrapp"
        self._out = out or sys.stderr
        self._tty = self._out.isatty()
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="restore-progress", daemon=True)

    def __enter__(self) -> RestoreReporter:
        if self._progress:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        if self._progress:
            elapsed = time.monotonic() - self._started
            records = sum(p.records for p in self._progress)
            total = size(sum(p.bytes for p in self._progress))
            if self._tty:
                self._out.write("\n")
            log.info(
                "%sed %d stores: %d records, %s in %.1f s",
                self._what,
                len(self._progress),
                records,
                total,
                elapsed,
            )

    def _run(self) -> None:
        interval = _BAR_INTERVAL_S if self._tty else _LOG_INTERVAL_S
        while not self._stop.wait(interval):
            elapsed = time.monotonic() - self._started
            if self._tty:
                self._out.write("\r" + self._bar(elapsed))
                self._out.flush()
            else:
                for p in self._progress:
                    if not p.done:
                        log.info("%sing %s", self._what, describe(p, elapsed))

    def _bar(self, elapsed: float) -> str:
        records = sum(p.records for p in self._progress)
        known = [p.total_records for p in self._progress if p.total_records is not None]
        total = sum(known) if len(known) == len(self._progress) else None
        done = sum(p.done for p in self._progress)
        if total:
            filled = int(30 * min(1.0, records / total))
            bar = "#" * filled + "-" * (30 - filled)
            stores = f"{done}/{len(self._progress)} stores"
            return f"{self._what}ing [{bar}] {records:,}/{total:,} records, {stores}"
        return f"{self._what}ing {records:,} records, {done}/{len(self._progress)} stores, {elapsed:.0f} s"
