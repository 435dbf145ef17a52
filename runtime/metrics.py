"""In-process metrics: counters, gauges and timers, registered once at setup and updated on the hot path.

A metric object is looked up once (``registry.counter(...)``) and then updated directly:
``counter.inc()`` is ``self.value += 1`` and ``timer.update_ns(ns)`` is two integer additions and a
compare. The hot path takes no lock; the scrape thread may read values a few updates stale, which is
fine for monitoring. Registering the same (name, labels) twice returns the same object.

Standard names (constants below); every task-level metric carries the label ``task``:

=====================================================  =========  ===================================
name                                                   kind       labels
=====================================================  =========  ===================================
``samsa_messages_processed_total``                     counter    task
``samsa_process_seconds``                              timer      task
``samsa_window_seconds``                               timer      task
``samsa_commit_seconds``                               timer      task
``samsa_commits_total``                                counter    task
``samsa_commit_phase_seconds``                         timer      task, phase (flush_stores, ... cleanup)
``samsa_last_commit_timestamp_seconds``                gauge      task (epoch seconds; age: time() - x)
``samsa_commits_skipped_total``                        counter    task (previous upload still running)
``samsa_commits_idle_total``                           counter    task (timer's, nothing new to commit)
``samsa_consumer_lag``                                 gauge_fn   task, topic, partition
``samsa_deserialization_errors_total``                 counter    task, topic, policy
``samsa_container_tasks``                              gauge      container
``samsa_container_messages_polled_total``              counter    container
``samsa_container_poll_seconds``                       timer      container
``samsa_container_restore_seconds``                    timer      container
``samsa_container_restoring``                          gauge_fn   container (1 while restoring, else 0)
``samsa_container_uptime_seconds``                     gauge_fn   container
``samsa_store_restored_records``                       gauge_fn   task, store (so far, live while restoring)
``samsa_store_restored_bytes``                         gauge_fn   task, store (so far, live while restoring)
``samsa_store_restore_remaining_records``              gauge_fn   task, store (NaN while unknown)
``samsa_store_size_bytes``                             gauge      task, store (local files, at each commit)
=====================================================  =========  ===================================

A timer is exposed to Prometheus as a summary (``<name>_count``, ``<name>_sum`` in seconds) plus a
gauge ``<name>_max``: the largest value since the previous scrape.

A task's own metrics (``context.metrics``, a ``TaskMetrics``) are these same objects in the same registry,
named ``samsa_user_[<group>_]<name>`` (``_total`` added to a counter's, ``_seconds`` to a timer's), with the
label ``task``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

from samsa.exceptions import InvalidConfigError
from samsa.runtime.exceptions import RuntimeSamsaError

MESSAGES_PROCESSED = "samsa_messages_processed_total"
PROCESS_SECONDS = "samsa_process_seconds"
PROCESS_STUCK_SECONDS = "samsa_process_stuck_seconds"
WINDOW_SECONDS = "samsa_window_seconds"
COMMIT_SECONDS = "samsa_commit_seconds"
COMMITS = "samsa_commits_total"
COMMIT_PHASE_SECONDS = "samsa_commit_phase_seconds"
LAST_COMMIT_TIMESTAMP = "samsa_last_commit_timestamp_seconds"
COMMITS_SKIPPED = "samsa_commits_skipped_total"
COMMITS_IDLE = "samsa_commits_idle_total"
CONSUMER_LAG = "samsa_consumer_lag"
DESERIALIZATION_ERRORS = "samsa_deserialization_errors_total"
CONTAINER_TASKS = "samsa_container_tasks"
CONTAINER_MESSAGES_POLLED = "samsa_container_messages_polled_total"
CONTAINER_POLL_SECONDS = "samsa_container_poll_seconds"
CONTAINER_RESTORE_SECONDS = "samsa_container_restore_seconds"
CONTAINER_RESTORING = "samsa_container_restoring"
CONTAINER_UPTIME_SECONDS = "samsa_container_uptime_seconds"
STORE_RESTORED_RECORDS = "samsa_store_restored_records"
STORE_RESTORED_BYTES = "samsa_store_restored_bytes"
STORE_RESTORE_REMAINING_RECORDS = "samsa_store_restore_remaining_records"
STORE_SIZE_BYTES = "samsa_store_size_bytes"
ADJUNCT_RECORDS = "samsa_adjunct_records_total"
ADJUNCT_LAG = "samsa_adjunct_store_lag"
BLOB_FILES_UPLOADED = "samsa_blobstore_uploaded_files_total"
BLOB_BYTES_UPLOADED = "samsa_blobstore_uploaded_bytes_total"
BLOB_FILES_RETAINED = "samsa_blobstore_retained_files"
BLOB_BYTES_RETAINED = "samsa_blobstore_retained_bytes"
BLOB_UPLOAD_SECONDS = "samsa_blobstore_upload_seconds"
BLOB_FILES_DOWNLOADED = "samsa_blobstore_downloaded_files"
BLOB_BYTES_DOWNLOADED = "samsa_blobstore_downloaded_bytes"
BLOB_RESTORE_SECONDS = "samsa_blobstore_restore_seconds"
BLOB_CLIENT_WAIT_SECONDS = "samsa_blobstore_client_wait_seconds"
EOS_BUFFERED_MESSAGES = "samsa_eos_buffered_messages"
EOS_BUFFERED_BYTES = "samsa_eos_buffered_bytes"
EOS_DUPLICATES_DROPPED = "samsa_eos_duplicates_dropped_total"
EOS_STALE_DROPPED = "samsa_eos_stale_dropped_total"
EOS_ALIGNMENT_WAIT_SECONDS = "samsa_eos_alignment_wait_seconds"
EOS_VERSIONS_COMMITTED = "samsa_eos_versions_committed_total"
EOS_REWINDS = "samsa_eos_rewinds_total"
EOS_REREAD = "samsa_eos_reread_messages_total"
EOS_VERSIONS_MERGED = "samsa_eos_versions_merged_total"
EOS_BARRIER_MISSING = "samsa_eos_barrier_missing_channels"

Kind = Literal["counter", "gauge", "timer"]
LabelKey = tuple[tuple[str, str], ...]

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
# The suffixes a timer adds to its name when exposed; another metric may not take those names.
_TIMER_SUFFIXES = ("_count", "_sum", "_max")

log = logging.getLogger(__name__)


class MetricsError(RuntimeSamsaError):
    """A metric was registered with an invalid name or labels, or clashes with an existing one."""


class MetricsPortError(MetricsError, InvalidConfigError):
    """The metrics port cannot be bound (taken by another process, or privileged): a restart meets the
    same port, so it is a configuration error that supervisors do not restart."""


class Counter:
    """A monotonically increasing count; ``inc`` with a negative ``n`` is a caller bug, not checked."""

    __slots__ = ("labels", "value")

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.value: float = 0

    def inc(self, n: float = 1) -> None:
        self.value += n

    @property
    def count(self) -> float:
        """The count so far (Samza's ``getCount()``); ``value`` is the same number."""
        return self.value


class Gauge:
    """A value set by its owner."""

    __slots__ = ("labels", "value")

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.value: float = 0

    def set(self, value: float) -> None:
        self.value = value

    def inc(self, n: float = 1) -> None:
        self.value += n

    def dec(self, n: float = 1) -> None:
        self.value -= n


class GaugeFn:
    """A gauge whose value is computed by ``fn`` at scrape time (e.g. consumer lag of a partition)."""

    __slots__ = ("fn", "labels")

    def __init__(self, labels: dict[str, str], fn: Callable[[], float]) -> None:
        self.labels = labels
        self.fn = fn

    @property
    def value(self) -> float:
        return self.fn()


class Timer:
    """Count, total and maximum of durations in nanoseconds; the maximum resets at each scrape."""

    __slots__ = ("count", "labels", "max_ns", "sum_ns")

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.count = 0
        self.sum_ns = 0
        self.max_ns = 0

    def update_ns(self, ns: int) -> None:
        # Called per message: keep it to two additions and a compare.
        self.count += 1
        self.sum_ns += ns
        if ns > self.max_ns:
            self.max_ns = ns

    def update(self, seconds: float) -> None:
        """Add one duration given in seconds (``update_ns`` takes nanoseconds)."""
        self.update_ns(int(seconds * 1e9))

    @contextmanager
    def time(self) -> Iterator[None]:
        """Time the ``with`` block; for code off the per-message path (commit, restore)."""
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.update_ns(time.perf_counter_ns() - start)

    def read(self, *, reset_max: bool) -> TimerSample:
        # An update racing with the reset may lose its max for one scrape window; acceptable.
        max_ns = self.max_ns
        if reset_max:
            self.max_ns = 0
        return TimerSample(dict(self.labels), self.count, self.sum_ns / 1e9, max_ns / 1e9)


Metric = Counter | Gauge | GaugeFn | Timer
_M = TypeVar("_M", Counter, Gauge, GaugeFn, Timer)


@dataclass(frozen=True, slots=True)
class Sample:
    """One counter or gauge value read at collection time."""

    labels: dict[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class TimerSample:
    """One timer read at collection time, in seconds."""

    labels: dict[str, str]
    count: int
    sum_seconds: float
    max_seconds: float


@dataclass(frozen=True, slots=True)
class FamilySample:
    """All metrics sharing one name, read at collection time."""

    name: str
    doc: str
    kind: Kind
    samples: Sequence[Sample | TimerSample]


@dataclass(slots=True)
class _Family:
    name: str
    doc: str
    kind: Kind
    label_names: frozenset[str]
    metrics: dict[LabelKey, Metric]

    def exposed_names(self) -> set[str]:
        if self.kind == "timer":
            return {self.name + suffix for suffix in _TIMER_SUFFIXES}
        return {self.name}


class MetricsRegistry:
    """Holds every metric of a process; a lock guards registration and collection, never updates."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}

    def counter(self, name: str, doc: str, labels: Mapping[str, str] | None = None) -> Counter:
        return self._get_or_add(name, doc, "counter", labels, Counter, Counter)

    def gauge(self, name: str, doc: str, labels: Mapping[str, str] | None = None) -> Gauge:
        return self._get_or_add(name, doc, "gauge", labels, Gauge, Gauge)

    def gauge_fn(
        self, name: str, doc: str, labels: Mapping[str, str] | None, fn: Callable[[], float]
    ) -> GaugeFn:
        """Register a gauge computed at scrape time; registering it again replaces ``fn``."""
        metric = self._get_or_add(name, doc, "gauge", labels, GaugeFn, lambda lbl: GaugeFn(lbl, fn))
        metric.fn = fn  # a re-registration (e.g. a partition assigned again) brings the current source
        return metric

    def counter_fn(
        self, name: str, doc: str, labels: Mapping[str, str] | None, fn: Callable[[], float]
    ) -> GaugeFn:
        """Register a counter whose count its owner keeps and ``fn`` reads at scrape time (exposed with
        ``# TYPE counter``); ``fn`` must never decrease. Registering it again replaces ``fn``."""
        metric = self._get_or_add(name, doc, "counter", labels, GaugeFn, lambda lbl: GaugeFn(lbl, fn))
        metric.fn = fn
        return metric

    def timer(self, name: str, doc: str, labels: Mapping[str, str] | None = None) -> Timer:
        return self._get_or_add(name, doc, "timer", labels, Timer, Timer)

    def remove(self, name: str, labels: Mapping[str, str] | None = None) -> bool:
        """Drop one metric (e.g. the lag of a revoked partition); return whether it existed."""
        key = _label_key(_clean_labels(name, labels))
        with self._lock:
            family = self._families.get(name)
            if family is None or family.metrics.pop(key, None) is None:
                return False
            if not family.metrics:
                del self._families[name]
            return True

    def collect(self, *, reset_max: bool = False) -> list[FamilySample]:
        """Read every metric; ``reset_max`` starts a new max window for timers (the scrape does)."""
        with self._lock:
            families = [(f.name, f.doc, f.kind, list(f.metrics.values())) for f in self._families.values()]
        # Callback gauges run outside the lock so that a callback may itself touch the registry.
        return [
            FamilySample(
                name, doc, kind, [s for m in metrics if (s := _read(name, m, reset_max)) is not None]
            )
            for name, doc, kind, metrics in families
        ]

    def snapshot(self) -> dict[str, list[dict[str, object]]]:
        """Plain values by metric name, for tests and logs; does not reset timer maxima."""
        result: dict[str, list[dict[str, object]]] = {}
        for family in self.collect():
            rows: list[dict[str, object]] = []
            for s in family.samples:
                if isinstance(s, TimerSample):
                    rows.append(
                        {"labels": s.labels, "count": s.count, "sum": s.sum_seconds, "max": s.max_seconds}
                    )
                else:
                    rows.append({"labels": s.labels, "value": s.value})
            result[family.name] = rows
        return result

    def _get_or_add(
        self,
        name: str,
        doc: str,
        kind: Kind,
        labels: Mapping[str, str] | None,
        cls: type[_M],
        make: Callable[[dict[str, str]], _M],
    ) -> _M:
        clean = _clean_labels(name, labels)
        key = _label_key(clean)
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = _Family(name, doc, kind, frozenset(clean), {})
                self._check_no_clash(family)
                self._families[name] = family
            elif family.kind != kind:
                raise MetricsError(
                    f"metric {name!r} is already registered as a {family.kind}, not a {kind}; "
                    "use another name"
                )
            elif family.label_names != frozenset(clean):
                raise MetricsError(
                    f"metric {name!r} has labels {sorted(family.label_names)}, not {sorted(clean)}; "
                    "every metric of one name must use the same label names"
                )
            metric = family.metrics.get(key)
            if metric is None:
                new = make(clean)
                family.metrics[key] = new
                return new
            if not isinstance(metric, cls):
                raise MetricsError(
                    f"metric {name!r} {clean} is already registered as a {type(metric).__name__}, "
                    f"not a {cls.__name__}; a settable and a callback gauge cannot share name and labels"
                )
            return metric

    def _check_no_clash(self, new: _Family) -> None:
        taken = new.exposed_names()
        for family in self._families.values():
            clash = taken & family.exposed_names()
            if clash:
                raise MetricsError(
                    f"metric {new.name!r} would expose {sorted(clash)}, already exposed by "
                    f"{family.kind} {family.name!r}; use another name"
                )


def _clean_labels(name: str, labels: Mapping[str, str] | None) -> dict[str, str]:
    if not _NAME_RE.match(name):
        raise MetricsError(f"metric name {name!r} is not valid: use letters, digits, '_' and ':'")
    clean: dict[str, str] = {}
    for label, value in (labels or {}).items():
        if not _LABEL_RE.match(label) or label.startswith("__"):
            raise MetricsError(
                f"label {label!r} of metric {name!r} is not valid: use letters, digits and '_', "
                "not starting with '__'"
            )
        clean[label] = str(value)  # a partition passed as int must not become a second series
    return clean


def _label_key(labels: Mapping[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


def _read(name: str, metric: Metric, reset_max: bool) -> Sample | TimerSample | None:
    if isinstance(metric, Timer):
        return metric.read(reset_max=reset_max)
    try:
        value = metric.value
        if type(value) not in (int, float):  # a callback may return a Decimal, a bool or garbage
            value = float(value)
        return Sample(dict(metric.labels), value)
    except Exception:
        # One failing lag callback must not take the whole scrape down; the series is absent instead.
        log.warning("metric %s %s: callback failed; sample left out", name, metric.labels, exc_info=True)
        return None


USER_PREFIX = "samsa_user_"
# What a Prometheus metric name may not hold (':' is left to recording rules): each becomes '_'.
_UNSAFE_CHARS = re.compile(r"[^a-zA-Z0-9_]")
_USER_SUFFIXES: dict[Kind, str] = {"counter": "_total", "gauge": "", "timer": "_seconds"}
UserMetric = Counter | Gauge | Timer
_U = TypeVar("_U", Counter, Gauge, Timer)


class TaskMetrics:
    """A task's own metrics, ``context.metrics``: Samza's task metrics registry (``newCounter(group,
    name)`` is ``counter(name, group=group)``). They live in the container's registry beside the runtime's,
    are served with them on ``metrics.prometheus.port`` as ``samsa_user_[<group>_]<name>`` with the label
    ``task``, and start from 0 with each start of the container, as the runtime's do.

    Look a metric up once (in ``init``) and keep it: its ``inc``, ``set`` and ``update`` are the runtime's
    own per-message updates, with no lookup, lock or check. Asking again for one name gives the same
    metric; asking for it as another kind is an error."""

    def __init__(self, registry: MetricsRegistry, task: str) -> None:
        self._registry = registry
        self._task = task
        self._labels = {"task": task}
        # init() runs on the container's thread, but a task may register from a thread of its own.
        self._lock = threading.RLock()
        #: (group, name) as the task asked -> its metric; exposed name -> the (group, name) that took it.
        self._metrics: dict[tuple[str, str], UserMetric] = {}
        self._exposed: dict[str, tuple[str, str]] = {}

    def counter(self, name: str, *, group: str = "", doc: str = "") -> Counter:
        """A count that only grows: ``inc(n=1)``, read ``count``; exposed with ``_total`` added."""
        return self._get(name, group, doc, "counter", Counter, self._registry.counter)

    def gauge(self, name: str, initial: float = 0, *, group: str = "", doc: str = "") -> Gauge:
        """A value the task sets: ``set(v)`` (``inc``/``dec`` too), read ``value``; ``initial`` is its value
        when first asked for (asking again keeps the value it has)."""
        self._check_types(name, group)
        with self._lock:
            new = (group, name) not in self._metrics
            gauge = self._get(name, group, doc, "gauge", Gauge, self._registry.gauge)
            if new:
                gauge.set(initial)
            return gauge

    def timer(self, name: str, *, group: str = "", doc: str = "") -> Timer:
        """Durations: ``update(seconds)``, ``update_ns(ns)`` or ``with timer.time(): ...``; exposed, with
        ``_seconds`` added, as the runtime's timers are: ``_count``, ``_sum`` and ``_max`` (since the
        previous scrape)."""
        return self._get(name, group, doc, "timer", Timer, self._registry.timer)

    def read(self) -> dict[str, float | TimerSample]:
        """Each metric by the name the task gave (``group.name`` when it gave a group): a counter's count,
        a gauge's value, a timer's count, sum and max in seconds (since the start: no scrape resets it)."""
        with self._lock:
            metrics = list(self._metrics.items())
        return {
            user_key(name, group): m.read(reset_max=False) if isinstance(m, Timer) else m.value
            for (group, name), m in metrics
        }

    def _get(
        self,
        name: str,
        group: str,
        doc: str,
        kind: Kind,
        cls: type[_U],
        register: Callable[[str, str, Mapping[str, str]], _U],
    ) -> _U:
        self._check_types(name, group)
        key = (group, name)
        with self._lock:
            metric = self._metrics.get(key)
            if metric is not None:
                if not isinstance(metric, cls):
                    raise MetricsError(
                        f"task {self._task}: metric {user_key(name, group)!r} is a "
                        f"{type(metric).__name__.lower()} already, not a {kind}; give the {kind} another name"
                    )
                return metric
            try:
                exposed = user_metric_name(name, group, kind)
            except MetricsError as e:
                raise MetricsError(f"task {self._task}: {e}") from None
            taken = self._exposed.get(exposed)
            if taken is not None:
                raise MetricsError(
                    f"task {self._task}: metric {user_key(name, group)!r} would be exposed as {exposed!r}, "
                    f"the name of its metric {user_key(taken[1], taken[0])!r} (characters other than "
                    "letters, digits and '_' become '_'); give one of them another name or group"
                )
            try:
                new = register(exposed, doc or f"Metric {user_key(name, group)!r} of the task", self._labels)
            except MetricsError as e:
                raise MetricsError(
                    f"task {self._task}: metric {user_key(name, group)!r} (a {kind}, exposed as "
                    f"{exposed!r}): {e}"
                ) from e
            self._metrics[key] = new
            self._exposed[exposed] = key
            return new

    def _check_types(self, name: object, group: object) -> None:
        # Untyped task code may pass anything; a list would fail as a dict key with a less clear error.
        for what, text in (("name", name), ("group", group)):
            if not isinstance(text, str):
                raise MetricsError(
                    f"task {self._task}: metric {name!r} (group {group!r}): its {what} must be a str, "
                    f"not {type(text).__name__}"
                )


def user_key(name: str, group: str = "") -> str:
    """How a task's metric is named in errors and test results: ``name``, or ``group.name``."""
    return f"{group}.{name}" if group else name


def user_metric_name(name: str, group: str, kind: Kind) -> str:
    """The exposed name of a task's metric: ``samsa_user_[<group>_]<name>``, each character other than
    a letter, digit or '_' made '_' (Samza's ``my-counter`` is ``my_counter``), then the kind's suffix
    (``_total``, ``_seconds``) unless the name ends with it."""
    parts = [_safe_part(group, "group", name, group)] if group else []
    base = USER_PREFIX + "_".join([*parts, _safe_part(name, "name", name, group)])
    suffix = _USER_SUFFIXES[kind]
    return base if base.endswith(suffix) else base + suffix


def _safe_part(text: str, what: str, name: str, group: str) -> str:
    safe = _UNSAFE_CHARS.sub("_", text)
    if not safe.strip("_"):
        raise MetricsError(
            f"metric {name!r} (group {group!r}): the {what} {text!r} has no letter or digit; "
            "name metrics with letters, digits, '_', '-' or '.'"
        )
    return safe
