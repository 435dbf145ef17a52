"""A failing container closes its tasks' stores only once the commits in flight have ended (their
checkpoints written), within a share of task.shutdown.ms: a commit no longer meets its stores closed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from background import Background
from count_job import WORDS
from stop_order_job import CountThenFailTask, LateCommits, RecordedClosedError

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, ContainerHooks
from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager
from samsa.runtime.exceptions import UserCodeError
from samsa.stores import rocksdb
from samsa.stores.rocksdb import RocksDbStore


def _job(job_config: Callable[..., dict[str, str]], words: str, out: str, **extra: str) -> JobConfig:
    config = job_config(
        f"kafka.{words}",
        out,
        task="stop_order_job:CountThenFailTask",
        **{
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.changelog": f"kafka.{words}-counts-changelog",
            "task.commit.ms": "50",
            "task.commit.max.delay.ms": "60000",  # the loop never waits for the late commit
            **extra,
        },
    )
    return JobConfig(Config(config))


def _store_closes(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When (time.monotonic()) each RocksDB store was closed from now on; StoreClosedErrors recorded."""
    closes: list[float] = []
    close = RocksDbStore.close

    def recorded_close(self: RocksDbStore) -> None:
        closes.append(time.monotonic())
        close(self)

    monkeypatch.setattr(RocksDbStore, "close", recorded_close)
    monkeypatch.setattr(rocksdb, "StoreClosedError", RecordedClosedError)
    RecordedClosedError.raised_in.clear()
    return closes


def _fail_with_a_commit_in_flight(
    job: JobConfig, words: str, pool: LateCommits, produce: Callable[..., Any]
) -> float:
    """Runs the container until `boom` (sent to `words` once a late commit is in flight) fails it; returns
    how long it took to fail after that."""
    hooks = ContainerHooks(executor=pool)
    container = Container(job, JobCoordinator(job).prepare().container("0"), hooks=hooks)
    run = Background(container.run)
    try:
        assert pool.late_submitted.wait(60), "no timer commit started"
        failing = time.monotonic()
        produce(words, [("boom", "boom")])
        run.join(60)
        took = time.monotonic() - failing
    finally:
        container.stop()
    assert not run.thread.is_alive(), "the container did not stop"
    assert isinstance(run.error, UserCodeError) and "process() failed" in str(run.error), repr(run.error)
    return took


def test_a_failing_container_closes_its_stores_after_the_commit_in_flight_ended(
    job_config, topics, produce, kafka_admin, monkeypatch, caplog
):
    words, out = topics(1), topics(1)
    job = _job(job_config, words, out)
    produce(words, [(w, w) for w in WORDS * 50])
    pool = LateCommits(1.5)  # the failure comes well within it
    closes = _store_closes(monkeypatch)
    CountThenFailTask.failed_at.clear()
    caplog.set_level(logging.WARNING)
    try:
        _fail_with_a_commit_in_flight(job, words, pool, produce)
    finally:
        pool.shutdown()
        kafka_admin.delete_topics([f"{words}-counts-changelog"])
    assert pool.late_ended, "the late commit never ran"
    assert CountThenFailTask.failed_at[0] < pool.late_submitted_at[0] + 1.5, "it failed once the commit ran"
    # Before: the stores were closed as the failure went up, under the commit in flight (still asleep), and
    # its store flush raised in the commit thread: RecordedClosedError.raised_in == ["commit_0"], and
    #   WARNING samsa.checkpoint.commit: task Partition 0: commit abandoned: store 'counts' was closed under
    #   it as the container stops (the cause is reported on its own); nothing of this commit was checkpointed
    assert RecordedClosedError.raised_in == [], "a StoreClosedError was raised (in the commit thread)"
    assert "commit abandoned" not in caplog.text and "closed under it" not in caplog.text, caplog.text
    closed = [at for at in closes if at > pool.late_submitted_at[0]]  # not those of the restore
    assert closed and min(closed) > pool.late_ended[0], "a store was closed before the commit in flight ended"
    # The commit ended as it would have without the failure: what it captured (before `boom`) is checkpointed.
    checkpoint = checkpoint_manager(job).read_last()["Partition 0"]
    assert checkpoint.offsets == pool.late_offsets[0]
    assert 0 < max(checkpoint.offsets.values()) <= len(WORDS) * 50


def test_a_commit_in_flight_holds_a_failing_container_only_a_share_of_task_shutdown_ms(
    job_config, topics, produce, kafka_admin, monkeypatch, caplog
):
    words, out = topics(1), topics(1)
    job = _job(job_config, words, out, **{"task.shutdown.ms": "2000"})
    produce(words, [(w, w) for w in WORDS * 10])
    pool = LateCommits(60.0)  # a commit that hangs (a stalled disk, say), until the test ends
    _store_closes(monkeypatch)
    caplog.set_level(logging.WARNING)
    try:
        took = _fail_with_a_commit_in_flight(job, words, pool, produce)
        assert not pool.late_ended, "the hung commit ended"
    finally:
        pool.release.set()
        pool.shutdown()
        kafka_admin.delete_topics([f"{words}-counts-changelog"])
    assert took < 1.0 + 5.0, f"the failing container waited {took:.1f} s for the hung commit"
    assert "its commit is still running" in caplog.text and "stores are closed under it" in caplog.text
