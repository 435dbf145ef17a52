"""An idle task's left-out timer commits still refresh its adjunct store's offsets file: a store kept up to
date by a running job never looks stale to the restart after a crash, however long its inputs were quiet."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, produce

from samsa.adjunct.offsets import OFFSETS_FILE, read_offsets, touch_offsets
from samsa.adjunct.recovery import adjunct_start
from samsa.runtime import metrics as m
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.streams import SystemStreamPartition

__all__ = ["job_config", "produce"]

TASK = "Partition 0"
WAIT_S = 20.0
STALENESS_MS = 1000


@contextmanager
def running(config: dict[str, str]) -> Iterator[tuple[Container, Callable[[Callable[[], bool], str], None]]]:
    """The job's one container on a thread until the block ends (a graceful stop), and a wait for a
    condition that raises the container's failure."""
    job = JobConfig(Config(config))
    container = Container(job, JobCoordinator(job).prepare().container("0"))
    failures: list[BaseException] = []

    def run() -> None:
        try:
            container.run()
        except BaseException as e:
            failures.append(e)

    def wait_for(condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            if failures:
                raise failures[0]
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.02)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield container, wait_for
    finally:
        container.stop()
        thread.join(timeout=30)
    assert not thread.is_alive()
    if failures:
        raise failures[0]


def test_touch_offsets_refreshes_the_age_only(tmp_path: Path) -> None:
    touch_offsets(tmp_path)
    assert not (tmp_path / OFFSETS_FILE).exists(), "a store without a file gets none"
    path = tmp_path / OFFSETS_FILE
    path.write_text("{}")
    before = path.stat().st_mtime
    time.sleep(0.01)
    touch_offsets(tmp_path)
    assert path.stat().st_mtime > before
    assert path.read_text() == "{}"


def test_an_idle_running_tasks_adjunct_store_does_not_age(job_config: Any, topics: Any, produce: Any) -> None:
    orders, cdc, out = topics(1), topics(1), topics(1)
    produce(cdc, [("7", json.dumps({"name": "A"}))])
    config = job_config(
        f"kafka.{orders}",
        out,
        task="samsa_test_tasks:EnrichTask",
        **{
            "job.container.count": "1",
            "task.commit.ms": "100",
            f"systems.kafka.streams.{cdc}.samza.msg.serde": "json",
            "stores.customers.factory": "rocksdb",
            "stores.customers.key.serde": "string",
            "stores.customers.msg.serde": "json",
            "stores.customers.adstore.input": f"kafka.{cdc}",
            "stores.customers.adstore.max.staleness.ms": str(STALENESS_MS),
        },
    )
    ssp = SystemStreamPartition("kafka", cdc, 0)
    with running(config) as (container, wait_for):

        def count(name: str) -> int:
            return container.registry.counter(name, "", {"task": TASK}).value

        base = Path(config["job.logged.store.base.dir"])
        wait_for(lambda: any(base.rglob(OFFSETS_FILE)), "the store's offsets file")
        store_dir = next(base.rglob(OFFSETS_FILE)).parent

        def read_all() -> bool:
            found = read_offsets(store_dir, [ssp])
            return found is not None and found.offsets.get(ssp) == 1

        # The store's record read and committed first: on a slow machine an idle commit can come before the
        # store's first fetch, and the commit of what it read is then a real one.
        wait_for(read_all, "the store's record committed")
        idle = count(m.COMMITS_IDLE)
        wait_for(lambda: count(m.COMMITS_IDLE) > idle, "an idle commit after it")
        commits = count(m.COMMITS)
        # Quiet inputs for longer than the store may stay offline: only idle commits in between.
        idle_until = time.monotonic() + 1.5 * STALENESS_MS / 1000
        wait_for(lambda: time.monotonic() >= idle_until, "the quiet time")
        assert count(m.COMMITS) == commits, "nothing new: every timer commit was left out"
        stored = read_offsets(store_dir, [ssp])
        assert stored is not None and stored.offsets[ssp] == 1
        now = time.time()
        decision = adjunct_start(
            persistent=True,
            bootstrap=False,
            exists=True,
            stored_offset=stored.offsets[ssp],
            stored_at_ms=stored.written_at * 1000,
            now_ms=now * 1000,
            max_staleness_ms=STALENESS_MS,
            low=0,
            high=1,
        )
        assert not decision.wipe, f"a crash now would wipe the live, up-to-date store: {decision.note}"
        assert now - stored.written_at < 0.5, "refreshed by the idle commits"
