"""The restart policy of supervised containers: a budget per 10 minutes and exponential backoff."""

from __future__ import annotations

from collections import deque

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
