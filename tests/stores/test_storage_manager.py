"""The container storage manager with a fake backend: a restore per store; a failure stops the rest."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from samsa.serde.registry import SerdeRegistry
from samsa.stores.backend import TaskStoresContext
from samsa.stores.factory import store_specs
from samsa.stores.storage_manager import ContainerStorage, TaskStoresModel


class Restore:
    def __init__(self, backend: Backend, context: TaskStoresContext) -> None:
        self.backend = backend
        self.store = next(iter(context.store_dirs))

    def init(self, markers: Any, checkpoint_id: Any = None) -> None:
        self.backend.inits.append((self.store, markers))

    def restore(self, stop: threading.Event) -> None:
        if self.store == self.backend.failing:
            raise OSError(f"cannot restore {self.store}")
        started = time.monotonic()
        while not stop.wait(0.01):
            if time.monotonic() - started > 30:
                return

    def close(self) -> None:
        self.backend.closed.append(self.store)


class Backend:
    name = "changelog"

    def __init__(self, failing: str | None = None) -> None:
        self.failing = failing
        self.inits: list[tuple[str, Any]] = []
        self.closed: list[str] = []

    def restore_manager(self, context: TaskStoresContext) -> Restore:
        return Restore(self, context)


def _storage(tmp_path: Path, backend: Backend) -> ContainerStorage:
    config = {
        **{f"stores.{s}.factory": "rocksdb" for s in ("a", "b", "c")},
        **{f"stores.{s}.changelog": f"kafka.{s}-log" for s in ("a", "b", "c")},
        "stores.scratch.factory": "rocksdb",
    }
    return ContainerStorage(
        "job-1",
        [TaskStoresModel("Partition 0", 0)],
        store_specs(config),
        config,
        SerdeRegistry({}),
        tmp_path / "logged",
        tmp_path / "plain",
        {"changelog": backend},
        None,
        parallelism=4,
    )


def test_every_durable_store_gets_its_own_restore_and_scratch_stores_are_wiped(tmp_path: Path) -> None:
    scratch = tmp_path / "plain" / "job-1" / "Partition_0" / "scratch"
    scratch.mkdir(parents=True)
    (scratch / "old").write_text("x")
    backend = Backend()
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    _storage(tmp_path, backend).restore({"Partition 0": {"changelog": {"a": "m"}}}, {}, stop)
    assert sorted(s for s, _ in backend.inits) == ["a", "b", "c"]
    assert dict(backend.inits)["a"] == {"a": "m"}
    assert sorted(backend.closed) == ["a", "b", "c"]
    assert not scratch.exists()


def test_the_first_failed_restore_stops_the_others(tmp_path: Path) -> None:
    backend = Backend(failing="b")
    started = time.monotonic()
    with pytest.raises(OSError, match="cannot restore b"):
        _storage(tmp_path, backend).restore({}, {}, threading.Event())
    assert time.monotonic() - started < 5, "the other restores were stopped, not waited out"
    # A restore cancelled before it ran opened no manager; every manager opened was closed.
    assert "b" in backend.closed
    assert sorted(backend.closed) == sorted(s for s, _ in backend.inits)


class SeedBackend(Backend):
    """Records each manager's context, for the blob store and the changelog alike."""

    def __init__(self, name: str, contexts: list[tuple[str, TaskStoresContext]]) -> None:
        super().__init__()
        self.name = name
        self.contexts = contexts

    def restore_manager(self, context: TaskStoresContext) -> Restore:
        self.contexts.append((self.name, context))
        return Restore(self, context)


def _dual(tmp_path: Path, restore: str) -> tuple[ContainerStorage, list[tuple[str, TaskStoresContext]]]:
    config = {
        "stores.s.factory": "rocksdb",
        "stores.s.changelog": "kafka.s-log",
        "stores.backup.factories": "changelog,blobstore",
        "stores.restore.factories": restore,
    }
    contexts: list[tuple[str, TaskStoresContext]] = []
    backends = {name: SeedBackend(name, contexts) for name in ("changelog", "blobstore")}
    storage = ContainerStorage(
        "job-1",
        [TaskStoresModel("Partition 0", 0)],
        store_specs(config),
        config,
        SerdeRegistry({}),
        tmp_path / "logged",
        tmp_path / "plain",
        backends,  # type: ignore[arg-type]
        None,
    )
    return storage, contexts


@pytest.mark.parametrize("restore", ["changelog,blobstore", "blobstore,changelog", "blobstore"])
def test_a_blob_restore_without_a_changelog_marker_seeds_the_changelog(tmp_path: Path, restore: str) -> None:
    storage, contexts = _dual(tmp_path, restore)
    stop = threading.Event()
    stop.set()  # the fake restores return at once
    storage.restore({"Partition 0": {"blobstore": {"s": "index"}}}, {"Partition 0": "1-1"}, stop)
    assert [name for name, _ in contexts] == ["blobstore", "changelog"]
    assert all(c.seeded == {"s"} and c.tail_restored == {"s"} for _, c in contexts)


def test_a_blob_restore_with_a_changelog_marker_replays_the_tail_without_seeding(tmp_path: Path) -> None:
    storage, contexts = _dual(tmp_path, "blobstore,changelog")
    stop = threading.Event()
    stop.set()
    markers = {"blobstore": {"s": "index"}, "changelog": {"s": "m"}}
    storage.restore({"Partition 0": markers}, {"Partition 0": "1-1"}, stop)
    assert [name for name, _ in contexts] == ["blobstore", "changelog"]
    assert all(c.seeded == frozenset() and c.tail_restored == {"s"} for _, c in contexts)
