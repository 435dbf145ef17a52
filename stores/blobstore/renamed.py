"""A blob-backed store renamed (or removed) since its task's last checkpoint: checked at start, before any
store is restored (and before an exactly-once start writes its abort records).

A store's blob-store snapshot is found by the store's name. When a task's last checkpoint has the snapshot
of a store the job no longer defines, and a store the job restores from the blob store has no marker in
that checkpoint, the store looks renamed: started, the new name would be empty and the next commit would
drop the old snapshot from the checkpoints. The start is refused (`StoreRenamedError`, a config error);
`samsa checkpoint forget-store` gives the old store's state up on purpose. A store only removed (no such
new store) is warned about, and its snapshot is kept in the blob store (the job's commits do not delete
it) until `samsa blobstore gc`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from samsa.stores.backend import Markers
from samsa.stores.backends import BLOBSTORE
from samsa.stores.blobstore.exceptions import StoreRenamedError

log = logging.getLogger(__name__)

_NAMED = 3  # snapshots named one by one in the warning about a removed store


def check_store_renames(
    defined: Collection[str],
    blob_restored: Collection[str],
    checkpoints: Mapping[str, tuple[str, Mapping[str, Markers]]],
) -> None:
    """Raises `StoreRenamedError` for the tasks whose checkpoint looks like a blob-backed store renamed;
    warns about the stores only removed. `defined`: the job's stores; `blob_restored`: those that restore
    from the blob store when their checkpoint has no marker of them (its first restore factory);
    `checkpoints`: task -> its last (V2) checkpoint's id and markers by backend."""
    renames: list[tuple[str, str, dict[str, str], list[str]]] = []
    removed: dict[str, list[tuple[str, str]]] = {}
    for task, (checkpoint_id, markers) in sorted(checkpoints.items()):
        old = {s: blob_id for s, blob_id in markers.get(BLOBSTORE, {}).items() if s not in defined}
        if not old:
            continue
        # A store with a marker of any backend is no new one (a changelog-backed store adding the blob
        # store, migration step 1, has its changelog's).
        marked = {s for stores in markers.values() for s in stores}
        new = sorted(s for s in blob_restored if s not in marked)
        if new:
            renames.append((task, checkpoint_id, old, new))
            continue
        for store, blob_id in old.items():
            removed.setdefault(store, []).append((task, blob_id))
    if renames:
        raise StoreRenamedError(renames)
    for store, found in sorted(removed.items()):
        named = ", ".join(f"{task!r} (index {blob_id!r})" for task, blob_id in found[:_NAMED])
        more = f" and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
        log.warning(
            "store %s: the last checkpoint of task(s) %s%s has a blob-store snapshot of it, but the job no "
            "longer defines it: the snapshot is not restored, and the next checkpoints no longer name it. It "
            "stays in the blob store (the job's commits do not delete it) until `samsa blobstore gc` deletes "
            "it (see docs/state.md, Blob-store backup and restore: renaming a store)",
            store,
            named,
            more,
        )
