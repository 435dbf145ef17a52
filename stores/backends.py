"""Which state backends back up and restore each store (Samza's precedence rules)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.stores.backend import Markers
from samsa.stores.changelog.exceptions import ChangelogMarkerError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.exceptions import RestoreSourceError, StoreConfigError
from samsa.stores.factory import ROCKSDB, StoreSpec

CHANGELOG = "changelog"
BLOBSTORE = "blobstore"
# Samza job files name the factory classes.
_ALIASES = {
    "org.apache.samza.storage.KafkaChangelogStateBackendFactory": CHANGELOG,
    "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory": BLOBSTORE,
}


@dataclass(frozen=True)
class StoreBackends:
    """A store's backup factories, and its restore factories in priority order (a subset of them)."""

    backup: tuple[str, ...]
    restore: tuple[str, ...]
    #: The store's `stores.<s>.changelog`, None without one: what a refusal's advice may name.
    changelog: str | None = field(default=None, compare=False)

    @property
    def durable(self) -> bool:
        return bool(self.backup)

    def restore_from(self, store: str, markers: Mapping[str, Markers] | None, task: str = "") -> str | None:
        """The first restore factory with a marker for `store` in the checkpoint, else the first one.

        A checkpoint that has markers for `store`, but none from a restore factory, is refused
        (`RestoreSourceError`): restoring it from a backend the checkpoint does not cover would silently
        start from other state (a changelog with no marker holds at most the writes since it was added).
        """
        for backend in self.restore:
            if markers and store in markers.get(backend, {}):
                return backend
        holders = sorted(b for b, stores in (markers or {}).items() if store in stores)
        if holders:
            assert markers is not None
            raise RestoreSourceError(
                store,
                task,
                holders,
                self.restore,
                changelog_unset=self.changelog is None and CHANGELOG not in self.backup,
                checkpointed_changelog=_checkpointed_changelog(markers, store),
            )
        return self.restore[0] if self.restore else None


def _checkpointed_changelog(markers: Mapping[str, Markers], store: str) -> str | None:
    """The changelog (system.stream) the checkpoint's changelog marker of `store` names, if it has one."""
    text = markers.get(CHANGELOG, {}).get(store)
    if text is None:
        return None
    try:
        ssp = ChangelogMarker.decode(text, store).changelog
    except ChangelogMarkerError:
        return None  # the restore names a bad marker itself
    return f"{ssp.system}.{ssp.stream}"


def _factories(config: Mapping[str, str], keys: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    for key in keys:
        if key in config:  # present, even empty, wins (Samza)
            names = tuple(_ALIASES.get(n.strip(), n.strip()) for n in config[key].split(",") if n.strip())
            for name in names:
                if name not in (CHANGELOG, BLOBSTORE):
                    raise StoreConfigError(
                        key, f"unknown state backend {name!r}; use {CHANGELOG} and/or {BLOBSTORE}"
                    )
            return key, names
    return None


def _no_backup(store: str) -> str:
    """The setting that keeps a job-wide backup off one store, as it reads in either config format."""
    return f'stores.{store}.backup.factories= (empty; in YAML: stores.{store}.backup.factories: "")'


def store_backends(config: Mapping[str, str], spec: StoreSpec) -> StoreBackends:
    """Backup: `stores.<s>.backup.factories`, else the job's, else `changelog` when the store has one.
    Restore: `stores.<s>.restore.factories`, else the job's (for stores something backs up), else backup."""
    s = spec.name
    found = _factories(
        config, (f"stores.{s}.backup.factories", "stores.backup.factories", "task.backup.factories")
    )
    backup_key, backup = found if found else ("", (CHANGELOG,) if spec.changelog else ())
    if CHANGELOG in backup and not spec.changelog:
        raise StoreConfigError(
            f"stores.{s}.changelog",
            f"is required: {backup_key} backs store {s!r} up to it; set stores.{s}.changelog="
            f"<system>.<stream> (a topic of the store's own, e.g. kafka.<job>-{s}-changelog; the one it had, "
            f"if it had one), or, for a store kept by no backend (empty at every start), {_no_backup(s)}; "
            f"where the store's checkpoint holds a changelog position, give that state up first with "
            f"`samsa checkpoint forget-store <job config> --store {s}`",
        )
    if BLOBSTORE in backup and spec.factory != ROCKSDB:
        store_key = f"stores.{s}.backup.factories"
        changelog = (
            f"{store_key}={CHANGELOG}"
            if spec.changelog
            else f"{store_key}={CHANGELOG} and stores.{s}.changelog=<system>.<stream> (a topic of the "
            f"store's own, e.g. kafka.<job>-{s}-changelog)"
        )
        raise StoreConfigError(
            backup_key or store_key,
            f"the blob store backs up RocksDB stores only, and store {s!r} is {spec.factory}. Either keep "
            f"no backup of it (a scratch store, empty at every start): {_no_backup(s)}; or back it up "
            f"to a changelog (it then survives restarts): {changelog}",
        )
    own = _factories(config, (f"stores.{s}.restore.factories",))
    job = _factories(config, ("stores.restore.factories", "task.restore.factories")) if backup else None
    restore_key, restore = own or job or ("", backup)
    extra = [name for name in restore if name not in backup]
    if extra:
        target = backup_key or f"stores.{s}.backup.factories"
        raise StoreConfigError(
            restore_key,
            f"{', '.join(extra)} restores store {s!r} but does not back it up; add it to {target}",
        )
    if backup and not restore:
        # A backed-up store that nothing restores would open with writes no checkpoint covers.
        raise StoreConfigError(restore_key, f"store {s!r} is backed up, so it needs a restore factory")
    return StoreBackends(backup, restore, spec.changelog)
