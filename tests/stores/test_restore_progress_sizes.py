"""Restore progress lines show small stores in KB, not as `0.0 MB`."""

from __future__ import annotations

import io
import logging

import pytest

from samsa.stores.backend import RestoreProgress
from samsa.stores.restore_progress import RestoreReporter, describe, size


def test_sizes_below_a_megabyte_are_shown_in_kilobytes() -> None:
    assert size(0) == "0.0 KB"
    assert size(7939) == "7.9 KB"
    assert size(999_999) == "1000.0 KB"
    assert size(1_000_000) == "1.0 MB"
    assert size(2_500_000_000) == "2,500.0 MB"


def test_a_small_store_s_progress_line_is_not_zero_megabytes() -> None:
    p = RestoreProgress("Partition 1", "counts", records=12, bytes=4_200, total_records=20)
    line = describe(p, elapsed=1.0)
    assert line.startswith("Partition 1/counts: 12 of 20 records, 4.2 KB, ")
    assert "0.0 MB" not in line


def test_the_restored_line_of_a_small_restore_shows_kilobytes(caplog: pytest.LogCaptureFixture) -> None:
    p = RestoreProgress("Partition 0", "counts", records=3, bytes=1_500, done=True)
    caplog.set_level(logging.INFO, logger="samsa.stores.restore_progress")
    with RestoreReporter([p], out=io.StringIO()):
        pass
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("restored 1 stores: 3 records, 1.5 KB in "), line
