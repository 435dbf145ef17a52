"""A store's changelog that lost the records its checkpoint covers (deleted and recreated, records deleted):
checked at start, before any store is restored and before an exactly-once start writes its abort records to
the changelogs (which would move a recreated changelog's end towards the checkpointed offset, until a start
no longer sees the loss).

The decision is the restore's own (`actions.store_actions`, through `ChangelogRestoreManager.check`): a store
restored from its changelog alone whose checkpointed offset lies outside the changelog needs a local
checkpoint dir holding exactly the checkpointed state, else the start is refused (`ChangelogLostError`).
Stores another backend restores first (a blob-store snapshot) are left to the restore: that backend brings
the checkpointed state back, and the changelog is rebuilt from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from samsa.stores.backend import Markers, TaskStoresContext
from samsa.stores.backends import CHANGELOG
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.exceptions import RestoreSourceError

if TYPE_CHECKING:
    from samsa.stores.storage_manager import ContainerStorage


def check_changelogs_kept(
    storage: ContainerStorage,
    markers: Mapping[str, Mapping[str, Markers] | None],
    checkpoint_ids: Mapping[str, str | None],
) -> dict[str, Markers]:
    """Raises `ChangelogLostError` for the first store of a task (by task, then store) that its changelog
    alone restores and whose changelog lost its checkpointed state with no exact local copy here.
    `markers` and `checkpoint_ids` are by task: its last checkpoint's markers by backend, and its id.
    Returns, by task, the changelog markers its checkpoint must hold before the restore rebuilds a lost
    changelog from the local copy here (store -> marker saying `rebuilding`): the start writes them first."""
    rebuilds: dict[str, Markers] = {}
    factory = storage.backends.get(CHANGELOG)
    if not isinstance(factory, ChangelogBackendFactory):
        return rebuilds
    for task, context in sorted(storage.contexts.items()):
        task_markers = markers.get(task)
        changelog_markers = (task_markers or {}).get(CHANGELOG)
        if not changelog_markers:
            continue  # no changelog position: nothing it can have lost (a first start)
        stores = [
            s for s in sorted(storage.store_backends) if _from_changelog(storage, s, task, task_markers)
        ]
        if not stores:
            continue
        sub = _subset(context, stores, task_markers or {})
        marked = factory.check_restore(sub, changelog_markers, checkpoint_ids.get(task))
        if marked:
            rebuilds[task] = marked
    return rebuilds


def _from_changelog(
    storage: ContainerStorage, store: str, task: str, task_markers: Mapping[str, Markers] | None
) -> bool:
    """Whether the store's changelog alone restores it (the first restore backend with its marker)."""
    if store in storage.read_only or store not in storage.contexts[task].store_dirs:
        return False
    try:
        return storage.store_backends[store].restore_from(store, task_markers, task) == CHANGELOG
    except RestoreSourceError:
        return False  # the restore refuses it, naming it


def _subset(
    context: TaskStoresContext, stores: list[str], markers: Mapping[str, Markers]
) -> TaskStoresContext:
    return TaskStoresContext(
        context.job_key,
        context.task_name,
        context.changelog_partition,
        {s: context.store_dirs[s] for s in stores},
        {s: context.store_configs[s] for s in stores},
        checkpoint_markers={backend: dict(m) for backend, m in markers.items()},
        exactly_once=context.exactly_once,
    )
