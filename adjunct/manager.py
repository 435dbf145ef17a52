"""The adjunct store manager: what `stores.adstore.manager.factory` names, built in or the user's."""

from __future__ import annotations

from typing import Any, Protocol

from samsa.adjunct.bounded import BoundedDatasetEngine
from samsa.adjunct.exceptions import AdjunctConfigError
from samsa.adjunct.extractors import Entry, KeyValueExtractor
from samsa.adjunct.writer import AdjunctWriter, Count
from samsa.runtime.classpath import load_object
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.task import IncomingMessageEnvelope
from samsa.stores.api import KeyValueStore
from samsa.stores.backend import RestoreProgress

__all__ = [
    "BUILTIN",
    "MANAGER_FACTORY_KEY",
    "AdjunctManager",
    "AdjunctManagerFactory",
    "BuiltinManagerFactory",
    "checked",
    "manager_factory",
]

MANAGER_FACTORY_KEY = "stores.adstore.manager.factory"
BUILTIN = "builtin"
"""The `stores.adstore.manager.factory` value (and default) that picks `BuiltinManagerFactory`."""


class AdjunctManager(Protocol):
    """Takes the messages of one adjunct stream partition of one task instead of `process`, a chunk at a
    time, and writes them to the store (the run loop's `StoreWriter`)."""

    #: Whether `write_pairs` may take the messages' decoded (key, value) pairs instead of envelopes: true
    #: only when the store's entries are exactly the messages' keys and values.
    plain: bool

    def write(self, envelopes: list[IncomingMessageEnvelope]) -> None:
        """Writes the chunk; raises `ExtractionError` for a message it cannot store before writing any of
        the chunk (the run loop applies the bad-message policy to it and calls again with the others)."""
        ...

    def write_pairs(self, pairs: list[Entry]) -> None: ...


class AdjunctManagerFactory(Protocol):
    """Makes the manager of one adjunct store of one task (or of a container, for a broadcast store).

    `writer` is the store's only writable handle (the task's own handle is read-only); `extractor` is
    the store's configured key/value extractor; `records` counts the entries written
    (`samsa_adjunct_records_total`); `progress`, when the stream is bootstrapped, counts them for the
    progress display; `bounded` is the versioned engine of a bounded dataset, whose end marker the
    manager must seal (see `AdjunctWriter`)."""

    def __call__(
        self,
        store: str,
        task_name: str,
        writer: KeyValueStore[Any, Any],
        extractor: KeyValueExtractor,
        records: Count,
        progress: RestoreProgress | None,
        bounded: BoundedDatasetEngine | None,
    ) -> AdjunctManager: ...


class BuiltinManagerFactory:
    """The default: an `AdjunctWriter` per store and task."""

    def __call__(
        self,
        store: str,
        task_name: str,
        writer: KeyValueStore[Any, Any],
        extractor: KeyValueExtractor,
        records: Count,
        progress: RestoreProgress | None,
        bounded: BoundedDatasetEngine | None,
    ) -> AdjunctManager:
        return AdjunctWriter(store, task_name, writer, extractor, records, progress, bounded)


def manager_factory(path: str | None) -> AdjunctManagerFactory:
    """The factory `path` names: None or `builtin` the built-in one, else a `module:attr` path of a
    factory class taking no arguments, or of a factory object (anything callable like
    `AdjunctManagerFactory`). Errors name the key."""
    if path is None or path.strip().lower() == BUILTIN:
        return BuiltinManagerFactory()
    need = "an adjunct manager factory class (no constructor arguments) or a factory object"
    try:
        target = load_object(path.strip(), MANAGER_FACTORY_KEY)
    except ConfigError as exc:
        problem = str(exc).removeprefix(f"{MANAGER_FACTORY_KEY}=")
        raise AdjunctConfigError(
            MANAGER_FACTORY_KEY, f"{problem}; set it to {BUILTIN!r} or the path of {need}"
        ) from exc
    if isinstance(target, type):
        try:
            target = target()
        except Exception as exc:
            raise AdjunctConfigError(
                MANAGER_FACTORY_KEY, f"{path!r}: constructing it with no arguments failed: {exc!r}"
            ) from exc
    if not callable(target):
        raise AdjunctConfigError(
            MANAGER_FACTORY_KEY, f"{path!r} is a {type(target).__name__}; it must be {need}"
        )
    factory: AdjunctManagerFactory = target
    return factory


def checked(manager: Any, path: str | None) -> AdjunctManager:
    """`manager` as a factory returned it, refused (naming the key) when it lacks the manager's API."""
    missing = [name for name in ("write", "write_pairs") if not callable(getattr(manager, name, None))]
    if not hasattr(manager, "plain"):
        missing.append("plain")
    if missing:
        raise AdjunctConfigError(
            MANAGER_FACTORY_KEY,
            f"{path!r} made a {type(manager).__name__}, which lacks {', '.join(missing)}; a manager has "
            "`plain`, `write(envelopes)` and `write_pairs(pairs)`",
        )
    result: AdjunctManager = manager
    return result
