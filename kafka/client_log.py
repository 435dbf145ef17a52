"""librdkafka's log lines and client errors of one client, repeats coalesced, served while no one polls it."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from samsa.kafka.config import LIBRDKAFKA_LOG

log = logging.getLogger(__name__)

# A line that repeats is logged once, then its repeats are counted and reported at most this often: a broker
# outage makes librdkafka report every reconnect attempt of every broker connection (~40 lines a second).
SUMMARY_EVERY_S = 30.0
# A line not repeated for this long ends its episode (a later one is logged again). Longer than librdkafka's
# reconnect.backoff.max.ms (10 s), so one outage stays one episode however long it lasts.
QUIET_S = 60.0
# How often the pump serves the clients no one polls: their log lines and errors (librdkafka queues them
# until the client is polled) appear within this delay instead of all at once at close.
PUMP_EVERY_S = 1.0
# Lines summed up in the one line of what came at close.
_LATE_SHOWN = 3

# Parts that differ between repeats of the same line: the thread, the broker connection it is about (the
# bootstrap and the learned connection to one broker both fail), the time spent in a connection state.
_THREAD = re.compile(r"\[thrd:[^\]]*\]: ")
_BROKER = re.compile(r"^(?:GroupCoordinator|(?:\w+://)?[\w.\-\[\]:]+:\d+(?:/\w+)?): ")
_TIMING = re.compile(r" \(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)")
_DOWN = re.compile(r"^\d+/\d+ brokers are down")
# Lines that say the cluster cannot be reached: a successful call to it ends their episode.
_CONNECTION = re.compile(
    r"Connect to|Connection refused|brokers are down|Disconnected|Receive failed|Send failed|"
    r"Failed to resolve|timed out|_TRANSPORT|_ALL_BROKERS_DOWN|_RESOLVE|_TIMED_OUT",
    re.IGNORECASE,
)

Clock = Callable[[], float]


def repeat_key(text: str) -> str:
    """`text` without the parts that differ between repeats of one librdkafka line."""
    text = _DOWN.sub("brokers are down", _TIMING.sub("", _THREAD.sub("", text)))
    for _ in range(2):  # "GroupCoordinator: host:port: ..."
        text = _BROKER.sub("", text)
    return text


def _hms(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


@dataclass
class _Episode:
    """A line that keeps coming: logged once, then counted."""

    logger: logging.Logger
    level: int
    text: str
    connection: bool
    first_at: float
    last_at: float
    reported_at: float
    pending: int = 0  # repeats not reported yet
    total: int = 1


_Line = tuple[logging.Logger, int, str]


class ClientLog:
    """Where one client's librdkafka log lines (its `logger`) and errors go; repeats are coalesced.

    The first occurrence of a line is logged as is; its repeats are counted and reported at most every
    SUMMARY_EVERY_S, once more when the line stops (QUIET_S) or the client reaches its cluster again
    (`reachable`), and at close. Lines delivered by close (queued while no one polled the client) are summed
    up in one line rather than logged one by one with the time of the close.
    """

    def __init__(self, client: str, clock: Clock = time.time) -> None:
        self.client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._episodes: dict[str, _Episode] = {}
        self._outage = False  # an episode of connection errors is open
        self._closing = False
        self._late: dict[str, list[int]] = {}  # text -> [count, highest level]
        self.served_at = clock()  # when the client's queue was last served (polled)

    # -- what the client reports ------------------------------------------------------------------------
    def log(self, level: int, msg: str, *args: object) -> None:
        """confluent-kafka's `logger` interface: called as log(level, "%s [%s] %s", facility, name, line)."""
        line = args[-1] if args else msg
        self.record(LIBRDKAFKA_LOG, level, msg % args if args else msg, str(line))

    def record(self, logger: logging.Logger, level: int, message: str, detail: str | None = None) -> None:
        """Log `message` unless it repeats a line of this client (`detail`, if given, is what repeats)."""
        if level < logging.INFO:  # debug output someone asked for: every line
            logger.log(level, "%s", message)
            return
        key = repeat_key(detail if detail is not None else message)
        now = self._clock()
        with self._lock:
            lines = self._take(logger, level, message, key, now)
        _emit(lines)

    def _take(self, logger: logging.Logger, level: int, message: str, key: str, now: float) -> list[_Line]:
        episode = self._episodes.get(key)
        if episode is None and self._closing:
            late = self._late.setdefault(key, [0, level])
            late[0] += 1
            late[1] = max(late[1], level)
            return []
        if episode is None:
            connection = _CONNECTION.search(message) is not None
            self._episodes[key] = _Episode(logger, level, key, connection, now, now, now)
            self._outage = self._outage or connection
            return [(logger, level, message)]
        episode.pending += 1
        episode.total += 1
        episode.last_at = now
        episode.level = max(episode.level, level)
        if self._closing or now - episode.reported_at < SUMMARY_EVERY_S:
            return []
        return [self._summary(episode, now)]

    def _summary(self, episode: _Episode, now: float) -> _Line:
        text = (
            f"{self.client}: {episode.pending} more report(s) in the last {now - episode.reported_at:.0f}s "
            f"({episode.total} since {_hms(episode.first_at)}): {episode.text}"
        )
        episode.pending = 0
        episode.reported_at = now
        return episode.logger, episode.level, text

    # -- what the owner and the pump tell ---------------------------------------------------------------
    def tick(self) -> None:
        """Report repeats that are due and end the episodes of lines that stopped."""
        now = self._clock()
        lines: list[_Line] = []
        with self._lock:
            for key, episode in list(self._episodes.items()):
                if now - episode.last_at >= QUIET_S:
                    del self._episodes[key]
                    if episode.pending:
                        lines.append(self._ended(episode, f"until {_hms(episode.last_at)}, none since"))
                elif episode.pending and now - episode.reported_at >= SUMMARY_EVERY_S:
                    lines.append(self._summary(episode, now))
            self._outage = any(e.connection for e in self._episodes.values())
        _emit(lines)

    @property
    def in_outage(self) -> bool:
        """Connection errors were reported and no call to the cluster succeeded since."""
        return self._outage

    def reachable(self) -> None:
        """A call to the cluster succeeded: ends the episodes of connection errors, with one line."""
        if not self._outage:  # the common case, on every successful call: one attribute read
            return
        now = self._clock()
        with self._lock:
            ended = [e for e in self._episodes.values() if e.connection]
            for episode in ended:
                del self._episodes[episode.text]
            self._outage = False
        if ended:
            since = min(e.first_at for e in ended)
            what = "; ".join(f"{e.text} ({e.total} report(s))" for e in ended)
            LIBRDKAFKA_LOG.info(
                "%s: reaches the cluster again after %.0fs of connection errors: %s",
                self.client,
                now - since,
                what,
            )

    def served(self) -> None:
        """The owner polled the client: what it queued so far is delivered."""
        self.served_at = self._clock()

    def closing(self) -> None:
        """The client is closing: what it delivers now was queued earlier and is summed up by `closed`."""
        with self._lock:
            self._closing = True

    def closed(self) -> None:
        """Reports the repeats not reported yet and, in one line, what came at close."""
        now = self._clock()
        with self._lock:
            lines = [
                self._ended(e, f"until the client closed at {_hms(now)}")
                for e in self._episodes.values()
                if e.pending
            ]
            self._episodes.clear()
            self._outage = False
            late, self._late = self._late, {}
        if late:
            lines.append(self._late_line(late, now))
        _emit(lines)

    def _ended(self, episode: _Episode, until: str) -> _Line:
        text = (
            f"{self.client}: {episode.pending} more report(s) {until} ({episode.total} since "
            f"{_hms(episode.first_at)}): {episode.text}"
        )
        return episode.logger, episode.level, text

    def _late_line(self, late: dict[str, list[int]], now: float) -> _Line:
        count = sum(n for n, _ in late.values())
        top = sorted(late.items(), key=lambda item: -item[1][0])[:_LATE_SHOWN]
        shown = "; ".join(f"{text} (x{n})" for text, (n, _) in top)
        more = f"; and {len(late) - len(top)} other line(s)" if len(late) > len(top) else ""
        text = (
            f"{self.client}: {count} librdkafka log line(s) queued between {_hms(self.served_at)} (when the "
            f"client was last polled) and its close at {_hms(now)}, not logged one by one: {shown}{more}"
        )
        return LIBRDKAFKA_LOG, max(level for _, level in late.values()), text


def _emit(lines: list[_Line]) -> None:
    # Outside the lock: a handler may log through a Kafka client again.
    for logger, level, text in lines:
        logger.log(level, "%s", text)


class Served(Protocol):
    """A client whose librdkafka queue the pump serves while its owner does not."""

    def serve_logs(self) -> None:
        """Deliver what the client queued (log lines, errors) if no one else does; never blocks long."""


class _Pump:
    """One daemon thread serving every registered client each PUMP_EVERY_S; it ends with the last client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: weakref.WeakSet[Served] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def add(self, client: Served) -> None:
        with self._lock:
            self._clients.add(client)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="samsa-kafka-logs", daemon=True)
                self._thread.start()

    def remove(self, client: Served) -> None:
        with self._lock:
            self._clients.discard(client)

    def _run(self) -> None:
        while True:
            time.sleep(PUMP_EVERY_S)
            with self._lock:
                clients = list(self._clients)
                if not clients:
                    self._thread = None
                    return
            _serve(clients)
            del clients  # holds no client alive until the next round

    def forked(self) -> None:
        # A forked child has neither the thread nor usable librdkafka clients of its parent.
        self._lock = threading.Lock()
        self._clients = weakref.WeakSet()
        self._thread = None


def _serve(clients: list[Served]) -> None:
    for client in clients:
        try:
            client.serve_logs()
        except Exception as e:  # a client closing meanwhile: the next round no longer has it
            log.debug("serving the log queue of %r: %s", client, e)


PUMP = _Pump()
"""Serves the log queues of clients no one polls (watermark-only consumers, admin clients)."""

os.register_at_fork(after_in_child=PUMP.forked)
