"""The run loop's check that an adjunct store's stream never goes back (a topic recreated while the job runs,
the consumer's out-of-range position reset to the new topic's first record): one check per fetched chunk."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from samsa.adjunct.exceptions import AdjunctStreamResetError
from samsa.runtime.exceptions import TaskError
from samsa.runtime.run_loop import _check_not_reset
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "customers", 0)


def _buffer(expected: int) -> Any:
    return SimpleNamespace(ssp=SSP, task=SimpleNamespace(name="Partition 0", offsets={SSP: expected}))


def test_a_chunk_from_the_expected_offset_passes_with_gaps_compaction_left() -> None:
    _check_not_reset(_buffer(8), 8, 30, 5)  # offsets 8, 9, 17, 25, 30
    _check_not_reset(_buffer(8), 12, 12, 1)  # transaction markers skipped before it


def test_a_chunk_below_the_expected_offset_fails_naming_topic_partition_and_offsets() -> None:
    with pytest.raises(AdjunctStreamResetError) as failed:
        _check_not_reset(_buffer(100), 0, 19, 20)
    message = str(failed.value)
    assert "topic customers partition 0 (system kafka)" in message
    assert "from offset 0 were fetched, below offset 100" in message
    assert isinstance(failed.value, TaskError)  # restarted by a supervisor: not a configuration error


def test_a_chunk_going_back_within_fails() -> None:
    with pytest.raises(AdjunctStreamResetError, match="go back between offsets 98 and 4"):
        _check_not_reset(_buffer(98), 98, 4, 7)  # offsets 98, 99, then the new topic's 0..4
