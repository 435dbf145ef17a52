"""Opens every store of a container's tasks in its directory, with the store's serdes."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samsa.serde.registry import SerdeRegistry
from samsa.stores.api import KeyValueStore
from samsa.stores.cached import CachedStore, cache_settings
from samsa.stores.factory import StoreSpec, open_engine
from samsa.stores.serialized import SerializedStore

log = logging.getLogger(__name__)


def task_dir_name(task_name: str) -> str:
    """A task name as a directory name (Samza: spaces become underscores)."""
    return task_name.replace(" ", "_")


class TaskStorage:
    """The stores of one task: `<base>/<job>/<task>/<store>/`."""

    def __init__(
        self,
        specs: Mapping[str, StoreSpec],
        serdes: SerdeRegistry,
        base_dir: Path,
        job_key: str,
        task_name: str,
    ) -> None:
        self.task_name = task_name
        self._engines: dict[str, KeyValueStore[bytes, bytes]] = {}
        self.stores: dict[str, KeyValueStore[Any, Any]] = {}
        task_dir = base_dir / job_key / task_dir_name(task_name)
        for name, spec in specs.items():
            path = task_dir / name
            # A store without a backup cannot be trusted after a restart (its writes since the last commit
            # were never checkpointed), so like Samza it starts empty.
            if path.exists():
                log.info("deleting non-logged store %s of %s at %s", name, task_name, path)
                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            engine = open_engine(spec, path)
            self._engines[name] = engine
            typed: KeyValueStore[Any, Any] = SerializedStore(
                engine, serdes.get(spec.key_serde), serdes.get(spec.msg_serde)
            )
            cache_size, write_batch_size = cache_settings(name, spec.config)
            if cache_size:
                typed = CachedStore(typed, cache_size, write_batch_size)
            self.stores[name] = typed

    def flush(self) -> None:
        for store in self.stores.values():
            store.flush()

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
