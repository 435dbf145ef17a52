"""`inmemory:` bootstrap URLs: one broker per name (in-process) or per directory (file-backed) per process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import cast

from samsa.kafka.exceptions import KafkaConfigError
from samsa.kafka.inmemory.log import Log
from samsa.kafka.inmemory.memory import MemoryLog
from samsa.kafka.inmemory.sqlite import SqliteLog

SCHEME = "inmemory:"

_brokers: dict[str, Log] = {}
_auto_create: dict[str, int] = {}
_clocks: dict[str, Callable[[], float]] = {}
# Reentrant: `forget` also runs from a runner's weakref finalizer, which the garbage collector may call on a
# thread that holds the lock already (an allocation in `broker`'s `_open` triggering a collection).
_lock = threading.RLock()


def is_inmemory(bootstrap_servers: object) -> bool:
    """Whether a client config's `bootstrap.servers` names the in-memory system."""
    return isinstance(bootstrap_servers, str) and bootstrap_servers.startswith(SCHEME)


def is_in_process(bootstrap_servers: object) -> bool:
    """Whether `bootstrap.servers` names a broker of this process alone (`inmemory://NAME`), which no other
    process sees, rather than a file-backed one (`inmemory:///ABS/DIR`) shared through its directory."""
    return is_inmemory(bootstrap_servers) and not str(bootstrap_servers)[len(SCHEME) :].startswith("///")


def broker(url: str) -> Log:
    """The broker of `inmemory://NAME` (this process) or `inmemory:///ABS/DIR` (shared through DIR)."""
    with _lock:
        found = _brokers.get(url)
        if found is None:
            found = _brokers[url] = _open(url)
        return found


def forget(url: str) -> None:
    """Drop an in-process broker and its data (a file-backed one keeps its files); later use starts empty."""
    with _lock:
        _brokers.pop(url, None)
        _auto_create.pop(url, None)
        _clocks.pop(url, None)


def auto_create_topics(url: str, partitions: int) -> None:
    """A topic that a producer of `url` sends to before it exists is made with `partitions` partitions,
    as a Kafka broker with `auto.create.topics.enable` does (0: such a send fails, the default here)."""
    with _lock:
        _auto_create[url] = partitions


def use_clock(url: str, clock: Callable[[], float]) -> None:
    """A record a producer of `url` sends without a timestamp gets `clock()` (seconds) as its create time,
    not the wall clock: a test's manual clock, so its records' timestamps repeat from run to run."""
    with _lock:
        _clocks[url] = clock


def now_ms(url: str) -> int:
    """The create time (ms) of a record sent now to `url` without a timestamp."""
    clock = _clocks.get(url, time.time)
    return int(clock() * 1000)


def clock_of(url: str) -> Callable[[], Callable[[], float]]:
    """The lookup of `url`'s clock that `now_ms` makes, for a caller that needs it per record: it follows a
    later use_clock."""
    # A partial of dict.get runs in C: a producer's per-record create time without a Python call for it.
    # (Never None: time.time is the default.)
    return cast(Callable[[], Callable[[], float]], partial(_clocks.get, url, time.time))


def auto_create_partitions(url: str) -> int:
    """The partitions of a topic a send makes on `url` (0: none is made)."""
    return _auto_create.get(url, 0)


def _open(url: str) -> Log:
    rest = url[len(SCHEME) :]
    if rest.startswith("///"):
        return SqliteLog(url, Path(rest[2:]))
    if rest.startswith("//") and len(rest) > 2 and "/" not in rest[2:]:
        return MemoryLog(url)
    raise KafkaConfigError(
        "bootstrap.servers",
        f"{url!r} is not an in-memory system URL: use inmemory://NAME (this process) or "
        "inmemory:///ABSOLUTE/DIR (shared by the processes of a test through that directory)",
    )
