"""A completed commit is logged at DEBUG (checkpoint id, input offsets) and reported with its phases."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from samsa.checkpoint.commit import CommitReport, CommitResult, TaskCommitManager
from samsa.streams import SystemStreamPartition

IN0 = SystemStreamPartition("kafka", "words", 0)
IN2 = SystemStreamPartition("kafka", "words", 2)
PHASES = {"flush_stores", "flush_outputs", "snapshot", "local_checkpoint", "upload", "checkpoint", "cleanup"}


class Backup:
    """A backup manager whose steps succeed at once."""

    def init(self, markers: object) -> None: ...

    def snapshot(self, checkpoint_id: str) -> dict[str, str]:
        return {"counts": f"marker-{checkpoint_id}"}

    def upload(self, checkpoint_id: str, markers: dict[str, str]) -> Future[dict[str, str]]:
        future: Future[dict[str, str]] = Future()
        future.set_result(markers)
        return future

    def cleanup(self, checkpoint_id: str, markers: dict[str, str]) -> Future[None]:
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def close(self) -> None: ...


def _manager(
    written: list[CommitResult],
    reports: list[CommitReport],
    fail_checkpoint: bool = False,
    on_committed: Callable[[CommitReport], None] | None = None,
) -> TaskCommitManager:
    def write(result: CommitResult) -> None:
        if fail_checkpoint:
            raise RuntimeError("broker down")
        written.append(result)

    return TaskCommitManager(
        "Partition 2",
        flush_outputs=lambda: None,
        flush_stores=lambda: time.sleep(0.01),  # a phase that takes measurable time
        durable_stores={},
        backup_managers={"changelog": Backup()},
        write_checkpoint=write,
        executor=ThreadPoolExecutor(1),
        max_delay_ms=60_000,
        timeout_ms=5_000,
        on_committed=on_committed or reports.append,
    )


def test_each_commit_logs_one_debug_line_with_its_checkpoint_id_and_input_offsets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[CommitResult] = []
    manager = _manager(written, [])
    caplog.set_level(logging.DEBUG, logger="samsa.checkpoint.commit")
    manager.commit({IN2: 17, IN0: 5}, wait=True)
    manager.commit({IN2: 18, IN0: 5}, wait=True)
    lines = [r.getMessage() for r in caplog.records if "committed checkpoint" in r.getMessage()]
    first, second = (f"task Partition 2: committed checkpoint {w.checkpoint_id}" for w in written)
    assert lines == [
        f"{first}, input offsets words-0=5, words-2=17",
        f"{second}, input offsets words-0=5, words-2=18",
    ]
    assert all(r.levelno == logging.DEBUG for r in caplog.records if "committed checkpoint" in r.getMessage())


def test_a_completed_commit_is_reported_with_its_time_and_the_timing_of_each_phase() -> None:
    written: list[CommitResult] = []
    reports: list[CommitReport] = []
    before = time.time()
    _manager(written, reports).commit({IN0: 3}, wait=True)
    (report,) = reports
    assert report.task == "Partition 2" and report.result.checkpoint_id == written[0].checkpoint_id
    assert before <= report.committed_at <= time.time()
    assert set(report.phases) == PHASES
    assert report.phases["flush_stores"] >= 0.01
    assert all(seconds >= 0 for seconds in report.phases.values())


def test_a_failed_commit_is_neither_logged_as_committed_nor_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reports: list[CommitReport] = []
    caplog.set_level(logging.DEBUG, logger="samsa.checkpoint.commit")
    manager = _manager([], reports, fail_checkpoint=True)
    manager.start({IN0: 3})
    with pytest.raises(Exception, match="broker down"):
        manager.wait()
    assert reports == []
    assert not [r for r in caplog.records if "committed checkpoint" in r.getMessage()]


def test_a_failing_report_does_not_fail_the_durable_commit(caplog: pytest.LogCaptureFixture) -> None:
    written: list[CommitResult] = []

    def broken(report: CommitReport) -> None:
        raise ValueError("metrics bug")

    manager = _manager(written, [], on_committed=broken)
    manager.commit({IN0: 3}, wait=True)
    manager.commit({IN0: 4}, wait=True)  # the first commit's report recorded no failure
    assert len(written) == 2
    assert "recording the commit's metrics failed" in caplog.text
