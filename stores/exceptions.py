"""Errors raised by key-value stores: lookup, lifecycle, configuration and I/O."""

import errno
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from samsa.exceptions import InvalidConfigError, SamsaError
from samsa.serde.exceptions import DeserializationError, SerializationError

# A write refused for want of room: a full disk, a quota, or a file-size limit (RLIMIT_FSIZE). RocksDB
# reports them as text ("IO error: No space left on device: ..."), so their strerror texts are matched too.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_ROOM_TEXTS = tuple(os.strerror(n) for n in _NO_ROOM)

_E = TypeVar("_E", bound=BaseException)


# What to do about a full disk under the store dirs (`StoreDiskFullError`'s `fix` names another dir's key).
STORE_DIR_FIX = (
    "Free space there, or move job.logged.store.base.dir (or job.non-logged.store.base.dir, for stores "
    "without a changelog or backup) to a disk with room, then restart: the container resumes from its last "
    "checkpoint, and nothing checkpointed is lost"
)


class StoreError(SamsaError):
    """Base class of store errors; also raised as is for engine I/O failures (open, flush, checkpoint)."""


class StoreDiskFullError(StoreError):
    """A store's write failed because its disk is full (ENOSPC), over quota (EDQUOT) or past a file-size
    limit (EFBIG): not the task's fault, and a restart mends it once there is room."""

    def __init__(
        self, store: str | None, path: Path, action: str, error: BaseException, fix: str = STORE_DIR_FIX
    ) -> None:
        self.store = store
        self.path = path
        self.free_bytes = free_bytes(path)
        free = "an unknown number of" if self.free_bytes is None else str(self.free_bytes)
        of_store = f"store {store!r} at " if store else ""
        super().__init__(
            f"disk full: {of_store}{path}: {action} failed for want of room ({error}); {free} bytes free "
            f"on that disk. {fix}"
        )


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` (an OSError, or RocksDB's status text via rocksdict) says there is no room to write."""
    if isinstance(error, OSError) and error.errno in _NO_ROOM:
        return True
    if isinstance(error, StoreDiskFullError):
        return True
    text = str(error)
    return any(reason in text for reason in _NO_ROOM_TEXTS)


def no_room(
    store: str | None, path: Path, action: str, error: BaseException, fix: str = STORE_DIR_FIX
) -> StoreDiskFullError | None:
    """`error` as a `StoreDiskFullError` when it is for want of room (None when not): for `raise no_room(..)
    or StoreError(..) from error` where the store layer wraps an engine's or a file write's failure."""
    if isinstance(error, StoreDiskFullError):
        return error
    return StoreDiskFullError(store, path, action, error, fix) if is_disk_full(error) else None


def disk_full_cause(error: BaseException) -> StoreDiskFullError | None:
    """The `StoreDiskFullError` among `error` and its causes and contexts (a task's process() wraps it, a
    commit's failure is told by the next commit), None when there is none."""
    return _cause_of(error, StoreDiskFullError)


def _cause_of(error: BaseException, kind: type[_E]) -> _E | None:
    """The first `kind` among `error` and its causes and contexts, breadth first; None when there is none."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return current
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return None


# RocksDB's status text of damaged files ("Corruption: block checksum mismatch: ... in <dir>/000013.sst
# offset 66 size 897", "Corruption: Sst file size mismatch: <dir>/000009.sst. Size recorded in manifest
# ..."); rocksdict raises it as a bare Exception.
_CORRUPTION = "Corruption:"
_DAMAGED_FILE = re.compile(r"(\S+?\.(?:sst|log|blob)|\S*MANIFEST-\d+|\S*OPTIONS-\d+|\S*CURRENT)\b")


class StoreCorruptError(StoreError):
    """RocksDB found a store's local files damaged (its "Corruption:" status) at open, on a read or a
    write. A restart meets the same damage: the local copy must be replaced from a backup, never reused."""

    def __init__(self, store: str | None, path: Path, action: str, error: BaseException) -> None:
        self.store = store
        self.path = path
        #: What met the damage: open, read, iterate, write, flush, ...
        self.action = action
        #: RocksDB's own text, naming the damaged file.
        self.detail = str(error)
        match = _DAMAGED_FILE.search(self.detail)
        #: The file RocksDB names (as it names it), None when it names none.
        self.file = match.group(1) if match else None
        of_store = f"store {store!r} at " if store else ""
        named = f" (file {self.file})" if self.file else ""
        super().__init__(
            f"{of_store}{path}: its local files are damaged{named}: {action} failed with RocksDB's "
            f"{self.detail}"
        )


def is_corruption(error: BaseException) -> bool:
    """Whether `error` is RocksDB's status of damaged files (text starting "Corruption:", via rocksdict)."""
    return isinstance(error, StoreCorruptError) or str(error).lstrip().startswith(_CORRUPTION)


def corrupt(store: str | None, path: Path, action: str, error: BaseException) -> StoreCorruptError | None:
    """`error` as a `StoreCorruptError` when RocksDB reports damaged files (None when not): for `raise
    corrupt(..) or ...` where the store layer wraps an engine's failure."""
    if isinstance(error, StoreCorruptError):
        return error
    return StoreCorruptError(store, path, action, error) if is_corruption(error) else None


def corruption_cause(error: BaseException) -> StoreCorruptError | None:
    """The `StoreCorruptError` among `error` and its causes and contexts (a task's process() wraps the
    read that met the damage), None when there is none."""
    return _cause_of(error, StoreCorruptError)


def free_bytes(path: Path) -> int | None:
    """Bytes free to unprivileged writers on the filesystem of `path` (its nearest existing parent)."""
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


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


class NoneKeyError(StoreError, SerializationError):
    """A store call with the key None (a key-less input message's key?): a store needs a key for every entry,
    whatever its serdes. Also a `SerializationError` (of the key serde, `serde`), as a key that serde cannot
    write is, so a task that catches that around a store call still does."""

    def __init__(self, store: str, serde: str, call: str | None = None) -> None:
        self.store = store
        self.serde = serde
        self.reason = "the key is None"
        where = f"in store {store!r}: {call}" if call else f"in store {store!r}"
        # Exception's own __init__: SerializationError's takes (serde, reason), not the message.
        Exception.__init__(
            self,
            f"{where}: the key is None (a key-less input message's key?); a store needs a key: give such "
            f"messages a key, or keep them out of the store (skip them, or put them under a key of your own)",
        )


class StoreSerdeMismatchError(StoreError, InvalidConfigError, DeserializationError):
    """A store holds a key or value its configured serde cannot read (the serde changed while the store held
    data?): the stored bytes stay as they are, so a restart meets them again; a config-like error. Also a
    `DeserializationError`, so a task that catches the serde's error around a store read still does."""

    def __init__(self, store: str, part: str, serde: str, call: str, error: BaseException) -> None:
        self.store = store
        #: `key` or `msg`: which of the store's serdes cannot read what it holds.
        self.part = part
        self.serde = serde
        #: As DeserializationError's: what the serde said.
        self.reason = str(error)
        setting = f"stores.{store}.{part}.serde"
        what = "keys" if part == "key" else "values"
        # Exception's own __init__: DeserializationError's takes (serde, reason), not the message.
        Exception.__init__(
            self,
            f"in store {store!r}: {call}: the store holds {what} that {setting} (the {serde} serde) cannot "
            f"read ({error}). Was {setting} changed while the store held data? The stored bytes stay as "
            f"they are, so a restart meets them again: the job stops. Set {setting} back to the serde that "
            f"wrote them, or migrate the data: configure a store of a new name with the new serde and copy "
            f"the entries over once (read with the old serde, write with the new), then read the new store",
        )


class RestoreSourceError(StoreError, InvalidConfigError):
    """A store's checkpoint has markers only from backends that are not among its restore factories (a
    config change mends it, a restart does not)."""

    def __init__(
        self,
        store: str,
        task: str,
        holders: Iterable[str],
        restore: Iterable[str],
        changelog_unset: bool = False,
        checkpointed_changelog: str | None = None,
    ) -> None:
        self.store = store
        self.task = task
        self.holders = list(holders)
        self.restore = list(restore)
        #: The changelog (system.stream) the checkpoint's changelog marker names, None when it has none.
        self.checkpointed_changelog = checkpointed_changelog
        of_task = f" of task {task!r}" if task else ""
        first = self.holders[0]
        lost = (
            f"store {store!r}{of_task}: its checkpoint has state from {', '.join(self.holders)} only, but "
            f"the store restores from {', '.join(self.restore) or 'nothing'}, which would silently lose that "
            f"state; the start is refused before anything of the store is deleted"
        )
        topic = checkpointed_changelog or "<system>.<stream>"
        # `forget-store` drops the store's markers whatever the config says of it now.
        forget = (
            f"`samsa checkpoint forget-store <job config> --store {store}` (the job stopped): the next start "
            f"then starts the store without that state"
        )
        suggested = ",".join([first, *(b for b in self.restore if b != first)])
        if first == "changelog" and changelog_unset:
            # stores.<s>.changelog was removed: backup/restore factories cannot name a changelog it lacks.
            was = f" (it was {checkpointed_changelog})" if checkpointed_changelog else ""
            factories = (
                f", with stores.{store}.restore.factories={suggested} and changelog in "
                f"stores.{store}.backup.factories,"
                if self.restore
                else ","
            )
            super().__init__(
                f"{lost}. stores.{store}.changelog is not set{was}: set stores.{store}.changelog={topic} "
                f"back{factories} and the store restores from it; or, to give that state up on purpose, run "
                f"{forget}"
            )
            return
        super().__init__(
            f"{lost}. Set stores.{store}.restore.factories={suggested} (with {first} in "
            f"stores.{store}.backup.factories too): the store then restores from {first}"
            + (" and seeds the changelog with its contents" if first != "changelog" else "")
            + (f"; or, to give that state up on purpose, run {forget}" if first == "changelog" else "")
        )


class DamagedStoreError(StoreError):
    """A store's local files are damaged and no backup can replace them (no changelog, no blob-store
    snapshot in the task's checkpoint; an adjunct store): a restart meets the same damage, so no supervisor
    restarts it (`deploy.restarts.DAMAGED_STORE_EXIT`). The damaged copy is left in place."""

    def __init__(self, damage: StoreCorruptError, task: str, advice: str) -> None:
        self.store = damage.store
        self.path = damage.path
        self.task = task
        self.file = damage.file
        named = f"file {damage.file}" if damage.file else "a file RocksDB does not name"
        super().__init__(
            f"store {damage.store!r} of task {task!r}: its local copy at {damage.path} is damaged ({named}: "
            f"RocksDB's {damage.detail}), and there is no backup to restore it from. A restart meets the "
            f"same damage, so the job stops; the copy is left in place. {advice}"
        )


class LocalStoreDiscardedError(StoreError):
    """A store's local files are damaged; the copy is set aside (a marker file the next start honours) and
    its backup restores it at the restart this failure asks for."""

    def __init__(self, damage: StoreCorruptError, task: str, source: str, marker: Path) -> None:
        self.store = damage.store
        self.path = damage.path
        self.task = task
        self.marker = marker
        super().__init__(
            f"store {damage.store!r} of task {task!r}: its local copy at {damage.path} is damaged; it is set "
            f"aside ({marker}) and the restart restores the store from {source}"
        )
