"""One task: the user's StreamTask with its partitions, stores, offsets, timers and coordinator requests."""

from __future__ import annotations

import difflib
import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samsa.runtime import metrics as m
from samsa.runtime.exceptions import ConfigError, UserCodeError
from samsa.runtime.job_model import TaskModel
from samsa.runtime.store_metrics import last_commit_gauge
from samsa.runtime.task import MessageCollector, RequestScope, StreamTask, has_window
from samsa.runtime.timers import TaskTimers
from samsa.runtime.user_errors import USER_FAILURES, call_task, described, interrupted
from samsa.streams import SystemStreamPartition

if TYPE_CHECKING:
    from samsa.exactly_once.task import EosTask
    from samsa.kafka import KafkaProducer
    from samsa.runtime.config.config import Config
    from samsa.stores.storage_manager import TaskStorage


# The task's methods Samsa calls, with the arguments it passes them (after self), as the error shows them.
_CALLS = {
    "init": ("context",),
    "process": ("envelope", "collector", "coordinator"),
    "window": ("collector", "coordinator"),
    "close": (),
}


def check_constructor(task_class: type[StreamTask], path: str) -> None:
    """Raises ConfigError naming `task.class` when Samsa cannot run the class: it does not implement
    process(), a method Samsa calls is async or a generator or cannot take the arguments it is given, or the
    class cannot be built with no arguments."""
    try:
        inspect.signature(task_class).bind()
    except TypeError as e:
        name = task_class.__qualname__
        raise ConfigError(
            f"task.class={path!r}: {name}{_signature(task_class)} cannot be called without arguments "
            f"({e}){_defined_at(task_class)}; Samsa builds each task as {name}(): give the constructor's "
            "parameters defaults, or read settings from context.config in init()"
        ) from None
    except ValueError:  # no signature to read (a C-level class): its call says
        pass
    _check_methods(task_class, path)


def new_task(task_class: type[StreamTask], path: str) -> StreamTask:
    """A `task.class` instance; a constructor that raises is the user's code failing, with its traceback."""
    check_constructor(task_class, path)
    try:
        return task_class()
    except USER_FAILURES as e:
        if interrupted(e):
            raise
        raise UserCodeError(f"task.class={path!r}: {task_class.__qualname__}() failed: {described(e)}") from e


def _check_methods(task_class: type[StreamTask], path: str) -> None:
    name = task_class.__qualname__.rsplit(".<locals>.", 1)[-1]
    # StreamTask itself is left be: the placeholder `task.class` of jobs only checked or inspected (tests,
    # tools), never a user's class with its process() misspelled.
    if task_class.process is StreamTask.process and task_class is not StreamTask:
        ours = set(dir(StreamTask))
        own = [a for a in dir(task_class) if a not in ours and not a.startswith("__")]
        near = difflib.get_close_matches("process", own, n=1, cutoff=0.6)
        hint = f" ({name}.{near[0]} looks like it: rename it process)" if near else ""
        raise ConfigError(
            f"task.class={path!r}: {name} does not implement process(self, envelope, collector, "
            f"coordinator){hint}; Samsa calls it for each input message: define it in {name}"
        )
    for method, args in _CALLS.items():
        function = getattr(task_class, method)
        if function is getattr(StreamTask, method):
            continue
        kind = _not_plain(function)
        if kind:
            raise ConfigError(
                f"task.class={path!r}: {name}.{method}() is {kind}{_code_at(function)}: its code would never "
                f"run. Samsa runs {method}() synchronously and has no async tasks: write it as a plain `def` "
                "(no async, no await, no yield) that does its work before it returns"
            )
        static = inspect.getattr_static(task_class, method)
        if not isinstance(static, (staticmethod, classmethod)) and not inspect.isfunction(static):
            continue  # a callable object: its call says
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            continue
        this = [None] if inspect.isfunction(static) else []  # self, which a staticmethod does not take
        try:
            signature.bind(*this, *(None for _ in args))
        except TypeError as e:
            also = "; read the config from context.config" if method == "init" else ""
            bare = signature.replace(
                parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
                return_annotation=signature.empty,
            )
            raise ConfigError(
                f"task.class={path!r}: {name}.{method}{bare} cannot take the arguments Samsa passes "
                f"({e}){_code_at(function)}; Samsa calls {method}({', '.join(args)}): give it those "
                f"parameters{also}"
            ) from None


def _not_plain(function: object) -> str:
    """What makes `function` return without running its code, or ''."""
    if inspect.isasyncgenfunction(function):
        return "an async generator (async def with yield)"
    if inspect.iscoroutinefunction(function):
        return "a coroutine function (async def)"
    if inspect.isgeneratorfunction(function):
        return "a generator function (it yields)"
    return ""


def _code_at(function: object) -> str:
    code = getattr(inspect.unwrap(function), "__code__", None) if callable(function) else None
    return f" (at {code.co_filename}:{code.co_firstlineno})" if code is not None else ""


def _signature(task_class: type[StreamTask]) -> str:
    try:
        return str(inspect.signature(task_class))
    except (TypeError, ValueError):
        return "()"


def _defined_at(task_class: type[StreamTask]) -> str:
    try:
        code = task_class.__init__.__code__
    except AttributeError:
        return ""
    return f" (its __init__ is at {code.co_filename}:{code.co_firstlineno})"


class TaskCoordinatorImpl:
    """Records a task's commit and shutdown requests; the run loop acts on them after the call returns."""

    __slots__ = ("commit_scope", "requested", "shutdown_scope")

    def __init__(self) -> None:
        self.requested = False  # checked once per message: any request pending
        self.commit_scope: RequestScope | None = None
        self.shutdown_scope: RequestScope | None = None

    def commit(self, scope: RequestScope | str = RequestScope.CURRENT_TASK) -> None:
        scope = _scope(scope, "commit")
        self.commit_scope = scope if self.commit_scope is None else max(self.commit_scope, scope, key=_rank)
        self.requested = True

    def shutdown(self, scope: RequestScope | str = RequestScope.CURRENT_TASK) -> None:
        scope = _scope(scope, "shutdown")
        self.shutdown_scope = (
            scope if self.shutdown_scope is None else max(self.shutdown_scope, scope, key=_rank)
        )
        self.requested = True


def _scope(scope: object, request: str) -> RequestScope:
    """A RequestScope, or its name (Samza's constant, `"ALL_TASKS_IN_CONTAINER"`), as one; else TypeError:
    the run loop tells scopes apart by identity, so any other value would act as CURRENT_TASK."""
    if isinstance(scope, RequestScope):
        return scope
    if isinstance(scope, str) and scope in RequestScope.__members__:
        return RequestScope[scope]
    valid = ", ".join(f"RequestScope.{s.name} (or {s.name!r})" for s in RequestScope)
    raise TypeError(f"coordinator.{request}(scope): scope must be one of {valid}, got {scope!r}")


def _rank(scope: RequestScope) -> int:
    return 1 if scope is RequestScope.ALL_TASKS_IN_CONTAINER else 0


class TaskContextImpl:
    """What `StreamTask.init` sees."""

    def __init__(
        self,
        task_name: str,
        container_id: str,
        config: Config,
        ssps: frozenset[SystemStreamPartition],
        storage: TaskStorage,
        registry: m.MetricsRegistry,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock` is the container's (its run loop's): the scheduler's timers follow it."""
        self._task_name = task_name
        self._container_id = container_id
        self._config = config
        self._ssps = ssps
        self._storage = storage
        self._metrics = m.TaskMetrics(registry, task_name)
        self._scheduler = TaskTimers(task_name, clock)

    @property
    def task_name(self) -> str:
        return self._task_name

    @property
    def container_id(self) -> str:
        return self._container_id

    @property
    def config(self) -> Config:
        return self._config

    @property
    def system_stream_partitions(self) -> frozenset[SystemStreamPartition]:
        return self._ssps

    @property
    def metrics(self) -> m.TaskMetrics:
        return self._metrics

    @property
    def scheduler(self) -> TaskTimers:
        return self._scheduler

    def store(self, name: str) -> Any:
        try:
            return self._storage.stores[name]
        except KeyError:
            known = ", ".join(sorted(self._storage.stores)) or "none"
            raise ConfigError(
                f"task {self._task_name}: no store named {name!r} (configured: {known}); "
                f"define stores.{name}.factory"
            ) from None


class TaskInstance:
    """Runs one task's calls; keeps the next offset of each of its partitions for the checkpoint."""

    def __init__(
        self,
        model: TaskModel,
        task: StreamTask,
        storage: TaskStorage,
        context: TaskContextImpl,
        collector: MessageCollector,
        registry: m.MetricsRegistry,
        commit_ms: int,
        window_ms: int,
    ) -> None:
        self.name = model.name
        self.model = model
        self.task = task
        self.storage = storage
        self.context = context
        self.collector = collector
        self.coordinator = TaskCoordinatorImpl()
        self.offsets: dict[SystemStreamPartition, int] = {}
        labels = {"task": self.name}
        self.processed = registry.counter(m.MESSAGES_PROCESSED, "Messages processed by the task", labels)
        self.process_timer = registry.timer(m.PROCESS_SECONDS, "Time in StreamTask.process", labels)
        self.window_timer = registry.timer(m.WINDOW_SECONDS, "Time in StreamTask.window", labels)
        self.commit_timer = registry.timer(m.COMMIT_SECONDS, "Time to commit the task", labels)
        self.commits = registry.counter(m.COMMITS, "Commits of the task", labels)
        self.commits_skipped = registry.counter(
            m.COMMITS_SKIPPED, "Commits skipped while the previous one was still uploading", labels
        )
        self.commits_idle = registry.counter(
            m.COMMITS_IDLE, "Timer commits left out: nothing new since the task's last commit", labels
        )
        self._registry = registry
        now = time.monotonic()
        self.commit_interval = commit_ms / 1000 if commit_ms > 0 else None
        self.window_interval = window_ms / 1000 if window_ms > 0 and has_window(task) else None
        self.next_commit = now + self.commit_interval if self.commit_interval else float("inf")
        self.next_window = now + self.window_interval if self.window_interval else float("inf")
        self.shutdown_voted = False
        #: Exactly-once: the task's versions, tags and aligner, and its transactional producer (sinks and
        #: checkpoints); None under at-least-once.
        self.eos: EosTask | None = None
        self.sink: KafkaProducer | None = None
        self._task_closed = False

    def init(self) -> None:
        call_task(self.name, "init()", self.task.init, self.context)

    def window(self) -> None:
        start = time.perf_counter_ns()
        call_task(self.name, "window()", self.task.window, self.collector, self.coordinator)
        self.window_timer.update_ns(time.perf_counter_ns() - start)
        if self.window_interval:
            self.next_window = time.monotonic() + self.window_interval

    def close(self) -> None:
        """The task's close() (unless `close_task` ran it), then its stores'."""
        try:
            if not self._task_closed:
                self.close_task()
        finally:
            self.storage.close()

    def close_task(self) -> None:
        """The task's own close(), once: what it writes to its stores goes into the next (final) commit."""
        self._task_closed = True
        call_task(self.name, "close()", self.task.close)

    def commit_skipped(self) -> None:
        """The previous commit still uploads (within task.commit.max.delay.ms): try again next interval."""
        self.commits_skipped.inc()
        if self.commit_interval:
            self.next_commit = time.monotonic() + self.commit_interval

    def commit_idle(self) -> None:
        """Nothing new since the last commit (offsets, stores, outputs): the timer's commit is left out."""
        self.commits_idle.inc()
        # The last checkpoint is current as of now: an idle, caught-up task must not look stuck to an
        # alert on the age of its last commit.
        last_commit_gauge(self._registry, self.name).set(time.time())
        if self.commit_interval:
            self.next_commit = time.monotonic() + self.commit_interval

    def committed(self, duration_ns: int) -> None:
        self.commit_timer.update_ns(duration_ns)
        self.commits.inc()
        if self.commit_interval:
            self.next_commit = time.monotonic() + self.commit_interval
