"""The restart policy of supervised containers: a budget per 10 minutes and exponential backoff."""

from __future__ import annotations

from collections import deque

from samsa.checkpoint.exceptions import CheckpointFencedError
from samsa.exceptions import InvalidConfigError
from samsa.runtime.exceptions import ContainerAlreadyRunningError, MessageDeserializationError
from samsa.stores.exceptions import DamagedStoreError

# Restarts are counted over this window against the deployment's max.restarts.
RESTART_WINDOW_S = 600.0
# Exit status of a container stopped by a configuration error (sysexits' EX_CONFIG): a restart meets the
# same error, so a supervisor stops the job instead of restarting it with backoff.
CONFIG_ERROR_EXIT = 78
# Exit status of a container fenced by a newer start of itself (another copy of it runs, on this machine's
# behalf or elsewhere): a restart would fence that copy in turn, and the two would take the container from
# each other in a loop, so a supervisor ends the job instead.
FENCED_EXIT = 79
# Exit status of a container refused because another process on this machine holds its lock (an earlier
# copy still running): every restart is refused the same way while that one runs, so a supervisor ends the
# job instead of restarting it in a loop.
ALREADY_RUNNING_EXIT = 80
# Exit status of a container stopped on an input record it cannot take under
# task.deserialization.error.policy=fail (sysexits' EX_DATAERR): one that does not decode, an adjunct
# stream's record yielding nothing to store, a record without the exactly-once header on an intermediate
# stream. Its offset is not checkpointed, so every restart meets the same record: a supervisor ends the job.
BAD_RECORD_EXIT = 65
# Exit status of a container stopped on a store whose local files are damaged with no backup to restore it
# from (sysexits' EX_IOERR): every restart meets the same damage, so a supervisor ends the job.
DAMAGED_STORE_EXIT = 74
# Exit status of a container that stopped because its parent went away (sysexits' EX_TEMPFAIL): its
# supervisor killed, or the supervisor's fork server gone while the supervisor runs on (it restarts it).
ORPHANED_EXIT = 75
#: Exit statuses of a container that a restart cannot mend, with what a supervisor says before it stops.
NO_RESTART = {
    CONFIG_ERROR_EXIT: "stopped on a configuration error (its log above says what to fix); a restart would "
    "meet it again, so the job stops: fix the config and start the job again",
    FENCED_EXIT: "was fenced by a newer start of it (its log above says which: epoch, host, pid), which runs "
    "on; restarting it here would fence that one in turn, so this job stops. Two copies of the job (or of "
    "this container) ran at once: keep one",
    ALREADY_RUNNING_EXIT: "was refused: another process on this machine runs it (its log above names the pid "
    "holding the lock); a restart would be refused the same way, so this job stops. Stop that process (a "
    "copy left by an earlier run), then start the job again",
    BAD_RECORD_EXIT: "stopped on an input record it cannot take (its log above names the topic, partition "
    "and offset, and why); the record's offset is not checkpointed, so a restart would meet it again and "
    "this job stops. Set task.deserialization.error.policy to skip or dlq to get past it, or fix what reads "
    "it (the serde, the adjunct store's extractor) or the producer, then start the job again",
    DAMAGED_STORE_EXIT: "stopped on a store whose local files are damaged, with no backup to restore it from "
    "(its log above names the store, its dir and the damaged file, and what to do); a restart would meet the "
    "same damage, so the job stops. Replace or delete that store's local copy, then start the job again",
}
# Backoff before restarting a crashed container: doubles per recent crash, capped.
_BACKOFF_START_S = 0.5
_BACKOFF_MAX_S = 30.0


class RestartBudget:
    """One container's crashes: whether another restart is allowed now, and after how long."""

    def __init__(self, max_restarts: int, window_s: float = RESTART_WINDOW_S) -> None:
        self.max_restarts = max_restarts
        self.window_s = window_s
        self._restarts: deque[float] = deque()

    def recent(self, now: float) -> int:
        """Restarts within the window ending `now`."""
        while self._restarts and self._restarts[0] < now - self.window_s:
            self._restarts.popleft()
        return len(self._restarts)

    def next_delay(self, now: float) -> float | None:
        """Records a crash at `now`: the backoff before restarting, or None when the budget is spent."""
        if self.recent(now) >= self.max_restarts:
            return None
        self._restarts.append(now)
        return float(min(_BACKOFF_MAX_S, _BACKOFF_START_S * 2.0 ** (len(self._restarts) - 1)))


#: Failures a restart cannot mend, with the exit status of each (the first that fits a failure is its status).
_UNMENDABLE: dict[type[BaseException], int] = {
    DamagedStoreError: DAMAGED_STORE_EXIT,
    InvalidConfigError: CONFIG_ERROR_EXIT,
    CheckpointFencedError: FENCED_EXIT,
    ContainerAlreadyRunningError: ALREADY_RUNNING_EXIT,
    MessageDeserializationError: BAD_RECORD_EXIT,
}


def unmendable_exit(error: BaseException) -> int | None:
    """The exit status of a container failure that a restart cannot mend, from the error or its causes: a
    configuration error (the init() of a task asking for an undefined store counts as one, and a record over
    a size limit: `MessageTooLargeError`), a fence by a newer start of the container, its lock held by
    another process here, an input record it cannot take under the `fail` bad-message policy, a store's
    damaged files with no backup to restore them from; None for any other failure (a broker or
    schema-registry outage, a task's process() raising: a restart may mend those)."""
    cause = cause_of(error, tuple(_UNMENDABLE))
    if cause is None:
        return None
    return next(status for kind, status in _UNMENDABLE.items() if isinstance(cause, kind))


def cause_of(
    error: BaseException, kinds: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first of `error` and its causes (its `__cause__`, theirs, ...) that is one of `kinds`, or None."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kinds):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__
    return None
