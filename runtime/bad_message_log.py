"""The warnings of input messages skipped or sent to the dead-letter stream: the first ones in full, then a
count every while, so that a burst of bad records cannot bury the log (each is counted in
samsa_deserialization_errors_total all the same)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("samsa.runtime.container")

FULL = 10  # bad messages logged one by one, per container
EVERY_S = 30.0  # then one line of how many more, at most this often


class BadMessageLog:
    """One per container: `told` for each bad message, `close` at its end for what is still untold."""

    def __init__(
        self, full: int = FULL, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._full = full
        self._every_s = every_s
        self._clock = clock
        self._seen = 0
        self._untold = 0
        self._last = ""
        self._since = 0.0

    def told(self, line: str) -> None:
        """Logs `line` (one bad message, naming where it was and why) or counts it, past the first ones."""
        self._seen += 1
        if self._seen <= self._full:
            log.warning("%s", line)
            if self._seen == self._full:
                log.warning(
                    "%d bad input messages so far: further ones are counted, with one line every %.0f s "
                    "(samsa_deserialization_errors_total counts each)",
                    self._full,
                    self._every_s,
                )
                self._since = self._clock()
            return
        self._untold += 1
        self._last = line
        if self._clock() - self._since >= self._every_s:
            self.close()

    def close(self) -> None:
        """Logs how many bad messages went untold since the last line, with the last of them."""
        if self._untold:
            log.warning("%d more bad input message(s); the last: %s", self._untold, self._last)
            self._untold = 0
        self._since = self._clock()
