"""Errors raised by key-value stores: lookup, lifecycle, configuration and I/O."""

from collections.abc import Iterable

from samsa.exceptions import InvalidConfigError, SamsaError


class StoreError(SamsaError):
    """Base class of store errors; also raised as is for engine I/O failures (open, flush, checkpoint)."""


class StoreNotFoundError(StoreError, InvalidConfigError):
    """A task asked for a store the job config does not define."""

    def __init__(self, name: str, configured: Iterable[str]) -> None:
        self.name = name
        self.configured = sorted(configured)
        listed = ", ".join(self.configured) or "none"
        super().__init__(
            f"no store named {name!r} (configured stores: {listed}); "
            f"define it with stores.{name}.factory in the job config or fix the name"
        )


class StoreClosedError(StoreError):
    """A store, or an iterator over it, was used after the store was closed."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"store {name!r} is closed; it was used after close() (an iterator or a reference "
            "kept past task shutdown?) - take a new store from the task context instead"
        )


class SnapshotClosedError(StoreClosedError):
    """A store's snapshot was used after its own `close()`."""

    def __init__(self, name: str) -> None:
        self.name = name
        StoreError.__init__(
            self,
            f"a snapshot of store {name!r} was used after its close(); take a new one with "
            "store.snapshot(from, to), or close it only once done with it",
        )


class StoreConfigError(StoreError, InvalidConfigError):
    """A `stores.*` configuration value is missing or malformed."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        super().__init__(f"{key}: {problem}")


class ReadOnlyStoreError(StoreError):
    """A task wrote to a store the system keeps (an adjunct store fed by a stream)."""

    def __init__(self, name: str, fed_by: str) -> None:
        self.name = name
        super().__init__(
            f"store {name!r} is read-only: it is an adjunct store kept by the system from {fed_by}; "
            "write to the stream instead, or use another store for the task's own state"
        )


class RestoreSourceError(StoreError, InvalidConfigError):
    """A store's checkpoint has markers only from backends that are not among its restore factories (a
    config change mends it, a restart does not)."""

    def __init__(self, store: str, task: str, holders: Iterable[str], restore: Iterable[str]) -> None:
        self.store = store
        self.task = task
        self.holders = list(holders)
        self.restore = list(restore)
        of_task = f" of task {task!r}" if task else ""
        first = self.holders[0]
        suggested = ",".join([first, *(b for b in self.restore if b != first)])
        super().__init__(
            f"store {store!r}{of_task}: its checkpoint has state from {', '.join(self.holders)} only, but "
            f"the store restores from {', '.join(self.restore) or 'nothing'}, which would silently lose that "
            f"state; set stores.{store}.restore.factories={suggested} (with {first} in "
            f"stores.{store}.backup.factories too): the store then restores from {first}"
            + (" and seeds the changelog with its contents" if first != "changelog" else "")
        )
