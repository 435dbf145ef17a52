"""A container's stores: restored through their backends at start (in parallel), then opened in layers.

Layers per store, top down: the object cache, the serde layer, the changelog (logged stores), the engine.
Stores that no backend keeps (non-durable) start empty at every start, as in Samza: their writes since the
last commit were never checkpointed. Durable stores are never wiped merely because there is no checkpoint:
their backend decides what to keep.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.exactly_once.overlay import OverlayStore
from samsa.serde.registry import SerdeRegistry
from samsa.stores.api import KeyValueStore
from samsa.stores.backend import (
    Markers,
    RestoreProgress,
    StateBackendFactory,
    TaskRestoreManager,
    TaskStoresContext,
)
from samsa.stores.backends import BLOBSTORE, CHANGELOG, StoreBackends, store_backends
from samsa.stores.blobstore.exceptions import SNAPSHOT_UNUSABLE
from samsa.stores.cached import CachedStore, cache_settings
from samsa.stores.checkpoint_dirs import Checkpointable, delete_checkpoint_dirs
from samsa.stores.exceptions import DamagedStoreError, LocalStoreDiscardedError, StoreCorruptError, StoreError
from samsa.stores.factory import ROCKSDB, StoreSpec, open_engine
from samsa.stores.logged import LoggedStore
from samsa.stores.readonly import ReadOnlyStore
from samsa.stores.restore_progress import RestoreReporter
from samsa.stores.serialized import SerializedStore
from samsa.stores.snapshot_gate import SnapshotGate
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)

Send = Callable[..., None]
EngineFactory = Callable[[StoreSpec, Path], KeyValueStore[bytes, bytes]]


def task_dir_name(task_name: str) -> str:
    """A task name as a directory name (Samza: spaces become underscores)."""
    return task_name.replace(" ", "_")


def damaged_marker(store_dir: Path) -> Path:
    """The file that sets a store's damaged local copy aside: `<store dir>.damaged`. A store name holds no
    dot (one segment of a `stores.<s>.` key), so no store or checkpoint dir can take this name."""
    return store_dir.with_name(store_dir.name + ".damaged")


def _tagged(send: Send, context: TaskStoresContext) -> Send:
    """`send` with the headers the task set for the version being checkpointed (exactly-once)."""

    def tagged(
        topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None
    ) -> None:
        send(topic, value, key, partition, context.changelog_headers)

    return tagged


@dataclass(frozen=True)
class TaskStoresModel:
    """One task as the storage manager sees it."""

    name: str
    changelog_partition: int


class StoreRestore:
    """Restores one store: from its primary backend, then replays its changelog tail when it has one.

    The primary's manager is made and initialised in `restore`, on the restore pool: its init reads the
    backend (a blob-store snapshot's index), so the stores of a container do that in parallel too. When the
    primary's snapshot is missing, corrupt or unsafe (`SNAPSHOT_UNUSABLE`) and the store has a changelog,
    the changelog restores it instead, and the log says so.
    """

    def __init__(
        self,
        store: str,
        task: str,
        primary: Callable[[], TaskRestoreManager],
        changelog: Callable[[], TaskRestoreManager] | None,
        seed: bool = False,
    ) -> None:
        """`seed`: `changelog` seeds the changelog from the restored store (the checkpoint has no marker of
        it, so it is no fallback: it may hold only the writes since it was added)."""
        self.store = store
        self.task = task
        self._primary = primary
        self._changelog = changelog
        self._seed = seed

    def restore(self, stop: threading.Event) -> None:
        try:
            self._restore_with(self._primary, stop)
        except SNAPSHOT_UNUSABLE as e:
            if self._changelog is None or self._seed:
                raise
            log.warning(
                "store %s of task %s: restoring from its changelog instead of the blob store: %s",
                self.store,
                self.task,
                e,
            )
        if self._changelog is not None:
            self._restore_with(self._changelog, stop)

    @staticmethod
    def _restore_with(open_manager: Callable[[], TaskRestoreManager], stop: threading.Event) -> None:
        manager = open_manager()
        try:
            manager.restore(stop)
        finally:
            manager.close()


class TaskStorage:
    """The open stores of one task, with what commits need (engines, dirs, backends)."""

    def __init__(
        self,
        context: TaskStoresContext,
        stores: dict[str, KeyValueStore[Any, Any]],
        writers: dict[str, KeyValueStore[Any, Any]] | None = None,
    ) -> None:
        self.context = context
        self.task_name = context.task_name
        #: What the task sees (read-only views of the stores the system writes).
        self.stores = stores
        #: The writable stores behind the read-only views, for the system.
        self.writers = dict(writers or {})
        #: Called after every flush (e.g. to record how far the stores are).
        self.after_flush: list[Callable[[], None]] = []
        #: Exactly-once: each store's writes of the open version, reaching the store at `flush` only.
        self.overlays: dict[str, OverlayStore] = {}

    def _all(self) -> list[KeyValueStore[Any, Any]]:
        return [self.writers.get(name, store) for name, store in self.stores.items()]

    def writes(self) -> int | None:
        """A count that grows with every write of the task to its stores, those still in a store's cache
        included (the layer the task writes to counts them): equal at two calls means nothing was written
        in between. None when a store cannot tell."""
        total = 0
        for name, store in self.stores.items():
            top = self.writers.get(name, store)
            if isinstance(top, CachedStore | SerializedStore):
                total += top.writes
            elif not isinstance(top, ReadOnlyStore):  # a read-only one is another task's to write
                return None
        return total

    def flush(self) -> None:
        """Writes everything the task wrote into its stores (and their changelogs); with overlays, this is
        the commit of the open version."""
        try:
            for store in self._all():
                store.flush()
            for overlay in self.overlays.values():
                overlay.commit()
        except Exception as e:
            e.add_note(f"task {self.task_name}: while flushing its stores for a commit")
            raise
        for hook in self.after_flush:
            hook()

    def discard_uncommitted(self) -> int:
        """Exactly-once rewind: drops the open version's writes (caches first: they hold some); returns
        how many distinct keys went."""
        dropped = 0
        for name, store in self.stores.items():
            if name in self.overlays and isinstance(store, CachedStore):
                dropped += store.discard()
        for overlay in self.overlays.values():
            dropped += overlay.discard()
        return dropped

    def close(self) -> None:
        try:
            for store in self._all():
                store.close()
        except Exception as e:
            e.add_note(f"task {self.task_name}: while closing its stores")
            raise


class ContainerStorage:
    """Restores and opens the stores of every task of a container."""

    def __init__(
        self,
        job_key: str,
        tasks: list[TaskStoresModel],
        specs: Mapping[str, StoreSpec],
        config: Mapping[str, str],
        serdes: SerdeRegistry,
        logged_dir: Path,
        non_logged_dir: Path,
        backends: Mapping[str, StateBackendFactory],
        changelog_send: Send | None,
        parallelism: int = 4,
        read_only: Mapping[str, str] | None = None,
        shared: Mapping[str, str] | None = None,
        engines: Mapping[str, EngineFactory] | None = None,
        input_partitions: Mapping[str, int] | None = None,
    ) -> None:
        """`input_partitions`: the job model's counts of its grouped inputs (`TaskStoresContext`)."""
        self.job_key = job_key
        #: Stores the system writes and tasks only read (adjunct stores) -> what feeds them. They are not
        #: wiped at start: their keeper decides what to keep.
        self.read_only = dict(read_only or {})
        #: Container-level stores (a broadcast stream's adjunct store) -> the task whose directory holds the
        #: one engine every task of the container reads; only that task writes it.
        self.shared = dict(shared or {})
        #: Stores whose engine is not the factory's (a bounded adjunct dataset) -> how to open it.
        self.engine_factories = dict(engines or {})
        self.tasks = tasks
        self.specs = dict(specs)
        self.serdes = serdes
        self.backends = dict(backends)
        self.store_backends: dict[str, StoreBackends] = {
            s: store_backends(config, spec) for s, spec in self.specs.items()
        }
        self._logged_dir = logged_dir
        self._non_logged_dir = non_logged_dir
        self._send = changelog_send
        self._parallelism = parallelism
        self._input_partitions = dict(input_partitions) if input_partitions is not None else None
        self.contexts = {t.name: self._context(t) for t in tasks}
        #: Task -> its last checkpoint's markers by backend (None: no checkpoint), as `restore` got them.

    def _context(self, task: TaskStoresModel) -> TaskStoresContext:
        dirs = {}
        for name in self.specs:
            base = self._logged_dir if self.store_backends[name].durable else self._non_logged_dir
            dirs[name] = base / self.job_key / task_dir_name(task.name) / name
        return TaskStoresContext(
            self.job_key,
            task.name,
            task.changelog_partition,
            dirs,
            {name: spec.config for name, spec in self.specs.items()},
            input_partitions=self._input_partitions,
        )

    def use_exactly_once(self) -> None:
        """Exactly-once: every store a task writes gets an overlay of its open version's writes, and its
        changelog writes are tagged and read back through `exactly_once.changelog`."""
        for context in self.contexts.values():
            context.exactly_once = True

    def changelogs(self, task: str) -> list[SystemStreamPartition]:
        """The changelog partitions the task's logged stores write (shared stores: their keeper's)."""
        context = self.contexts[task]
        out = []
        for name, spec in sorted(self.specs.items()):
            written = name not in self.read_only and self.shared.get(name, task) == task
            if spec.changelog and CHANGELOG in self.store_backends[name].backup and written:
                system, _, topic = spec.changelog.partition(".")
                out.append(SystemStreamPartition(system, topic, context.changelog_partition))
        return out

    # -- start --------------------------------------------------------------------------------------
    def restore(
        self,
        markers: Mapping[str, Mapping[str, Markers] | None],
        checkpoint_ids: Mapping[str, str | None],
        stop: threading.Event,
        local_state_kept: Collection[str] = frozenset(),
    ) -> None:
        """Wipes non-durable stores, then restores every durable store of every task, in parallel.
        `markers` and `checkpoint_ids` are by task: its last checkpoint's markers by backend, and its id;
        `local_state_kept` names the tasks whose checkpoint a reset wrote keeping the state (see
        `TaskStoresContext.local_state_kept`)."""
        managers: list[StoreRestore] = []
        # Every store's source first: a refused one (`RestoreSourceError`) stops the start before anything
        # is deleted (a store whose changelog was removed from the config is no longer durable, so wiped).
        sources = {
            task.name: {
                name: backends.restore_from(name, markers.get(task.name), task.name)
                for name, backends in self.store_backends.items()
            }
            for task in self.tasks
        }
        self.discard_damaged()
        for task in self.tasks:
            context = self.contexts[task.name]
            self._open_in_memory_engines(context)
            for name, backends in self.store_backends.items():
                if not backends.durable and name not in self.read_only:
                    self._wipe(context.store_dirs[name], task.name, name)
            task_markers = markers.get(task.name)
            checkpoint_id = checkpoint_ids.get(task.name)
            kept = task.name in local_state_kept
            for name in self.store_backends:
                backend = sources[task.name][name]
                if backend is None:
                    continue
                # One manager per store: every store of every task restores in parallel.
                managers.append(
                    self._store_restore(context, name, backend, task_markers, checkpoint_id, kept)
                )
        if not managers:
            return
        progress = [p for c in self.contexts.values() for p in c.progress.values()]
        # The first failure fails the start: the other restores are stopped (through `stop`), not waited out.
        with RestoreReporter(progress), ThreadPoolExecutor(self._parallelism, "restore") as pool:
            futures = [pool.submit(manager.restore, stop) for manager in managers]
            try:
                for future in as_completed(futures):
                    future.result()
            except BaseException:
                stop.set()
                for future in futures:
                    future.cancel()  # never ran: opened nothing
                raise

    def _store_restore(
        self,
        context: TaskStoresContext,
        store: str,
        backend: str,
        task_markers: Mapping[str, Markers] | None,
        checkpoint_id: str | None,
        local_state_kept: bool = False,
    ) -> StoreRestore:
        """The restore of one store from `backend`, followed by its changelog tail when it has one."""
        changelog_markers = dict(task_markers.get(CHANGELOG, {})) if task_markers else None
        backend_markers = dict(task_markers.get(backend, {})) if task_markers else None
        logged = backend != CHANGELOG and CHANGELOG in self.store_backends[store].backup
        tail = logged and changelog_markers is not None and store in changelog_markers
        # Restored from a snapshot whose checkpoint has no changelog marker: the changelog was added (or
        # written again) since, and holds at most the writes since then. Seeded from the restored store
        # before the first commit records its marker, it is a complete restore source from then on.
        seed = logged and not tail and backend_markers is not None and store in backend_markers
        sub = self._subset(context, [store], task_markers, tail or seed, seed, local_state_kept)
        changelog: Callable[[], TaskRestoreManager] | None = None
        if tail or seed:

            def changelog() -> TaskRestoreManager:
                return self._opened(CHANGELOG, sub, changelog_markers, checkpoint_id)

        def primary() -> TaskRestoreManager:
            return self._opened(backend, sub, backend_markers, checkpoint_id)

        return StoreRestore(store, context.task_name, primary, changelog, seed)

    def _opened(
        self,
        backend: str,
        context: TaskStoresContext,
        markers: Markers | None,
        checkpoint_id: str | None,
    ) -> TaskRestoreManager:
        """`backend`'s restore manager of `context`, initialised; closed again when its init fails."""
        manager = self.backends[backend].restore_manager(context)
        try:
            manager.init(markers, checkpoint_id)
        except BaseException:
            manager.close()
            raise
        return manager

    def _subset(
        self,
        context: TaskStoresContext,
        stores: list[str],
        task_markers: Mapping[str, Markers] | None = None,
        tail: bool = False,
        seed: bool = False,
        local_state_kept: bool = False,
    ) -> TaskStoresContext:
        sub = TaskStoresContext(
            context.job_key,
            context.task_name,
            context.changelog_partition,
            {s: context.store_dirs[s] for s in stores},
            {s: context.store_configs[s] for s in stores},
            context.progress,
            context.engines,
            {backend: dict(m) for backend, m in (task_markers or {}).items()},
            frozenset(stores) if tail else frozenset(),
            context.restored_from,
            context.exactly_once,
            seeded=frozenset(stores) if seed else frozenset(),
            input_partitions=context.input_partitions,
            local_state_kept=local_state_kept,
        )
        for store in stores:
            context.progress.setdefault(store, RestoreProgress(context.task_name, store))
        return sub

    def _open_in_memory_engines(self, context: TaskStoresContext) -> None:
        # Restored in place: the restore managers write into the very engine the task will use.
        for name, spec in self.specs.items():
            if spec.factory != ROCKSDB and name not in context.engines and name not in self.engine_factories:
                context.engines[name] = open_engine(spec, context.store_dirs[name])

    def discard_damaged(self) -> None:
        """Deletes every local store copy an earlier run set aside as damaged (`damaged`); `restore` calls
        it first. Idempotent: a check that reads the local dirs before the restore calls it before reading."""
        for task in self.tasks:
            for store, store_dir in self.contexts[task.name].store_dirs.items():
                self._discard_damaged(store_dir, task.name, store)

    @staticmethod
    def _discard_damaged(store_dir: Path, task: str, store: str) -> None:
        """Deletes a local copy an earlier run found damaged and set aside (`damaged`): the store dir and
        its local checkpoint dirs, which hard-link the same SST files. Its backup then restores it."""
        marker = damaged_marker(store_dir)
        if not marker.exists():
            return
        log.warning(
            "store %s of task %s: deleting its local copy %s and its local checkpoint dirs, found damaged "
            "by the last run (%s); restoring the store from its backup",
            store,
            task,
            store_dir,
            marker,
        )
        if store_dir.exists():
            shutil.rmtree(store_dir)
        delete_checkpoint_dirs(store_dir)
        marker.unlink()  # last: a crash before it deletes the rest again at the next start

    def damaged(self, damage: StoreCorruptError) -> StoreError:
        """What a container fails with when RocksDB found a store's local files damaged. With a backup to
        restore it from, the copy is set aside for the next start to delete (its dir and its checkpoint
        dirs: never reused), and the failure is restartable; without one, a `DamagedStoreError` that no
        supervisor restarts, the copy left in place. A path of no store of the container: `damage` as is."""
        found = self._store_at(damage.path)
        if found is None:
            return damage
        task, store, store_dir = found
        source = self._restore_source(task, store)
        if source is None:
            return DamagedStoreError(damage, task, self._no_backup_advice(store, store_dir))
        marker = damaged_marker(store_dir)
        try:
            marker.write_text(f"{damage.detail}\n", encoding="utf-8")
        except OSError as e:
            damage.add_note(
                f"could not set the damaged copy aside ({marker}: {e}): delete {store_dir} by hand"
            )
            return damage
        log.warning(
            "store %s of task %s: its local copy %s is damaged (%s failed: RocksDB's %s); it is set aside "
            "(%s), never reused: the container stops, and its restart deletes it with its local checkpoint "
            "dirs and restores the store from %s",
            store,
            task,
            store_dir,
            damage.action,
            damage.detail,
            marker,
            source,
        )
        return LocalStoreDiscardedError(damage, task, source, marker)

    def _store_at(self, path: Path) -> tuple[str, str, Path] | None:
        """(task, store, store dir) of the store whose live dir, or a checkpoint dir of which, is `path`."""
        target = Path(os.path.abspath(path))
        for context in self.contexts.values():
            for store, store_dir in context.store_dirs.items():
                live = Path(os.path.abspath(store_dir))
                # Exactly `<store>-<millis>-<nanos>`: store `a` must not take store `a-b`'s dir.
                checkpoint = re.fullmatch(re.escape(live.name) + r"-\d+-\d+", target.name)
                if target == live or (target.parent == live.parent and checkpoint):
                    return context.task_name, store, store_dir
        return None

    def _restore_source(self, task: str, store: str) -> str | None:
        """What rebuilds `store` of `task` once its local copy is gone; None when nothing would."""
        if store in self.read_only:
            return None  # an adjunct store: its keeper, not a backend, decides what to keep
        backends = self.store_backends[store]
        if not backends.durable:
            return "nothing: no backend keeps it, so it starts empty, as at every start"
        # Whatever the task's last completed commit holds (commits since this start included, not only the
        # checkpoint it started from): the restart restores that, and reads the inputs from that commit's
        # offsets, so the state and the offsets agree even where the commit named no snapshot of the store
        # (a store new to the job: it was empty then).
        names = {CHANGELOG: f"changelog {self.specs[store].changelog}", BLOBSTORE: "blob-store snapshot"}
        parts = [names.get(factory, factory) for factory in backends.restore]
        return f"its {' or '.join(parts)}, as of the task's last completed commit"

    def _no_backup_advice(self, store: str, store_dir: Path) -> str:
        if store in self.read_only:
            return (
                f"It is an adjunct store fed by {self.read_only[store]}: delete {store_dir} and start the "
                "job again, and the start builds the store again from that stream"
            )
        return (
            f"Put back an intact copy of {store_dir} if you keep one, or delete it and its local "
            f"checkpoint dirs ({store_dir}-<checkpoint id>) to start the store empty, then start the job "
            f"again. Back the store up to survive this: stores.{store}.changelog=<system>.<stream> or "
            f"stores.{store}.backup.factories=blobstore (docs/state.md)"
        )

    @staticmethod
    def _wipe(path: Path, task: str, store: str) -> None:
        if path.exists():
            log.info("deleting store %s of %s at %s: no backend keeps it", store, task, path)
            shutil.rmtree(path)

    def open(self) -> dict[str, TaskStorage]:
        """Opens every store for processing, layered; call after `restore`."""
        out = {}
        layered: dict[str, KeyValueStore[Any, Any]] = {}  # shared stores, opened by their keeper
        for task in sorted(self.tasks, key=lambda t: t.name not in self.shared.values()):
            context = self.contexts[task.name]
            stores: dict[str, KeyValueStore[Any, Any]] = {}
            writers: dict[str, KeyValueStore[Any, Any]] = {}
            for name, spec in self.specs.items():
                keeper = self.shared.get(name, task.name)
                if keeper != task.name:
                    stores[name] = ReadOnlyStore(
                        layered[name], name, self.read_only.get(name, "another task")
                    )
                    continue
                path = context.store_dirs[name]
                path.parent.mkdir(parents=True, exist_ok=True)
                opener = self.engine_factories.get(name, open_engine)
                engine = context.engines.get(name) or opener(spec, path)
                context.engines[name] = engine
                overlay = context.exactly_once and name not in self.read_only
                stores[name] = layered[name] = self._layers(engine, spec, context, overlay)
                if name in self.read_only:
                    writers[name] = stores[name]
                    stores[name] = ReadOnlyStore(writers[name], name, self.read_only[name])
            out[task.name] = storage = TaskStorage(context, stores, writers)
            for name, store in stores.items():
                below = store.inner if isinstance(store, CachedStore) else store
                if isinstance(below, SerializedStore) and isinstance(below.inner, OverlayStore):
                    storage.overlays[name] = below.inner
        return {t.name: out[t.name] for t in self.tasks}

    def _layers(
        self,
        engine: KeyValueStore[bytes, bytes],
        spec: StoreSpec,
        context: TaskStoresContext,
        overlay: bool = False,
    ) -> KeyValueStore[Any, Any]:
        below: KeyValueStore[bytes, bytes] = engine
        if (
            self.store_backends[spec.name].durable
            and isinstance(engine, Checkpointable)
            and spec.name not in self.read_only
        ):
            below = context.gates[spec.name] = SnapshotGate(engine)
        if spec.changelog and CHANGELOG in self.store_backends[spec.name].backup:
            assert self._send is not None, "a logged store needs the changelog producer"
            send = _tagged(self._send, context) if overlay else self._send
            topic = spec.changelog.partition(".")[2]
            below = LoggedStore(below, send, topic, context.changelog_partition)
        if overlay:
            # Exactly-once: the open version's writes reach the engine and the changelog at its checkpoint.
            below = OverlayStore(below)
        typed: KeyValueStore[Any, Any] = SerializedStore(
            below, self.serdes.get(spec.key_serde), self.serdes.get(spec.msg_serde)
        )
        cache_size, write_batch_size = cache_settings(spec.name, spec.config)
        # A store the system writes (adjunct) takes whole chunks in one engine batch: a cache in between
        # would split them entry by entry (and a bounded dataset reads another version than it writes).
        if cache_size and spec.name not in self.read_only:
            typed = CachedStore(typed, cache_size, write_batch_size)
        return typed
