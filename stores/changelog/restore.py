"""Transactional restore of a task's changelog-backed stores: reuse local state, replay, undo the uncommitted.

Per store (decided by `actions.store_actions` at `init`): delete the live dir, copy back the best local
checkpoint dir if one matches the checkpoint, replay the changelog up to the checkpointed offset, then
undo ("trim") every record written after it up to the newest offset seen at init, by re-sending the
value the store now holds for that key (or a tombstone). The changelog then reads back as the
checkpointed state, and the commit the container makes right after restore seals that.

A store another backend restored from a checkpoint without a changelog marker for it is *seeded* instead
(`actions.seed_actions`): every record of its changelog is undone and every other key of the store written,
so the changelog holds the whole store before the first commit records its marker. So is a store whose
changelog lost its checkpointed state (deleted and recreated, records deleted), from the local checkpoint dir
holding exactly that state; without one, `init` refuses the start (`ChangelogLostError`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple, Protocol

from samsa.exactly_once.changelog import ChangelogReader
from samsa.kafka.message import RawMessage, TopicPartition
from samsa.stores.api import KeyValueStore
from samsa.stores.backend import Markers, RestoreProgress, TaskStoresContext
from samsa.stores.changelog.actions import (
    LocalDir,
    RestoreInputs,
    StoreActions,
    given_up_actions,
    rebuild_actions,
    seed_actions,
    store_actions,
)
from samsa.stores.changelog.exceptions import ChangelogRestoreError, RestoreInterrupted
from samsa.stores.changelog.marker import ChangelogMarker, RebuildMark
from samsa.stores.changelog.settings import ChangelogSettings
from samsa.stores.checkpoint_dirs import (
    checkpoint_dir,
    delete_checkpoint_dir,
    list_checkpoint_dirs,
    read_checked_json,
    read_marker,
    restore_store_dir,
    write_checked_json,
)
from samsa.stores.factory import ROCKSDB, StoreSpec, open_engine, store_specs
from samsa.stores.restore_progress import size
from samsa.stores.rocksdb import RocksDbStore
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)

# Records asked of the consumer per call: big batches keep the per-batch cost (one RocksDB write batch,
# one stop check, one progress update) negligible.
BATCH = 10_000
# Longest wait per fetch, so a stop request is seen promptly.
_POLL_S = 0.5
# No record for this long while the read has not reached its end: the partition is unreadable.
_STALL_S = 120.0
# After a failed restore, how long to wait for undo records already sent.
_FLUSH_ON_FAILURE_S = 10.0


class RestoreConsumer(Protocol):
    """What a restore needs of a consumer (`samsa.kafka.KafkaConsumer` has this shape)."""

    def assign(self, positions: Mapping[TopicPartition, int]) -> None: ...
    def unassign(self) -> None: ...
    def consume(self, max_messages: int, timeout: float) -> list[RawMessage]: ...
    def position(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]: ...
    def watermarks(self, tp: TopicPartition, cached: bool = ..., timeout: float = ...) -> tuple[int, int]: ...
    def close(self) -> None: ...


class TrimProducer(Protocol):
    """What trimming needs of a producer (`samsa.kafka.KafkaProducer` has this shape)."""

    def send(
        self, topic: str, value: bytes | None, key: bytes | None = ..., partition: int | None = ...
    ) -> None: ...
    def flush(self, timeout: float = ...) -> None: ...


class ChangelogRestoreManager:
    """`TaskRestoreManager` of one task's changelog-backed stores.

    RocksDB stores are restored into their live dir, through an engine this manager opens and closes
    (the storage manager reopens them for processing). Other engines (in-memory, custom) are restored in
    place into `context.engines[store]`, created there when missing, and left open for the task.
    """

    def __init__(
        self,
        context: TaskStoresContext,
        changelogs: Mapping[str, SystemStreamPartition],
        consumer_for: Callable[[str], RestoreConsumer],
        producer: TrimProducer,
        backend: str = "changelog",
        clock: Callable[[], float] = time.time,
        retain_existing_state: bool = True,
    ) -> None:
        """`retain_existing_state`: False starts a store without a checkpointed position empty, undoing what
        its changelog holds (Samza's task.transactional.state.retain.existing.state)."""
        self.context = context
        self.changelogs = dict(changelogs)
        self._consumer_for = consumer_for
        self._producer = producer
        self._backend = backend
        self._clock = clock
        self._retain_existing_state = retain_existing_state
        self._consumers: dict[str, RestoreConsumer] = {}
        self._open: list[KeyValueStore[bytes, bytes]] = []
        self._specs: dict[str, StoreSpec] = {}
        #: Store -> what init decided; read by tests and the restore log.
        self.actions: dict[str, StoreActions] = {}
        #: Store -> keys whose uncommitted writes were undone.
        self.trimmed: dict[str, int] = {}
        self._undo_sent = False
        #: Seeded store -> the keys the replay undid (already written to the changelog).
        self._seeded_keys: dict[str, set[bytes]] = {}

    # -- init: decide ------------------------------------------------------------------------------------
    def init(self, markers: Markers | None, checkpoint_id: str | None = None) -> None:
        """Reads each changelog's watermarks (once: the replay never goes past them) and the local dirs."""
        task = self.context.task_name
        for store, actions in self._decide(markers, checkpoint_id):
            self.actions[store] = actions
            progress = self.context.progress.setdefault(store, RestoreProgress(task, store))
            # After a blob-store download (its progress, done) the tail is what is left: counted on top.
            progress.total_records = progress.records + actions.records_to_read
            progress.done = False
            level = logging.WARNING if actions.degraded else logging.INFO
            log.log(level, "restore plan for store %s of task %s: %s", store, task, "; ".join(actions.notes))

    def check(self, markers: Markers | None, checkpoint_id: str | None = None) -> Markers:
        """Decides as `init` does, acting on nothing and logging nothing: raises what `init` would raise
        (`ChangelogLostError`), before anything of the stores is touched or written. Returns, per store whose
        lost changelog the restore will rebuild, the marker saying so that the checkpoint must hold before
        the restore writes the first rebuild record (none when the checkpoint already says so)."""
        rebuilds: dict[str, ChangelogMarker] = {}
        for _ in self._decide(markers, checkpoint_id, rebuilds):
            pass
        return {store: marker.encode() for store, marker in rebuilds.items()}

    def _decide(
        self,
        markers: Markers | None,
        checkpoint_id: str | None,
        rebuilds: dict[str, ChangelogMarker] | None = None,
    ) -> Iterator[tuple[str, StoreActions]]:
        task = self.context.task_name
        now_ms = self._clock() * 1000
        checkpoint_ms = _checkpoint_millis(checkpoint_id)
        for store, ssp in self.changelogs.items():
            config = self.context.store_configs.get(store, {})
            spec = self._specs[store] = _spec(store, config)
            settings = ChangelogSettings.of(store, config)
            raw = (markers or {}).get(store)
            checkpointed = None if raw is None else ChangelogMarker.decode(raw, store)
            low, high = self._consumer(ssp.system).watermarks((ssp.stream, ssp.partition))
            persistent = spec.factory == ROCKSDB
            store_dir = self.context.store_dirs[store]
            inputs = RestoreInputs(
                store=store,
                changelog=ssp,
                persistent=persistent,
                checkpointed=checkpointed,
                checkpoint_ms=checkpoint_ms,
                low=low,
                high=high,
                local_dirs=self._local_dirs(store_dir) if persistent else (),
                now_ms=now_ms,
                delete_retention_ms=settings.delete_retention_ms,
                min_compaction_lag_ms=settings.min_compaction_lag_ms,
                checkpoint_id=checkpoint_id,
                task=task,
                other_backups=tuple(
                    sorted(
                        b
                        for b, stores in self.context.checkpoint_markers.items()
                        if b != self._backend and store in stores
                    )
                ),
                retain_existing_state=self._retain_existing_state,
            )
            if store in self.context.seeded:
                restored = checkpoint_dir(store_dir, checkpoint_id or "")
                if not (persistent and checkpoint_id and restored.is_dir()):
                    raise ChangelogRestoreError(
                        f"cannot seed the changelog {ssp} of store {store!r} of task {task!r}: the restored "
                        f"checkpoint dir {restored} is missing; restart the container"
                    )
                yield store, seed_actions(inputs, restored)
            else:
                yield store, self._planned(store_dir, ssp, checkpoint_id, inputs, rebuilds)

    @staticmethod
    def _planned(
        store_dir: Path,
        ssp: SystemStreamPartition,
        checkpoint_id: str | None,
        inputs: RestoreInputs,
        rebuilds: dict[str, ChangelogMarker] | None = None,
    ) -> StoreActions:
        """`store_actions`, or a rebuild of the changelog that a start of the same checkpoint began: decided
        once (before an exactly-once start's abort records, by `check`), it holds until a commit seals it.
        The decision is recorded twice, before the first rebuild record: in `<store dir>.rebuilding` on this
        host, and in the checkpoint, for every host (`rebuilds` gets the marker to record there, which the
        start writes: `ContainerState.check_changelogs`); a start elsewhere then refuses rather than take a
        partly rebuilt changelog for the checkpointed state. Only a lost changelog's rebuild is recorded: a
        reseed of an intact one (`StoreActions.reseed_on_gap`) needs no mark, as every start of the
        checkpoint meets the same gap again, and a start elsewhere may restore the changelog it holds (the
        checkpointed state, plus writes after it that it undoes)."""
        checkpointed = inputs.checkpointed
        # Of another changelog (stores.<s>.changelog changed since): `store_actions` decides, as for any.
        flagged = checkpointed if checkpointed is not None and checkpointed.changelog == ssp else None
        if flagged is not None and flagged.given_up:
            return given_up_actions(inputs)
        pending = _rebuilding_file(store_dir)
        begun = _read_rebuilding(pending)
        if begun is not None and begun != (checkpoint_id, str(ssp)):
            pending.unlink(missing_ok=True)  # a commit since sealed that rebuild: the checkpoint moved on
            begun = None
        marked = flagged is not None and flagged.rebuilding is not None
        actions = rebuild_actions(inputs) if begun is not None or marked else store_actions(inputs)
        if actions.seed and checkpoint_id is not None:
            # Durable before the first rebuild record: a start cut short rebuilds again, from the same dir.
            if begun is None:
                write_checked_json(pending, {"checkpoint-id": checkpoint_id, "changelog": str(ssp)})
            assert checkpointed is not None and actions.reuse is not None
            mark = RebuildMark(socket.gethostname(), str(actions.reuse))
            if rebuilds is not None and checkpointed.rebuilding != mark:
                rebuilds[inputs.store] = replace(checkpointed, rebuilding=mark, given_up=False)
        return actions

    def _local_dirs(self, store_dir: Path) -> list[LocalDir]:
        dirs = []
        for checkpoint_id, path in list_checkpoint_dirs(store_dir):
            marker = read_marker(path)
            if marker is None:
                dirs.append(LocalDir(path))
            else:
                # The id its name and its marker agree on: a dir renamed or copied over is no checkpoint's.
                agreed = checkpoint_id if marker.checkpoint_id == checkpoint_id else None
                markers = marker.markers.get(self._backend)
                dirs.append(LocalDir(path, markers, marker.written_at * 1000, agreed))
        return dirs

    # -- restore: do -------------------------------------------------------------------------------------
    def restore(self, stop: threading.Event) -> None:
        """Restores the stores one after the other; raises `RestoreInterrupted` soon after `stop` is set."""
        try:
            for store, actions in self.actions.items():
                if stop.is_set():
                    raise RestoreInterrupted(self.context.task_name, store, None)
                engine = self._prepare(store, actions)
                started = time.monotonic()
                self._replay(store, engine, actions, stop)
                if actions.seed or store in self._seeded_keys:  # or a reseed the replay found needed
                    self._seed(store, engine, stop)
                if engine in self._open:
                    engine.flush()  # memtables to SSTs: the reopen need not replay a large WAL
                    engine.close()
                    self._open.remove(engine)
                progress = self.context.progress[store]
                progress.done = True
                log.info(
                    "restored store %s of task %s: %d records (%s) in %.1f s, %d key(s) undone",
                    store,
                    self.context.task_name,
                    progress.records,
                    size(progress.bytes),
                    time.monotonic() - started,
                    self.trimmed.get(store, 0),
                )
        except BaseException:
            if self._undo_sent:  # best effort: a restart undoes again whatever did not get out
                with contextlib.suppress(Exception):
                    self._producer.flush(_FLUSH_ON_FAILURE_S)
            raise
        if self._undo_sent:
            self._producer.flush()  # the undo records are part of the state the next commit seals

    def _prepare(self, store: str, actions: StoreActions) -> KeyValueStore[bytes, bytes]:
        store_dir = self.context.store_dirs[store]
        spec = self._specs[store]
        if spec.factory != ROCKSDB:
            return self._in_place_engine(store, spec, store_dir)
        for path in actions.delete:
            delete_checkpoint_dir(path)
        if actions.reuse is not None:
            restore_store_dir(actions.reuse, store_dir)  # replaces the live dir; the checkpoint dir stays
        elif store_dir.exists():
            shutil.rmtree(store_dir)
        engine = RocksDbStore(store_dir, spec.rocksdb, name=store)
        # No write-ahead log while replaying: the live dir is rebuilt at every restore, so a crash
        # mid-replay just replays again; closing flushes the memtables.
        engine.begin_bulk_load()
        self._open.append(engine)
        return engine

    def _in_place_engine(self, store: str, spec: StoreSpec, store_dir: Path) -> KeyValueStore[bytes, bytes]:
        engine: KeyValueStore[bytes, bytes] | None = self.context.engines.get(store)
        if engine is None:
            store_dir.parent.mkdir(parents=True, exist_ok=True)
            engine = self.context.engines[store] = open_engine(spec, store_dir)
        # Whatever it holds is not the checkpoint's state: the changelog alone defines the store.
        engine.put_all([(key, None) for key, _ in engine.all()])
        return engine

    def _replay(
        self, store: str, engine: KeyValueStore[bytes, bytes], actions: StoreActions, stop: threading.Event
    ) -> None:
        if actions.end < actions.start:
            return
        ssp = self.changelogs[store]
        tp = (ssp.stream, ssp.partition)
        consumer = self._consumer(ssp.system)
        consumer.assign({tp: actions.start})
        progress = self.context.progress[store]
        restore_to, end = actions.restore_to, actions.end
        put_all = engine.put_all
        undone: set[bytes] = set()
        # Exactly-once: commit and abort records are skipped, writes an abort record voided are dropped.
        reader = ChangelogReader() if self.context.exactly_once else None
        void: set[bytes] = set()
        # An old checkpoint: undone only where the replay proves nothing was compacted (`_Consecutive`).
        proof = _Consecutive(actions.start, restore_to) if actions.undo_proven_only else None
        # Older still, with nothing to replay: a gap after the checkpoint may be a delete gone (reseeded).
        tail = _Consecutive(restore_to + 1, end) if actions.reseed_on_gap else None
        kept: set[bytes] = set()
        last = actions.start - 1
        idle_since = time.monotonic()
        try:
            while last < end:
                if stop.is_set():
                    raise RestoreInterrupted(self.context.task_name, store, last)
                msgs = consumer.consume(BATCH, _POLL_S)
                if not msgs:
                    # Compaction gaps or control records can hide the last offsets: the position says.
                    if consumer.position([tp]).get(tp, -1) > end:
                        break
                    if time.monotonic() - idle_since > _STALL_S:
                        raise ChangelogRestoreError(
                            f"restore of store {store!r} of task {self.context.task_name!r} stalled: nothing "
                            f"read from {ssp} for {_STALL_S:.0f} s after offset {last}, expected up to "
                            f"{end}; check the broker and that the topic is readable"
                        )
                    continue
                idle_since = time.monotonic()
                last = msgs[-1].offset()
                if last > end:  # the partition moved on since init (our own undo records included)
                    msgs = [m for m in msgs if m.offset() <= end]
                # Every record counts, control records and void writes too.
                if proof is not None:
                    proof.read(msgs)
                if tail is not None:
                    tail.read(msgs)
                if reader is not None:
                    msgs, dropped = reader.select(msgs)
                    void.update(dropped)
                if last <= restore_to:
                    _apply(put_all, msgs, progress)
                    continue
                split = _first_after(msgs, restore_to)
                if split:
                    _apply(put_all, msgs[:split], progress)
                after = msgs[split:]
                if proof is not None and not proof.complete():
                    # The checkpointed values are unknown: undoing with the replayed ones could lose them.
                    kept.update(k for m in after if (k := m.key()) is not None)
                    _apply(put_all, after, progress)
                    continue
                self._undo(engine, ssp, after, undone)
                progress.records += len(after)
        finally:
            consumer.unassign()
        if void:
            # Written again after the void writes, so that the changelog reads back as restored even once
            # compaction dropped the older, valid records of those keys.
            self._undo(engine, ssp, [_KeyOnly(key) for key in sorted(void)], undone)
            assert reader is not None
            log.warning(
                "restore of store %s of task %s: dropped %d write(s) of an earlier start voided by a later "
                "one (a zombie flushing after the restart)",
                store,
                self.context.task_name,
                reader.void,
            )
        if kept:
            log.warning(
                "restore of store %s of task %s: %d key(s) written after changelog %s offset %d (the "
                "checkpoint, up to offset %d) are KEPT with their newer values, not undone: the checkpoint "
                "is older than 0.9 x min.compaction.lag.ms and offsets [%d, %d] have gaps, so compaction may "
                "have removed their checkpointed values. The inputs after the checkpoint are processed "
                "again on top of those kept writes: their effect counts twice (e.g. a count increments "
                "again). Commit more often than the changelog's min.compaction.lag.ms (task.commit.ms), "
                "keep containers from staying down that long, or raise "
                "stores.%s.changelog.min.compaction.lag.ms",
                store,
                self.context.task_name,
                len(kept),
                ssp,
                restore_to,
                end,
                actions.start,
                restore_to,
                store,
            )
        self.trimmed[store] = len(undone)
        if actions.seed:
            self._seeded_keys[store] = undone
        elif tail is not None and not tail.complete():
            log.warning(
                "restore of store %s of task %s: changelog %s has a gap at offset %d, after the "
                "checkpointed offset %d, and the checkpoint is older than 0.9 x delete.retention.ms: a "
                "delete written after the checkpoint may be gone from the changelog with the checkpointed "
                "value it replaced. "
                "Writing every key of the store (restored from the local copy, exactly the checkpointed "
                "state) to the changelog again, so that a restore elsewhere finds them; commit more often "
                "than delete.retention.ms to avoid it",
                store,
                self.context.task_name,
                ssp,
                tail.gap_at,
                restore_to,
            )
            self._seeded_keys[store] = undone

    def _seed(self, store: str, engine: KeyValueStore[bytes, bytes], stop: threading.Event) -> None:
        """Writes every key of the restored store that the replay did not undo (undo wrote the others)."""
        ssp = self.changelogs[store]
        undone = self._seeded_keys.pop(store, set())
        send = self._producer.send
        self._undo_sent = True
        written = 0
        for key, value in engine.all():
            if key in undone:
                continue
            if written % BATCH == 0 and stop.is_set():
                raise RestoreInterrupted(self.context.task_name, store, None)
            send(ssp.stream, value, key, ssp.partition)
            written += 1
        log.info(
            "seeded changelog %s of store %s of task %s: %d key(s) written, %d undone",
            ssp,
            store,
            self.context.task_name,
            written,
            len(undone),
        )

    def _undo(
        self,
        engine: KeyValueStore[bytes, bytes],
        ssp: SystemStreamPartition,
        msgs: Sequence[RawMessage | _KeyOnly],
        undone: set[bytes],
    ) -> None:
        # Writes after the checkpoint: put back the checkpointed value (or delete), once per key.
        send = self._producer.send
        self._undo_sent = True
        for m in msgs:
            key = m.key()
            if key is None or key in undone:
                continue
            undone.add(key)
            send(ssp.stream, engine.get(key), key, ssp.partition)

    # -- close -------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the engines and consumers this manager opened (not engines restored in place)."""
        for engine in self._open:
            engine.close()
        self._open.clear()
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()

    def _consumer(self, system: str) -> RestoreConsumer:
        consumer = self._consumers.get(system)
        if consumer is None:
            consumer = self._consumers[system] = self._consumer_for(system)
        return consumer


class _Consecutive:
    """Whether a read saw every offset of [first, last]: compaction leaves a gap where it removed a record.

    Proves a replay of [start, checkpointed] exact for a checkpoint old enough for compaction to have removed
    records (`StoreActions.undo_proven_only`): compaction removes a record only when a later record of its
    key exists, so consecutive offsets (every record read, exactly-once control records and void writes
    included) prove that nothing up to the checkpoint was removed, and undoing with the replayed values is
    exact. A gap proves nothing either way (the cleaner may have removed a record that later ones replaced
    before the checkpoint), so then the writes after the checkpoint are kept: undoing with a value older than
    the checkpointed one (or none) could lose it. Under exactly-once that keeps the void writes of the
    version after the restored one, for the same reason. (Telling, per key, which checkpointed values
    survived would rely on the order in which a broker's cleaner removes records, which brokers implementing
    Kafka's protocol differ in.) Samsa's changelog producer is not transactional, so Kafka's transaction
    markers leave no gaps.

    After the checkpoint (`StoreActions.reseed_on_gap`), no gap proves that no tombstone was removed there."""

    def __init__(self, first: int, last: int) -> None:
        self._next = first
        self._last = last
        #: The first offset missing, once a gap is seen.
        self.gap_at: int | None = None

    def read(self, msgs: Sequence[RawMessage]) -> None:
        """Notes the offsets of `msgs`, a batch of one partition in offset order."""
        if not msgs or self.gap_at is not None or self._next > self._last:
            return
        first, final = msgs[0].offset(), msgs[-1].offset()
        if first == self._next and final - first == len(msgs) - 1:
            self._next = final + 1  # the usual batch: consecutive from where the last one ended
            return
        for m in msgs:
            offset = m.offset()
            if offset < self._next:  # before `first`
                continue
            if offset != self._next:
                self.gap_at = self._next
                return
            self._next += 1
            if self._next > self._last:
                return

    def complete(self) -> bool:
        """Whether every offset of [first, last] was read (asked once the read is past `last`, or done)."""
        if self.gap_at is None and self._next <= self._last:
            self.gap_at = self._next  # the read ended before `last`: offsets at the end are missing
        return self.gap_at is None


class _KeyOnly(NamedTuple):
    """A key to undo, where no record is at hand."""

    k: bytes

    def key(self) -> bytes:
        return self.k


def _apply(
    put_all: Callable[[list[tuple[bytes, bytes | None]]], None],
    msgs: list[RawMessage],
    progress: RestoreProgress,
) -> None:
    # One engine batch per fetch; a keyless record cannot be a store write and is skipped.
    keys = [m.key() for m in msgs]
    values = [m.value() for m in msgs]
    if None in keys:
        pairs = [(k, v) for k, v in zip(keys, values, strict=True) if k is not None]
        keys, values = [k for k, _ in pairs], [v for _, v in pairs]
    put_all(list(zip(keys, values, strict=True)))  # type: ignore[arg-type]
    progress.bytes += sum(map(len, keys)) + sum(map(len, filter(None, values)))  # type: ignore[arg-type]
    progress.records += len(msgs)


def _first_after(msgs: list[RawMessage], offset: int) -> int:
    """Index of the first message after `offset` (messages are in offset order)."""
    lo, hi = 0, len(msgs)
    while lo < hi:
        mid = (lo + hi) // 2
        if msgs[mid].offset() <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _rebuilding_file(store_dir: Path) -> Path:
    """`<store dir>.rebuilding`: a store name holds no dot, so no store or checkpoint dir takes this name."""
    return store_dir.with_name(store_dir.name + ".rebuilding")


def _read_rebuilding(path: Path) -> tuple[str | None, str] | None:
    """(checkpoint id, changelog) of a rebuild a start began, None when there is none; an unreadable file
    counts as one begun for no checkpoint (deleted, and the plan decided afresh)."""
    if not path.exists():
        return None
    _, payload, _ = read_checked_json(path)
    if payload is None:
        return (None, "")
    return (str(payload.get("checkpoint-id")), str(payload.get("changelog")))


def _checkpoint_millis(checkpoint_id: str | None) -> int | None:
    """The epoch millis of `<millis>-<nanos>`; None when absent or malformed (trimming then goes ahead)."""
    if checkpoint_id is None:
        return None
    millis, sep, _ = checkpoint_id.partition("-")
    if not sep or not millis.isdigit():
        log.warning("checkpoint id %r is not <millis>-<nanos>; its age is unknown", checkpoint_id)
        return None
    return int(millis)


def _spec(store: str, config: Mapping[str, str]) -> StoreSpec:
    return store_specs({f"stores.{store}.{key}": value for key, value in config.items()})[store]
