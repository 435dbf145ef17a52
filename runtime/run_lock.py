"""The lock a running container (or local supervisor) holds on this machine: a second start is refused."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from samsa.runtime.exceptions import ContainerAlreadyRunningError

_RETRY_S = 0.1


class RunLock:
    """An exclusive `flock` on a file such as `<pid dir>/container-<id>.lock`, held while the holder runs.

    The OS drops it when the holder exits or is killed, so a stale file never blocks a restart. The file
    itself is never deleted: unlinking a locked file would let a second start lock a new file of the same
    name while the first still runs. It holds the holder's pid, for the error."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self._what = what
        self._file: IO[str] | None = None

    def acquire(self, wait_s: float = 0.0, stopped: Callable[[], bool] | None = None) -> bool:
        """Takes the lock (True), waiting up to `wait_s` for a holder to go; False, without the lock, when
        `stopped()` while waiting. Raises ContainerAlreadyRunningError naming the holder when it is still
        held after `wait_s`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A new open file description per attempt: flock conflicts between two of them even in one process.
        file = self.path.open("a+")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stopped is not None and stopped():
                    file.close()
                    return False
                if time.monotonic() >= deadline:
                    holder = self._holder()
                    file.close()
                    raise ContainerAlreadyRunningError(
                        f"{self._what} is already running here (pid {holder}, lock file {self.path}); "
                        "stop it first"
                    ) from None
                time.sleep(_RETRY_S)
        file.seek(0)
        file.truncate()
        file.write(f"{os.getpid()}\n")
        file.flush()
        self._file = file
        return True

    def release(self) -> None:
        """Lets the lock go (idempotent); the file stays."""
        file, self._file = self._file, None
        if file is not None:
            file.close()  # closing the last descriptor releases the flock

    def _holder(self) -> str:
        try:
            return self.path.read_text().strip() or "unknown"
        except OSError:
            return "unknown"
