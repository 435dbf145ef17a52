"""One task's commit lifecycle: a short blocking snapshot, then upload, checkpoint and cleanup off the loop.

Sync phase (the run loop waits): the caller has captured the input offsets; flush the stores' caches and
the outputs, hold the later writes of every gated RocksDB store in memory (`stores.snapshot_gate`: the
engine keeps the snapshot's state), take the local checkpoint of any other durable persistent store, and
ask each backend for its snapshot markers. Async phase (on the commit pool, overlapping processing): the
memtable flush and local checkpoint of the held stores (off the loop thread: the flush builds and fsyncs
an SST, which rocksdict runs without the GIL), their release, backend uploads, marker files in the
checkpoint dirs, the checkpoint record(s), then cleanup. One commit per task is in flight at a time,
counting both phases; a commit falling due while the previous one still uploads is skipped for up to
`task.commit.max.delay.ms`, then blocks the task for up to `task.commit.timeout.ms`, then fails. A waited
commit (start-up, requested, final) fails when its async phase has not ended `task.commit.timeout.ms` after
it began. An async failure fails the next commit. `unchanged` tells the caller when a commit would write
just what the last completed one wrote (its timer's commit of an idle task is then left out).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.exceptions import CheckpointError, CheckpointFencedError
from samsa.checkpoint.faults import SimulatedCrash, crash_point
from samsa.stores.backend import Markers, TaskBackupManager
from samsa.stores.checkpoint_dirs import (
    checkpoint_dir,
    create_checkpoint,
    delete_checkpoint_dirs,
    write_marker,
)
from samsa.stores.exceptions import StoreClosedError, StoreDiskFullError
from samsa.stores.snapshot_gate import SnapshotGate
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)


class CommitFailedError(CheckpointError):
    """The previous commit's upload, checkpoint write or cleanup failed, or a commit timed out."""


@dataclass
class DurableStore:
    """A store whose state a backend keeps: its engine, its live directory, and its backends."""

    engine: Any
    store_dir: Path
    backends: tuple[str, ...]
    persistent: bool  # on disk (RocksDB): gets a local checkpoint dir at each commit
    #: Holds the store's writes from the snapshot until its checkpoint is taken in the async phase; None:
    #: the checkpoint is taken in the sync phase.
    gate: SnapshotGate | None = None


@dataclass
class CommitResult:
    """What one commit wrote: the id, input offsets and state markers (by backend, then store)."""

    checkpoint_id: CheckpointId
    offsets: dict[SystemStreamPartition, int]
    markers: dict[str, Markers] = field(default_factory=dict)


CheckpointWriter = Callable[[CommitResult], None]


@dataclass
class CommitReport:
    """A completed commit, for metrics: its result, when it completed, and how long each phase took."""

    task: str
    result: CommitResult
    #: Wall time (epoch seconds) when the checkpoint was written.
    committed_at: float
    #: Phase -> seconds: flush_stores, flush_outputs, snapshot (sync); local_checkpoint (of the stores held
    #: at the snapshot), upload (backends, marker files), checkpoint (the record), cleanup (async).
    phases: dict[str, float] = field(default_factory=dict)


def describe_offsets(offsets: Mapping[SystemStreamPartition, int]) -> str:
    """`stream-partition=offset, ...` in a stable order, for one log line."""
    parts = [f"{ssp.stream}-{ssp.partition}={offset}" for ssp, offset in sorted(offsets.items())]
    return ", ".join(parts) or "none"


def wait_all(managers: Iterable[TaskCommitManager]) -> None:
    """Waits for the commit in flight of every manager, then raises the first failure: started together
    (`start`), the tasks' commits overlap, and none is left running when one failed, unless it did not end
    within task.commit.timeout.ms (then the caller fails, and abandons it)."""
    failure: Exception | None = None
    for manager in managers:
        try:
            manager.wait()
        except Exception as e:
            failure = failure or e
    if failure is not None:
        raise failure


class TaskCommitManager:
    """Runs one task's commits; `commit()` is called from the run loop thread only."""

    def __init__(
        self,
        task_name: str,
        flush_outputs: Callable[[], None],
        flush_stores: Callable[[], None],
        durable_stores: Mapping[str, DurableStore],
        backup_managers: Mapping[str, TaskBackupManager],
        write_checkpoint: CheckpointWriter,
        executor: Executor,
        max_delay_ms: int,
        timeout_ms: int,
        clock: Callable[[], float] = time.monotonic,
        max_idle_ms: float = float("inf"),
        on_committed: Callable[[CommitReport], None] | None = None,
    ) -> None:
        """`max_idle_ms`: how old the last completed commit may grow while `unchanged` holds (the restore
        judges a changelog's tail by the checkpoint's age: `idle_commit_bound_ms`). `on_committed`: told of
        each completed commit on the commit thread (metrics); what it raises is logged, not a failure."""
        self._on_committed = on_committed
        #: The sync phase's timings of the commit in flight, completed by its async phase.
        self._phases: dict[str, float] = {}
        self.task_name = task_name
        self._flush_outputs = flush_outputs
        self._flush_stores = flush_stores
        self._stores = dict(durable_stores)
        self._backups = dict(backup_managers)
        self._write_checkpoint = write_checkpoint
        self._executor = executor
        self._max_delay_s = max_delay_ms / 1000
        self._max_idle_s = max_idle_ms / 1000
        self._timeout_s = timeout_ms / 1000
        self._clock = clock
        self._permit = threading.Semaphore(1)  # one commit in flight, both phases
        self._failure: BaseException | None = None
        self._last_start = float("-inf")
        self._in_flight: Future[None] | None = None
        #: When the commit in flight must have ended (time.monotonic(), real time even under a test clock).
        self._deadline = float("inf")
        self.skipped = 0
        #: The input offsets and store write count (`TaskStorage.writes`) of the last commit whose async
        #: phase completed; None before the first.
        self._committed: tuple[dict[SystemStreamPartition, int], int | None] | None = None
        self._committed_started = float("-inf")  # by `clock`: when the last completed commit began

    # -- the commit ---------------------------------------------------------------------------------
    def commit(
        self, offsets: dict[SystemStreamPartition, int], wait: bool = False, requested: bool = False
    ) -> bool:
        """Commits `offsets` (captured by the caller before anything was flushed). A timer's commit is
        skipped (False) while the previous one uploads, within the max delay; a commit the task asked for
        (`requested`) waits for it instead. `wait` returns only once this commit is durable."""
        started = self.start(offsets, force=wait, requested=requested)
        if wait:
            self.wait()
        return started

    def start(
        self,
        offsets: dict[SystemStreamPartition, int],
        force: bool = False,
        requested: bool = False,
        writes: int | None = None,
    ) -> bool:
        """`commit` without waiting for the async phase; `force` never skips (as a waited commit). Callers
        committing several tasks and waiting for all start each first, so their uploads overlap. `writes`:
        the task's store write count captured with `offsets` (for `unchanged`), None when unknown."""
        self._raise_failure()
        if not self._permit.acquire(blocking=False):
            if not (force or requested) and self._clock() - self._last_start < self._max_delay_s:
                self.skipped += 1
                return False
            if not requested:
                log.warning("task %s: previous commit still running; processing waits for it", self.task_name)
            if not self._await_previous():
                raise self._timed_out("the previous commit")
        self._raise_failure(release=True)  # a failure may have landed while we acquired
        try:
            self._last_start = self._clock()
            result = self._snapshot(offsets)
        except BaseException:
            self._permit.release()
            raise
        self._submit(result, (dict(offsets), writes), self._last_start)
        return True

    @property
    def max_idle_ms(self) -> float:
        """How old the last completed commit may grow (`idle_commit_bound_ms`); inf without a changelog."""
        return self._max_idle_s * 1000

    @property
    def committed_offsets(self) -> Mapping[SystemStreamPartition, int]:
        """The input offsets of the last commit whose async phase completed (empty before the first)."""
        return {} if self._committed is None else self._committed[0]

    def unchanged(self, offsets: Mapping[SystemStreamPartition, int], writes: int | None) -> bool:
        """True when a commit now would write what the last completed one wrote: same input offsets, no
        store write since (`writes` as that commit captured it), no commit in flight and no failure to
        report. False before the first commit completed, and when `writes` is unknown."""
        committed = self._committed
        in_flight = self._in_flight
        return (
            committed is not None
            and writes is not None
            and (in_flight is None or in_flight.done())
            and self._failure is None
            and committed == (offsets, writes)
            and self._clock() - self._committed_started < self._max_idle_s
        )

    def _await_previous(self) -> bool:
        """Waits up to the commit timeout for the commit in flight to release the permit, and takes it.
        Waiting on its future first lets a deferring executor (the deterministic scheduler's) run the
        queued async phase right here instead of leaving this thread blocked on the permit."""
        deadline = time.monotonic() + self._timeout_s
        if self._in_flight is not None:
            with contextlib.suppress(Exception):  # a timeout, or a failure recorded in _failure
                self._in_flight.result(timeout=self._timeout_s)
        return self._permit.acquire(timeout=max(0.0, deadline - time.monotonic()))

    def wait(self, timeout_s: float | None = None) -> None:
        """Blocks until the commit in flight (if any) has ended, and raises its failure: a
        `CommitFailedError` when it runs past task.commit.timeout.ms after it began, a `TimeoutError` when
        it runs past the caller's own `timeout_s`."""
        future = self._in_flight
        if future is not None:
            # Bounded: a blob store down during an upload or cleanup retries for up to
            # blobstore.retry.max.duration.ms, which would hold a start, a stop or a requested commit.
            limit = self._deadline - time.monotonic() if timeout_s is None else timeout_s
            try:
                future.result(timeout=max(0.0, limit))
            except TimeoutError:
                if timeout_s is not None:
                    raise
                raise self._timed_out("the commit") from None
            except Exception:
                pass  # the async phase records its failure in _failure (a cancelled one has none)
        self._raise_failure()

    def _timed_out(self, which: str) -> CommitFailedError:
        limit = int(self._timeout_s * 1000)
        return CommitFailedError(
            f"task {self.task_name}: {which} did not end within task.commit.timeout.ms={limit}; check the "
            "backends (broker, blob store), or raise the timeout"
        )

    def _snapshot(self, offsets: dict[SystemStreamPartition, int]) -> CommitResult:
        crash_point("before-snapshot")
        checkpoint_id = CheckpointId.create()
        # Stores first: flushing their caches writes dirty entries to the changelogs, and the one producer
        # flush after it makes those and every output durable before a backend reads a changelog's end.
        t0 = time.perf_counter()
        self._flush_stores()
        t1 = time.perf_counter()
        self._flush_outputs()
        t2 = time.perf_counter()
        self._phases = {"flush_stores": t1 - t0, "flush_outputs": t2 - t1}
        try:
            for store in self._stores.values():
                if store.gate is not None:
                    store.gate.hold()
                elif store.persistent:
                    create_checkpoint(store.engine, store.store_dir, str(checkpoint_id))
            markers = {
                backend: manager.snapshot(str(checkpoint_id)) for backend, manager in self._backups.items()
            }
            crash_point("after-snapshot")
        except BaseException:
            self._release_gates()
            raise
        self._phases["snapshot"] = time.perf_counter() - t2
        return CommitResult(checkpoint_id, dict(offsets), markers)

    def _checkpoint_held(self, checkpoint_id: str) -> None:
        """The async phase's first step: the held stores' memtable flush and local checkpoint, then their
        writes are released into them (at the loop thread's next use of each)."""
        try:
            for store in self._stores.values():
                if store.gate is not None:
                    # The flush runs without the GIL; the checkpoint, which holds it, then has no memtable.
                    store.engine.flush()
                    create_checkpoint(store.engine, store.store_dir, checkpoint_id)
        finally:
            self._release_gates()

    def _release_gates(self) -> None:
        for store in self._stores.values():
            if store.gate is not None:
                store.gate.release()

    def _submit(
        self,
        snapshot: CommitResult,
        mark: tuple[dict[SystemStreamPartition, int], int | None],
        started: float,
    ) -> Future[None]:
        self._deadline = time.monotonic() + self._timeout_s
        try:
            future = self._executor.submit(self._upload_and_checkpoint, snapshot, mark, started)
        except BaseException:
            self._release_gates()
            self._permit.release()
            raise
        self._in_flight = future
        return future

    def _upload_and_checkpoint(
        self,
        snapshot: CommitResult,
        mark: tuple[dict[SystemStreamPartition, int], int | None],
        started: float,
    ) -> None:
        """The async phase; always releases the permit, and records a failure for the next commit, or
        `mark` (what the commit captured) as the last completed commit's."""
        try:
            phases, t0 = dict(self._phases), time.perf_counter()
            checkpoint_id = str(snapshot.checkpoint_id)
            self._checkpoint_held(checkpoint_id)
            phases["local_checkpoint"], t0 = time.perf_counter() - t0, time.perf_counter()
            uploads = {
                backend: manager.upload(checkpoint_id, snapshot.markers.get(backend, {}))
                for backend, manager in self._backups.items()
            }
            uploaded = CommitResult(
                snapshot.checkpoint_id, snapshot.offsets, {b: f.result() for b, f in uploads.items()}
            )
            self._write_store_markers(uploaded)
            crash_point("after-upload")
            t1 = time.perf_counter()
            self._write_checkpoint(uploaded)
            committed_at, t2 = time.time(), time.perf_counter()
            log.debug(
                "task %s: committed checkpoint %s, input offsets %s",
                self.task_name,
                checkpoint_id,
                describe_offsets(uploaded.offsets),
            )
            crash_point("after-checkpoint")
            cleanups = [
                manager.cleanup(checkpoint_id, uploaded.markers.get(backend, {}))
                for backend, manager in self._backups.items()
            ]
            for cleanup in cleanups:
                cleanup.result()
            for store in self._stores.values():
                if store.persistent:
                    delete_checkpoint_dirs(store.store_dir, keep=[checkpoint_id])
            crash_point("after-cleanup")
            self._committed, self._committed_started = mark, started
            phases.update(upload=t1 - t0, checkpoint=t2 - t1, cleanup=time.perf_counter() - t2)
            self._report(CommitReport(self.task_name, uploaded, committed_at, phases))
        except SimulatedCrash:
            raise  # the container dies here: nothing to record for a next commit
        except CheckpointFencedError as e:
            self._failure = e  # not an error of this commit: a newer start took over, the container says so
        except StoreClosedError as e:
            # Only the container's stop closes a store: one crashing closes them under the commit in flight,
            # one stopping after a failure under a commit still running past its bounded wait for it
            # (`ContainerState.settle_commits`). A consequence of that failure, which the container reports.
            log.warning(
                "task %s: commit abandoned: store %r was closed under it as the container stops (the cause "
                "is reported on its own); nothing of this commit was checkpointed",
                self.task_name,
                e.name,
            )
            self._failure = e
        except StoreDiskFullError as e:
            # The next commit fails with it, and the container reports it as its cause (the full message
            # once): here, a line saying when and where.
            log.warning(
                "task %s: commit failed, disk full at %s; nothing of it was checkpointed",
                self.task_name,
                e.path,
            )
            self._failure = e
        except BaseException as e:
            log.error("task %s: commit failed in its async phase: %r", self.task_name, e)
            self._failure = e
        finally:
            self._permit.release()

    def _report(self, report: CommitReport) -> None:
        if self._on_committed is None:
            return
        try:
            self._on_committed(report)
        except Exception:
            # Metrics are not worth failing a commit that is durable already.
            log.warning("task %s: recording the commit's metrics failed", self.task_name, exc_info=True)

    def _write_store_markers(self, result: CommitResult) -> None:
        # A local checkpoint dir is reusable at restore only with the markers it corresponds to.
        for name, store in self._stores.items():
            if not store.persistent:
                continue
            markers = {
                b: result.markers[b][name] for b in store.backends if name in result.markers.get(b, {})
            }
            checkpoint_id = str(result.checkpoint_id)
            write_marker(checkpoint_dir(store.store_dir, checkpoint_id), checkpoint_id, markers, store=name)

    def _raise_failure(self, release: bool = False) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            if release:
                self._permit.release()
            if isinstance(failure, CheckpointFencedError):
                raise failure  # says itself why nothing more is committed (a retry is no use)
            raise CommitFailedError(
                f"task {self.task_name}: the previous commit failed: {failure!r}; "
                f"its offsets were not checkpointed, so its messages will be processed again"
            ) from failure

    @property
    def failure(self) -> BaseException | None:
        """The async phase's failure the next commit will raise (None: none), for a container stopping
        after another failure to tell its cause."""
        return self._failure

    def settle(self, timeout_s: float, within_timeout: bool = True) -> bool:
        """Waits up to `timeout_s` (and, `within_timeout`, no later than task.commit.timeout.ms after it
        began) for the async phase in flight to end; True once none runs. Its failure is not raised."""
        future = self._in_flight
        if future is None or future.done():
            return True
        if within_timeout:
            timeout_s = min(timeout_s, self._deadline - time.monotonic())
        # Never `result()`: a deferring executor's queued work would run here.
        return not wait_futures([future], timeout=max(0.0, timeout_s)).not_done

    def close(self, timeout_s: float = 0.0) -> None:
        """Closes the backup managers once the async phase in flight (if any) has ended, waiting up to
        `timeout_s` for it (an abandoned one ends at its next blob request); one still running keeps them."""
        future = self._in_flight
        # Never `result()`: a deferring executor's queued work would run here.
        if future is not None and wait_futures([future], timeout=timeout_s).not_done:
            log.warning(
                "task %s: its commit's async phase is still running (a request in flight ends at its "
                "timeout); its backups are left open to it",
                self.task_name,
            )
            return
        for manager in self._backups.values():
            manager.close()
