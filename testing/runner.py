"""`TestRunner`: runs a job's tasks on the in-memory system in this process and shows what they did.

>>> from samsa.examples.wordcount.task import WordCount
>>> result = (
...     TestRunner.of(WordCount)
...     .with_config({"wordcount.output.stream": "counts-out"})
...     .add_input("words", ["a", "b", "a"], partitions=4)
...     .add_output("counts-out")
...     .add_store("counts", initial={"a": 3})
...     .run(timeout=30)
... )
>>> result.store("counts") == {"a": 5, "b": 1}
True
>>> sorted(result.output("counts-out"))
[1, 4, 5]
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from samsa.exactly_once.changelog import ChangelogReader
from samsa.exactly_once.protocol import RestoreCommand, classify_message
from samsa.kafka import KafkaAdmin, RawMessage
from samsa.kafka.inmemory import auto_create_topics, broker, forget, use_clock
from samsa.kafka.inmemory.message import InMemoryMessage, Record, as_message
from samsa.kafka.inmemory.registry import now_ms
from samsa.kafka.message import Headers
from samsa.kafka.partitioner import partition_for
from samsa.runtime.classpath import register_object
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw
from samsa.runtime.container import Container, ContainerHooks
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.job_model import JobModel
from samsa.runtime.metrics import TaskMetrics, TimerSample
from samsa.runtime.run_loop import RunLoop
from samsa.runtime.state import changelog_partition, changelogs
from samsa.runtime.task_instance import TaskInstance
from samsa.serde.base import Serde, fast_from_bytes, fast_to_bytes
from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde
from samsa.serde.registry import SerdeRegistry
from samsa.stores.backends import CHANGELOG, store_backends
from samsa.stores.exceptions import StoreConfigError
from samsa.stores.factory import store_specs
from samsa.streams import SystemStream
from samsa.testing.exceptions import TestRunnerError

log = logging.getLogger(__name__)

SYSTEM = "kafka"
# Serde of streams and stores the test's config leaves unset: JSON takes str, int, float, list and dict.
DEFAULT_SERDE = "json"
_READ_BATCH = 10_000  # records per read when reading results back
#: Serdes whose bytes depend on the object alone (no state, no randomness): a feed may reuse their output.
_PURE_SERDES = (BytesSerde, StringSerde, JsonSerde, IntegerSerde, LongSerde)
#: A record as the feed appends it: key, value, timestamp (ms), headers.
_Fed = tuple[bytes | None, bytes | None, int, Headers | None]
#: A topic of the test: the in-memory URL of its cluster, and its name.
_Topic = tuple[str, str]
_K = TypeVar("_K")


def _release(containers: dict[str, Container], state_dir: Path, own_dir: bool) -> None:
    """What a runner holds, let go without a final commit (the runner was closed or forgotten)."""
    for container in containers.values():
        container.crash()
    containers.clear()
    if own_dir:
        shutil.rmtree(state_dir, ignore_errors=True)


class ManualClock:
    """A clock that only moves when told: the job's timers fire when a test advances it."""

    def __init__(self, start: float = 1_000.0) -> None:
        self._now = start

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward")
        self._now += seconds


@dataclass(frozen=True)
class Message:
    """One input or output message. Inputs: `partition` None means by key (Kafka's murmur2 of the
    serialized key), or partition 0 when the key is None too."""

    value: Any
    key: Any = None
    partition: int | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None
    offset: int | None = None


@dataclass
class _Input:
    stream: str
    partitions: int
    #: (item as the test gave it, the partition it was given for or None): read at feed time.
    items: list[tuple[Any, int | None]]
    #: Keys and values are bytes sent as they are (add_input(raw=True)), not through the stream's serdes.
    raw: bool = False
    #: The system the test named (add_input(system=...)), or None: the job's input of that name.
    system: str | None = None
    #: The topic it went to, once fed.
    topic: _Topic | None = None


@dataclass
class _StoreInit:
    name: str
    initial: dict[Any, Any] = field(default_factory=dict)
    #: Input partition -> entries of the task reading it.
    by_partition: dict[int, dict[Any, Any]] = field(default_factory=dict)


class TestResult:
    """What the job did so far: the output streams' messages and the stores' contents. A view of the
    runner, not a copy: read after a later run() it shows that run's work too."""

    __test__ = False  # not a pytest test class

    def __init__(self, runner: TestRunner) -> None:
        self._runner = runner

    def messages(
        self, stream: str, partition: int | None = None, raw: bool = False, system: str | None = None
    ) -> list[Message]:
        """Every message of `stream` (of one partition, or all in partition order), deserialized, as a
        Samsa reader sees it (an exactly-once job's control records and voided versions left out). `raw`:
        every committed record as it is on the topic, keys and values as bytes (a dead-letter stream's
        always are). `system`: the stream's system; None means the job's stream of that name (an input,
        output, changelog), else the stream on the default system."""
        return self._runner.read_stream(stream, partition, raw, system)

    def output(self, stream: str, partition: int | None = None, system: str | None = None) -> list[Any]:
        """The values sent to `stream` (of one partition, or all in partition order)."""
        return [m.value for m in self.messages(stream, partition, system=system)]

    def output_by_partition(self, stream: str, system: str | None = None) -> dict[int, list[Any]]:
        """Partition -> the values sent to it."""
        out: dict[int, list[Any]] = {}
        for m in self.messages(stream, system=system):
            assert m.partition is not None
            out.setdefault(m.partition, []).append(m.value)
        return out

    def store(self, name: str) -> dict[Any, Any]:
        """The store's contents over all tasks (a key two tasks hold is an error: see `store_by_task`; a
        broadcast adjunct store shows once). Read from the running tasks' stores; once the containers
        stopped (closed, restarted, shut down), from the store's changelog; killed (failed, or restarted with
        crash=True), not until the next run() restored it. JSON list keys come back as tuples."""
        return self._runner.read_store(name)

    def store_by_task(self, name: str) -> dict[str, dict[Any, Any]]:
        """Task name ("Partition 0", ...) -> that task's entries of the store."""
        return self._runner.read_store_by_task(name)

    def metrics(self, task: str | None = None) -> dict[str, float | TimerSample]:
        """The tasks' own metrics (context.metrics) by the name they gave (`group.name` with a group): a
        counter's count, a gauge's value, a timer's `TimerSample` (count, sum_seconds, max_seconds). Of
        one task ("Partition 0", ...), or added up over all (a timer's max is the largest). As the
        containers' last start counted them: a restart starts them from 0, as in a real container."""
        return self._runner.read_metrics(task)


class TestRunner:
    """Builds a job from a task class and a config, feeds it inputs on the in-memory system, runs its
    containers in this process until every input is processed, and returns a `TestResult`."""

    __test__ = False  # not a pytest test class

    def __init__(self, task: str, state_dir: str | os.PathLike[str] | None = None) -> None:
        self._task = task
        self._config: dict[str, str] = {}
        self._inputs: list[_Input] = []
        #: add_output's streams and counts, by (system as the test named it or None, stream).
        self._outputs: dict[tuple[str | None, str], int] = {}
        #: add_input's counts before the job is built (its clusters are known then), keyed as _outputs.
        self._asked: dict[tuple[str | None, str], int] = {}
        #: Topic -> its partition count, as the test's first add_input or add_output of it gave it (from
        #: the job's build on).
        self._partitions: dict[_Topic, int] = {}
        #: System -> the in-memory URL of its cluster (systems of equal bootstrap.servers share one), from
        #: the job's build on: the config, which names the clusters, may come after add_input.
        self._urls: dict[str, str] = {}
        self._opened: set[str] = set()  # the cluster URLs set up for the test (_open_cluster)
        #: The job's streams a result names without a system: inputs, outputs, changelogs, dead letters.
        self._named: tuple[SystemStream, ...] = ()
        self._stores: dict[str, _StoreInit] = {}
        self._namespace = f"testrunner-{uuid.uuid4().hex[:12]}"
        self._own_dir = state_dir is None
        self._state_dir = Path(
            state_dir if state_dir is not None else tempfile.mkdtemp(prefix="samsa-testrunner-")
        )
        self._job: JobConfig | None = None
        self._model: JobModel | None = None
        self._fed: set[int] = set()  # inputs already produced (a restart feeds only new ones)
        #: Containers whose tasks got add_store's initial contents (at their first start, before init()).
        self._seeded: set[str] = set()
        self._clock = ManualClock()
        self._containers: dict[str, Container] = {}
        #: Task name -> its metrics (context.metrics) as its container's last start counted them.
        self._task_metrics: dict[str, TaskMetrics] = {}
        #: Why the job cannot go on without a restart(): a run failed.
        self._failure: BaseException | None = None
        #: Whether the containers were killed (a failure, a crash restart) and not started since: their
        #: changelogs still hold the writes after the last commit, which the next start undoes.
        self._crashed = False
        #: Containers whose tasks shut them down (coordinator.shutdown()): ended, and not started again
        #: before a restart(); the others run on, as in Samza. Every one of them: the job is over.
        self._shut_down: set[str] = set()
        self._closed = False
        # A runner dropped without close() (`result = TestRunner.of(...).run()`) still releases its stores.
        self._finalizer = weakref.finalize(self, _release, self._containers, self._state_dir, self._own_dir)
        # The default system's cluster; the job's other clusters get theirs when it is built.
        self._open_cluster(self._bootstrap)

    # -- building the test -------------------------------------------------------------------------
    @classmethod
    def of(cls, task: type | str, state_dir: str | os.PathLike[str] | None = None) -> TestRunner:
        """A runner for a `StreamTask` class (or its `module:Class` path)."""
        if not isinstance(task, (str, type)):
            # Samsa builds one task object per partition (and again at each restart): it needs the class.
            kind = type(task)
            raise TestRunnerError(
                f"TestRunner.of({kind.__qualname__}(...)): pass the task class, TestRunner.of("
                f"{kind.__qualname__}), not an instance: Samsa builds each task as {kind.__qualname__}() "
                "itself. A task cannot be given constructor arguments: give its parameters defaults, read "
                "them from context.config in init() (with_config({...})), or pass a subclass whose "
                "__init__ supplies them"
            )
        path = task if isinstance(task, str) else register_object(task)
        return cls(path, state_dir)

    def with_config(self, config: Mapping[str, Any] | str | Path) -> TestRunner:
        """Job config keys, as a dict (nested or flat; values as a job.yaml's) or a job.yaml or .properties
        file; every system becomes an in-memory one. Before the first run()."""
        self._before_first_run("with_config()")
        self._config.update(load_raw(config))
        return self

    def add_input(
        self,
        stream: str,
        messages: Iterable[Any] | Mapping[int, Iterable[Any]],
        partitions: int | None = None,
        raw: bool = False,
        system: str | None = None,
    ) -> TestRunner:
        """Messages of an input stream. A list or generator of items (read now): an item is a `Message`, a
        (key, value) tuple, or a bare value that is also its key (so equal items share a partition, as on a
        keyed topic: the key has its dicts' keys sorted, the value is sent as given). A dict partition ->
        items puts them there. `partitions` is the stream's partition count: given at its first add_input
        (default: 1, or the dict's highest partition + 1), later ones may leave it out. Between runs too:
        the next run() processes what was added. `raw`: keys and values are bytes (or None), sent as they
        are instead of through the stream's serdes (a malformed record, to test
        task.deserialization.error.policy). `system`: the system of the stream (one of the job's); None
        means the job's input of that name, else the stream on the default system."""
        self._usable("add_input()")
        if self._job is None:  # its topic is known once the job is built: its count is kept by name
            key = (system, stream)
            known = self._asked.get(key) or self._outputs.get(key)
        else:
            topic = self._topic(self._input_stream(self._job, stream, system))
            if topic not in {self._topic(ss) for ss in self._job.inputs}:
                raise TestRunnerError(
                    self._not_consumed(self._job, stream, system) + "; nothing of it was added"
                )
            known = self._partitions.get(topic)
        if isinstance(messages, Mapping):
            batch = [(item, p) for p, items in sorted(messages.items()) for item in items]
            wanted = partitions or known or max(messages, default=0) + 1
        else:
            batch = [(item, None) for item in messages]
            wanted = partitions or known or 1
        if self._job is None:
            count = self._declare(self._asked, key, stream, wanted, "add_input")
        else:
            count = self._declare(self._partitions, topic, stream, wanted, "add_input")
        for n, (item, given) in enumerate(batch):
            part = given if given is not None else item.partition if isinstance(item, Message) else None
            if isinstance(item, tuple) and len(item) != 2:
                raise TestRunnerError(
                    f"add_input({stream!r}): item {n} {item!r} is a tuple of {len(item)}; an item is a "
                    "(key, value) pair, a Message or a bare value"
                )
            if part is not None and not 0 <= part < count:
                raise TestRunnerError(
                    f"add_input({stream!r}): item {n} is for partition {part}, but the stream has {count} "
                    f"partition(s); give partitions= at the stream's first add_input"
                )
        self._inputs.append(_Input(stream, count, batch, raw, system))
        return self

    def add_output(self, stream: str, partitions: int = 1, system: str | None = None) -> TestRunner:
        """An output stream the task sends to, with its partition count (a stream the test does not
        declare is made with one partition when the task first sends to it). Before the first run() it
        is added to task.outputs too (an exactly-once job must list every stream it sends to).
        `system`: the system of the stream; None means the job's output of that name, else the stream on
        the default system."""
        self._usable("add_output()")
        if self._job is None:
            self._declare(self._outputs, (system, stream), stream, partitions, "add_output")
            return self
        topic = self._topic(self._resolve(self._job, stream, system, self._job.outputs, "add_output"))
        self._ensure_topics({topic: self._declare(self._partitions, topic, stream, partitions, "add_output")})
        return self

    def add_store(
        self,
        name: str,
        initial: Mapping[Any, Any] | None = None,
        by_partition: Mapping[int, Mapping[Any, Any]] | None = None,
    ) -> TestRunner:
        """A store of the task, with contents its tasks start with. `initial` goes to the task that input
        messages with the same key reach (the key serialized by the first input stream's key serde);
        `by_partition` gives each task's entries by its input partition (a store keyed otherwise).
        Unless the config says otherwise it is an in-memory store with JSON serdes and a changelog (so a
        restart restores it). Before the first run()."""
        self._before_first_run("add_store()")
        self._stores[name] = _StoreInit(
            name, dict(initial or {}), {p: dict(entries) for p, entries in (by_partition or {}).items()}
        )
        return self

    @staticmethod
    def _declare(table: dict[_K, int], key: _K, stream: str, partitions: int, call: str) -> int:
        known = table.setdefault(key, partitions)
        if known != partitions:
            raise TestRunnerError(
                f"{call}({stream!r}, partitions={partitions}): the stream already has {known} partition(s) "
                f"in this test; give partitions={known} or leave it out"
            )
        return known

    def _before_first_run(self, call: str) -> None:
        self._usable(call)
        if self._job is not None:
            raise TestRunnerError(
                f"{call} must come before the first run() (the job is built then); make a new TestRunner "
                "for another job"
            )

    def _usable(self, call: str) -> None:
        if self._closed:
            raise TestRunnerError(f"{call}: the runner is closed; make a new TestRunner")

    @staticmethod
    def _message(item: Any, partition: int | None) -> Message:
        if isinstance(item, Message):
            return item if partition is None else Message(**{**item.__dict__, "partition": partition})
        return Message(item[1], item[0], partition)

    # -- running -----------------------------------------------------------------------------------
    def with_clock(self, clock: ManualClock) -> TestRunner:
        """Drive the job's timers (commit, window) by `clock`, which only `advance_time` moves. Before the
        first run()."""
        self._before_first_run("with_clock()")
        self._clock = clock
        for url in self._opened:
            use_clock(url, clock)
        return self

    @property
    def clock(self) -> ManualClock:
        """The job's clock: time stands still during `run`; `advance_time` moves it."""
        return self._clock

    def run(self, timeout: float = 30.0) -> TestResult:
        """Feeds the inputs added since the last run, starts the containers (once), and steps them until
        nothing is left to process; then commits every task, so outputs, stores and checkpoints show all
        of it (while a commit makes new input readable, as an exactly-once job's writes to a stream it
        reads, it steps and commits again). Raises TestRunnerError after `timeout` seconds, saying what
        ran (checked between steps: a running init(), process(), window() or commit is not interrupted).

        A failure of the job (a task's error) leaves its containers crashed, as a container dies: nothing
        after the last commit counts, and `restart()` starts the job again. After a timeout the next run
        goes on where this one stopped. A task's coordinator.shutdown() ends its own container (close(), a
        final commit), as `samsa run` does; the others run on, and once none is left, run() refuses until
        `restart()`."""
        self._usable("run()")
        if self._failure is not None:
            raise TestRunnerError(
                f"the job failed in an earlier run ({self._failure!r}); call restart() to start it again "
                "as after a crash (it resumes from its last commit)"
            ) from self._failure
        if self._model is not None and self._shut_down >= {model.id for model in self._model.containers}:
            raise TestRunnerError(
                "the job shut down in an earlier run (the tasks of every container called "
                "coordinator.shutdown()); call restart() to start it again"
            )
        job = self._prepare()
        self._feed(job)
        deadline = time.monotonic() + timeout
        try:
            loops = self._start_containers(deadline, timeout)
            # An exactly-once job's sends to a sink it also reads become readable at its commit: go on
            # until a commit makes nothing new readable.
            looped = self._transactional_inputs(job)
            while loops:
                self._step(job, loops, deadline, timeout)
                before = self._stable_offsets(looped)
                for container in self._containers.values():
                    container.commit_all()
                self._end_shut_down()
                loops = [loop for loop in loops if not loop.stopping]
                if self._stable_offsets(looped) == before:
                    break
        except TestRunnerError:
            raise  # a timeout or a test's mistake: the containers stand between steps, the next run goes on
        except BaseException as e:
            self._failure = e
            self._stop_containers(crash=True)
            raise
        return TestResult(self)

    def _end_shut_down(self) -> None:
        """Ends the containers whose tasks asked for shutdown, as in Samza (close(), a final commit); the
        other containers run on."""
        for container_id, container in list(self._containers.items()):
            if container.loop is not None and container.loop.stopping:
                del self._containers[container_id]
                self._shut_down.add(container_id)
                try:
                    container.finish()
                except BaseException:
                    self._crashed = True  # it released itself, without its final commit
                    raise

    def _step(self, job: JobConfig, loops: list[RunLoop], deadline: float, timeout: float) -> None:
        idle_rounds = 0
        # In-memory fetches are synchronous: a round in which every loop found nothing, twice in a row
        # (the second sees what the first round's processing sent to the job's own inputs), ends it.
        while idle_rounds < 2:
            busy = False
            for loop in loops:
                step = loop.step()
                while step is not None and step[0] == "fetch" and step[1]:
                    step = loop.step()  # what was fetched is processed before the round counts as busy
                if step is not None and step[0] not in ("idle", "fetch"):
                    busy = True
                if time.monotonic() > deadline:
                    raise TestRunnerError(
                        f"the test job did not finish within its timeout of {timeout} s; {self._doing(step)} "
                        "when it hit (a timeout is checked between steps and cannot interrupt a running "
                        "process(), window() or commit)"
                    )
            idle_rounds = 0 if busy else idle_rounds + 1

    def _doing(self, step: tuple[Any, ...] | None) -> str:
        """What a run loop's last step did, for a timeout's message."""
        if step is None:
            return "the containers were stopping"
        if step[0] == "timer":
            _, commits, windows = step
            parts = [f"window() of {', '.join(windows)}"] if windows else []
            parts += [f"the commit of {', '.join(commits)}"] if commits else []
            return "the due timers ran: " + (" and ".join(parts) or "none")
        if step[0] != "process":
            return "the job was fetching input"
        _, task, where, first, _ = step
        stream, _, partition = where.rpartition("#")
        doing = f"{task} was processing {stream!r} partition {partition} (a chunk from offset {first})"
        # The step names no system: every input topic of that name (one, unless clusters repeat it).
        inputs = [ss for ss in self._job.inputs if ss.stream == stream] if self._job is not None else []
        topics = {self._topic(ss) for ss in inputs}
        written = 0
        for url, name in topics:
            log = broker(url)
            written += sum(log.watermarks(name, p)[1] for p in range(log.partitions(name) or 0))
        fed = sum(len(i.items) for i in self._inputs if i.topic in topics)
        if written > fed:  # more records there than the test fed: the job writes to a stream it reads
            doing += f" (the job also sends to {stream!r}: a task sending to its own input forever?"
            clusters = {url for url, _ in topics}
            shared = sorted(
                {s for s, url in self._urls.items() if url in clusters} - {ss.system for ss in inputs}
            )
            if shared:
                doing += (
                    f" Or to {stream!r} on system {', '.join(map(repr, shared))}, of the same cluster (equal "
                    "bootstrap.servers), where streams of one name are one topic"
                )
            doing += ")"
        return doing

    def _transactional_inputs(self, job: JobConfig) -> list[_Topic]:
        """The job's input topics it also writes in transactions (exactly-once sinks it reads back)."""
        if not job.exactly_once:
            return []
        sinks = {self._topic(ss) for ss in job.outputs if not job.intermediate(ss)}
        return list(dict.fromkeys(t for t in map(self._topic, job.inputs) if t in sinks))

    @staticmethod
    def _stable_offsets(topics: Sequence[_Topic]) -> list[int]:
        """Each partition's last stable offset (up to which a read_committed consumer reads)."""
        offsets: list[int] = []
        for url, stream in topics:
            log = broker(url)
            offsets += [log.watermarks(stream, p)[2] for p in range(log.partitions(stream) or 0)]
        return offsets

    def advance_time(self, ms: int, timeout: float = 30.0) -> TestResult:
        """Processes what is pending, then moves the job's clock `ms` forward and runs: due window and
        commit timers fire, then whatever they sent is processed."""
        self.run(timeout)
        self._clock.advance(ms / 1000)
        return self.run(timeout)

    def restart(self, keep_local_state: bool = False, crash: bool = False) -> TestRunner:
        """Stops the containers (gracefully with a final commit, or like kill -9 with `crash`; a job that
        failed is crashed already), so that the next `run()` starts them all again (those their tasks shut
        down too) as on a new host: local state is gone (unless kept), stores come back through their
        backends, and inputs resume at the checkpoints."""
        self._usable("restart()")
        self._stop_containers(crash or self._failure is not None)
        self._failure = None
        self._shut_down.clear()
        if not keep_local_state and self._job is not None:
            for base in {self._job.logged_store_dir, self._job.non_logged_store_dir}:
                shutil.rmtree(base, ignore_errors=True)
        return self

    def close(self) -> None:
        """Stops the containers (final commit, unless the job failed) and removes the state dir when the
        runner made it. Results stay readable (a store's from its changelog)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._stop_containers(crash=self._failure is not None)
        finally:
            self._finalizer()

    def __enter__(self) -> TestRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start_containers(self, deadline: float, timeout: float) -> list[RunLoop]:
        assert self._job is not None and self._model is not None
        unseeded = any(model.id not in self._seeded for model in self._model.containers)
        plan = self._seed_plan(self._job) if unseeded else {}
        for model in self._model.containers:
            if model.id in self._containers or model.id in self._shut_down:
                continue  # running, or shut down by its tasks until a restart()
            seed = partial(self._seed_tasks, plan) if plan and model.id not in self._seeded else None
            hooks = ContainerHooks(clock=self._clock, before_init=seed)
            container = Container(self._job, model, hooks=hooks)
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), container.stop)
            timer.start()
            try:
                loop = container.start()
            finally:
                timer.cancel()
            if loop is None:
                raise TestRunnerError(
                    f"container {model.id} did not finish starting (restoring its stores) within the "
                    f"timeout of {timeout} s"
                )
            if loop.stopping:
                # The timeout's stop came while the tasks' init() ran (it cannot interrupt a running call):
                # the loop would only stop. End the container as a stop does; the next run() starts it anew.
                self._seeded.add(model.id)
                container.finish()
                raise TestRunnerError(
                    f"container {model.id} did not finish starting within the timeout of {timeout} s: its "
                    "tasks' init() (or its stores' restore) was still running when it hit (a timeout is "
                    "checked between steps and cannot interrupt a running call); give run() a longer "
                    "timeout"
                )
            self._containers[model.id] = container
            self._task_metrics.update((ti.name, ti.context.metrics) for ti in container.tasks)
            self._seeded.add(model.id)
        self._crashed = False  # every store is restored: what a read shows is the restarted job's
        loops = [c.loop for c in self._containers.values()]
        return [loop for loop in loops if loop is not None]

    def _stop_containers(self, crash: bool) -> None:
        """Finishes (or crashes) every container; one that fails to finish is released and the others are
        crashed, then its error goes up."""
        containers = list(self._containers.values())
        self._containers.clear()
        error: BaseException | None = None
        for container in containers:
            if crash or error is not None:
                container.crash()
                self._crashed = True
                continue
            try:
                container.finish()
            except BaseException as e:  # the container released itself; the others must still go
                error = e
                self._crashed = True
        if error is not None:
            raise error

    # -- set-up ------------------------------------------------------------------------------------
    def _prepare(self) -> JobConfig:
        if self._job is not None:
            return self._job
        systems = self._systems()
        self._check_systems(systems)
        self._urls = self._cluster_urls(systems)
        for url in self._urls.values():
            self._open_cluster(url)
        config = self._job_config()
        if "task.inputs" not in config:
            raise TestRunnerError(
                "the job has no input: add_input(stream, messages) first, or set task.inputs in with_config"
            )
        job = JobConfig(Config(config))
        for name, init in self._stores.items():
            if name in job.adjunct_inputs and (init.initial or init.by_partition):
                stream = job.adjunct_inputs[name].stream
                raise TestRunnerError(
                    f"add_store({name!r}, initial=...): {name!r} is an adjunct store, filled from stream "
                    f"{stream!r} (stores.{name}.adstore.input); give its contents as add_input({stream!r}, "
                    "...)"
                )
        self._check_consumed(job)
        self._named = self._named_streams(job)
        self._partitions = self._declared_counts(job)
        self._ensure_topics(self._job_streams(job))
        self._model = JobCoordinator(job).prepare()
        self._job = job
        return job

    def _ensure_topics(self, partitions: Mapping[_Topic, int]) -> None:
        by_cluster: dict[str, dict[str, int]] = {}
        for (url, stream), count in partitions.items():
            by_cluster.setdefault(url, {})[stream] = count
        for url, streams in by_cluster.items():
            admin = KafkaAdmin({"bootstrap.servers": url})
            try:
                for stream, count in streams.items():
                    admin.ensure_topic(stream, count)
            finally:
                admin.close()

    # -- clusters ----------------------------------------------------------------------------------
    def _systems(self) -> set[str]:
        """The job's systems: those the config defines, and the default system."""
        return {k.split(".")[1] for k in self._config if k.startswith("systems.")} | {self._default_system()}

    def _cluster_urls(self, systems: Iterable[str]) -> dict[str, str]:
        """System -> the in-memory URL of its cluster: the default system's cluster keeps the runner's
        first URL, each other cluster gets one of its own."""
        cluster = {system: self._cluster_id(system) for system in systems}
        urls = {self._cluster_id(self._default_system()): self._bootstrap}
        for system in sorted(cluster):
            urls.setdefault(cluster[system], f"{self._bootstrap}-{len(urls)}")
        return {system: urls[cluster[system]] for system in cluster}

    def _cluster_id(self, system: str) -> tuple[str, ...]:
        """What tells the system's cluster apart: its bootstrap servers (in any order), as the runtime
        reads them; a system without any is a cluster of its own."""
        prefix = f"systems.{system}."
        keys = ("bootstrap.servers", "consumer.bootstrap.servers", "producer.bootstrap.servers")
        servers = next(
            (str(self._config[prefix + k]) for k in keys if _is_set(self._config.get(prefix + k))), ""
        )
        if not servers and self._config.get(prefix + "samza.factory") == "inmemory":
            servers = f"inmemory://{system}"  # the in-memory system's default URL
        if not servers:
            return ("system", system)
        return ("servers", *sorted({host.strip() for host in servers.split(",") if host.strip()}))

    def _open_cluster(self, url: str) -> None:
        """Sets up a cluster's in-memory system for the test (once), to go with the runner."""
        if url in self._opened:
            return
        self._opened.add(url)
        # Its in-memory system goes once neither the runner nor a result of it is left (results read from
        # it, after close() too): else every runner of a test session would keep all its records.
        weakref.finalize(self, forget, url)
        # Like a Kafka broker's default (auto.create.topics.enable), a stream the task sends to without
        # the test declaring it is made with one partition: a result names the streams the job wrote.
        auto_create_topics(url, partitions=1)
        # Records sent without a timestamp (inputs, outputs) take the job's clock: the same in every run.
        use_clock(url, self._clock)

    def _topic(self, ss: SystemStream) -> _Topic:
        """The topic of a stream of the job: streams of one name on systems of one cluster share it."""
        return (self._urls[ss.system], ss.stream)

    def _resolve(
        self, job: JobConfig, stream: str, system: str | None, among: Iterable[SystemStream], call: str
    ) -> SystemStream:
        """The stream a call of the test names: on `system` (one of the job's), else the one of that name
        among `among` (the job's inputs, outputs...), else the stream on the default system."""
        if system is not None:
            if system not in self._urls:
                raise TestRunnerError(self._unknown_system(call, stream, system, self._urls))
            return SystemStream(system, stream)
        found = [ss for ss in among if ss.stream == stream]
        if len({self._urls[ss.system] for ss in found}) > 1:
            systems = sorted({ss.system for ss in found})
            raise TestRunnerError(
                f"{call}({stream!r}): the job has stream {stream!r} on systems "
                f"{' and '.join(map(repr, systems))}, of different clusters (bootstrap.servers), where they "
                f"are different streams; say which with system=, e.g. {call}({stream!r}, ..., "
                f"system={systems[0]!r})"
            )
        return found[0] if found else SystemStream(self._default_system(), stream)

    def _input_stream(self, job: JobConfig, stream: str, system: str | None) -> SystemStream:
        return self._resolve(job, stream, system, job.inputs, "add_input")

    @staticmethod
    def _unknown_system(call: str, stream: str, system: str, systems: Iterable[str]) -> str:
        return (
            f"{call}({stream!r}, system={system!r}): the job has no system {system!r} (its systems: "
            f"{', '.join(sorted(systems))}); name one of them, or define systems.{system}.samza.factory in "
            "with_config"
        )

    def _check_systems(self, systems: set[str]) -> None:
        """Raises naming the first add_input or add_output whose system= is none of the job's; such inputs
        are dropped and such outputs forgotten first, so the runner stays usable once the test fixes it."""
        wrong: list[str] = []
        for index, feed in enumerate(self._inputs):
            if index not in self._fed and feed.system is not None and feed.system not in systems:
                unknown = self._unknown_system("add_input", feed.stream, feed.system, systems)
                wrong.append(unknown + "; nothing of it was sent (dropped)")
                self._drop(index)
        for system, stream in [key for key in self._outputs if key[0] is not None and key[0] not in systems]:
            wrong.append(self._unknown_system("add_output", stream, str(system), systems) + "; it is dropped")
            del self._outputs[system, stream]
        if wrong:
            raise TestRunnerError(wrong[0])

    def _drop(self, index: int) -> None:
        """Empties an input not yet fed: none of it is ever sent, nor checked again."""
        feed = self._inputs[index]
        self._inputs[index] = _Input(feed.stream, feed.partitions, [], feed.raw, feed.system)
        self._fed.add(index)

    def _named_streams(self, job: JobConfig) -> tuple[SystemStream, ...]:
        """The job's streams a result may name without a system: inputs, outputs, changelogs, dead letters."""
        logs = changelogs(job, store_specs(job.config)).values()
        dead = [job.dlq_stream(ss.system) for ss in job.inputs] if job.deserialization_policy == "dlq" else []
        return tuple(dict.fromkeys((*job.inputs, *job.outputs, *logs, *dead)))

    def _declared_counts(self, job: JobConfig) -> dict[_Topic, int]:
        """Topic -> the count the test's add_input and add_output gave it; two of them naming one topic
        (one stream, or streams of one name on systems of one cluster) with other counts are an error."""
        declared = [
            (self._input_stream(job, feed.stream, feed.system), feed.partitions, "add_input")
            for index, feed in enumerate(self._inputs)
            if index not in self._fed
        ]
        declared += [
            (self._resolve(job, stream, system, job.outputs, "add_output"), count, "add_output")
            for (system, stream), count in self._outputs.items()
        ]
        counts: dict[_Topic, tuple[int, str]] = {}
        for ss, count, call in declared:
            known, by = counts.setdefault(self._topic(ss), (count, call))
            if known != count:
                raise TestRunnerError(
                    f"{call}({ss.stream!r}, partitions={count}): {ss} is the topic that {by}({ss.stream!r}) "
                    f"gave {known} partition(s) (one stream, or one name on systems of one cluster); give "
                    "both the same count"
                )
        return {topic: count for topic, (count, _) in counts.items()}

    def _job_streams(self, job: JobConfig) -> dict[_Topic, int]:
        """Topic -> partition count of every stream the job reads or writes, so a production config's
        streams that the test does not feed exist (empty), as on its cluster. A stream the test declared
        keeps its count; an unfed input gets the highest count among the test's inputs (co-partitioned
        with them, as a join's streams are), at least one past its highest broadcast partition; an
        undeclared output gets one partition."""
        live = [feed for index, feed in enumerate(self._inputs) if index not in self._fed]
        fed = {self._topic(self._input_stream(job, feed.stream, feed.system)) for feed in live}
        default = max((self._partitions[topic] for topic in fed), default=1)
        broadcast: dict[_Topic, int] = {}
        for ssp in job.broadcast:
            topic = self._topic(ssp.system_stream)
            broadcast[topic] = max(broadcast.get(topic, 1), ssp.partition + 1)
        inputs = [self._topic(ss) for ss in job.inputs]
        outputs = [self._topic(ss) for ss in job.outputs]
        for topic in inputs:
            self._partitions.setdefault(topic, max(default, broadcast.get(topic, 1)))
        for topic in outputs:
            self._partitions.setdefault(topic, 1)
        return {topic: self._partitions[topic] for topic in (*inputs, *outputs)}

    def _check_consumed(self, job: JobConfig) -> None:
        """Raises naming the first input of a stream the job does not consume (or a name it has on two
        clusters, without system=); such inputs are dropped first, so the runner stays usable once the test
        fixes the name."""
        consumed = {self._topic(ss) for ss in job.inputs}
        wrong: list[str] = []
        for index, feed in enumerate(self._inputs):
            if index in self._fed:
                continue
            try:
                if self._topic(self._input_stream(job, feed.stream, feed.system)) in consumed:
                    continue
                wrong.append(self._not_consumed(job, feed.stream, feed.system))
            except TestRunnerError as e:
                wrong.append(str(e))
            self._drop(index)
        if wrong:
            raise TestRunnerError(wrong[0] + "; nothing of it was sent (dropped)")

    @staticmethod
    def _not_consumed(job: JobConfig, stream: str, system: str | None) -> str:
        # Stream names alone while they tell the inputs apart.
        by_name = system is None and len({ss.system for ss in job.inputs}) == 1
        inputs = sorted({ss.stream if by_name else str(ss) for ss in job.inputs})
        call = repr(stream) if system is None else f"{stream!r}, system={system!r}"
        where = "" if system is None else f" on system {system!r}"
        return (
            f"add_input({call}): the job does not consume stream {stream!r}{where} (its inputs: "
            f"{', '.join(inputs)}); check the name, or add it to task.inputs"
        )

    @property
    def _bootstrap(self) -> str:
        """The in-memory URL of the default system's cluster."""
        return f"inmemory://{self._namespace}"

    def _default_system(self) -> str:
        """The system of streams the test names without one: the config's only system, else `kafka`."""
        systems = {k.split(".")[1] for k in self._config if k.startswith("systems.") and k.count(".") >= 2}
        return systems.pop() if len(systems) == 1 else SYSTEM

    def _job_config(self) -> dict[str, str]:
        # Named after the task class, with '-' for '_' (a factory's class is registered as `<name>_<n>`):
        # the start warns of a job.name with '_', which the test never set. The test's job.name is as given.
        name = self._task.rsplit(":", 1)[-1].rsplit(".", 1)[-1].lower().replace("_", "-").strip("-") or "job"
        default = self._default_system()
        config: dict[str, str] = {"job.name": name, "task.class": self._task, **self._config}
        # The test's state lives in the runner's dir, never in a production config's paths; blobs outside
        # the stores' dirs (a restart wipes those), and always in a local dir (never a real bucket).
        for key in [k for k in config if k.startswith(("blobstore.s3.", "metrics.prometheus."))]:
            del config[key]  # nor does a test serve metrics on a production port
        config["job.logged.store.base.dir"] = str(self._state_dir / "state")
        config["job.non-logged.store.base.dir"] = str(self._state_dir / "state")
        config["blobstore.local.dir"] = str(self._state_dir / "blobstore")
        self._list_streams(config, default)
        for system, url in self._urls.items():
            config[f"systems.{system}.samza.factory"] = "inmemory"
            config[f"systems.{system}.bootstrap.servers"] = url
            config.setdefault(f"systems.{system}.samza.key.serde", DEFAULT_SERDE)
            config.setdefault(f"systems.{system}.samza.msg.serde", DEFAULT_SERDE)
            config[f"systems.{system}.samza.offset.default"] = "oldest"
            for key in [k for k in config if k.startswith(f"systems.{system}.")]:
                if key == f"systems.{system}.producer.partitioner":
                    # Kept: a partition_key send is refused under a non-murmur2 one, as `samsa run` does.
                    continue
                if key.startswith((f"systems.{system}.consumer.", f"systems.{system}.producer.")):
                    del config[key]  # librdkafka settings mean nothing to the in-memory system
                elif key.endswith(".samza.offset.default"):
                    # The test's inputs are there before the job starts: a stream read from its end would
                    # process none of them.
                    config[key] = "oldest"
        for store in self._stores:
            prefix = f"stores.{store}."
            if _is_set(config.get(prefix + "adstore.input")):
                continue  # filled from its stream; no changelog
            config.setdefault(prefix + "factory", "inmemory")
            config.setdefault(prefix + "key.serde", DEFAULT_SERDE)
            config.setdefault(prefix + "msg.serde", DEFAULT_SERDE)
            if prefix + "changelog" in config:
                continue
            # A changelog where one would back the store up, by its backends as the runtime resolves them
            # (its own backup.factories, else the job's or their alias, else the changelog): never beside a
            # blob store the config chose, where it would stay empty and read as the store's contents.
            changelog = f"{default}.{name}-{store}-changelog"
            try:
                spec = replace(store_specs(config)[store], changelog=changelog)
                backup = store_backends(config, spec).backup
            except StoreConfigError:
                continue  # the job's start reports it, naming the key
            if CHANGELOG in backup:
                config[prefix + "changelog"] = changelog
        return config

    def _list_streams(self, config: dict[str, str], default: str) -> None:
        """task.inputs, unless the config sets it: the streams given to add_input; task.outputs gets those
        given to add_output (an exactly-once job needs every stream it sends to listed)."""
        live = [feed for index, feed in enumerate(self._inputs) if index not in self._fed]
        if "task.inputs" not in config:
            # An adjunct store's stream is read into its store, never by process(): not a task input.
            adjunct = {v.strip() for k, v in config.items() if k.endswith(".adstore.input") and _is_set(v)}
            adjunct_names = {a.split(".", 1)[-1] for a in adjunct}
            streams = [
                f"{feed.system or default}.{feed.stream}"
                for feed in live
                if (
                    f"{feed.system}.{feed.stream}" not in adjunct
                    if feed.system
                    else feed.stream not in adjunct_names
                )
            ]
            if streams:
                config["task.inputs"] = ",".join(dict.fromkeys(streams))
        listed = [s.strip() for s in str(config.get("task.outputs") or "").split(",") if s.strip()]
        named = {s.partition(".")[2] for s in listed}
        added = [
            f"{system or default}.{stream}"
            for system, stream in self._outputs
            if (f"{system}.{stream}" not in listed if system else stream not in named)
        ]
        if added:
            config["task.outputs"] = ",".join(dict.fromkeys([*listed, *added]))

    def _serdes(self, job: JobConfig) -> SerdeRegistry:
        return SerdeRegistry(job.config)

    def _stream_serdes(self, job: JobConfig, ss: SystemStream) -> tuple[Serde[Any], Serde[Any]]:
        settings = job.stream(ss)
        registry = self._serdes(job)
        return (
            registry.get(settings.key_serde, ss.stream, is_key=True),
            registry.get(settings.msg_serde, ss.stream, is_key=False),
        )

    def _feed(self, job: JobConfig) -> None:
        pending = [(index, feed) for index, feed in enumerate(self._inputs) if index not in self._fed]
        if not pending:
            return
        self._check_consumed(job)
        stream_of = {index: self._input_stream(job, feed.stream, feed.system) for index, feed in pending}
        self._ensure_topics({self._topic(stream_of[index]): feed.partitions for index, feed in pending})
        # Every item is serialized before any is sent: a bad one fails the run with nothing fed twice.
        batches: dict[_Topic, dict[int, list[_Fed]]] = {}
        for index, feed in pending:
            ss = stream_of[index]
            topic = self._topic(ss)
            parts = batches.setdefault(topic, {})  # partition -> its records
            # A record without a timestamp gets the clock's time of the feed (time stands still during it,
            # so every such record of a producer sending them one by one would get that same time).
            now = now_ms(topic[0])
            key_serde, msg_serde = (BytesSerde(), BytesSerde()) if feed.raw else self._stream_serdes(job, ss)
            # The serdes' C-level paths when they have them; a failure is explained by the serde's own.
            key_bytes, value_bytes = fast_to_bytes(key_serde), fast_to_bytes(msg_serde)
            placed: dict[bytes, int] = {}  # test inputs repeat their keys: hash each once
            # Built-in serdes are pure functions: a bare string item repeated (a test's words, ids) is
            # serialized and placed once, its record made from the first one's bytes after that.
            pure = type(key_serde) in _PURE_SERDES and type(msg_serde) in _PURE_SERDES
            done: dict[str, tuple[bytes | None, bytes | None, list[_Fed]]] = {}
            for n, (item, given) in enumerate(feed.items):
                if pure and type(item) is str and given is None:
                    hit = done.get(item)
                    if hit is not None:
                        hit[2].append((hit[0], hit[1], now, None))
                        continue
                headers: Headers | None = None
                timestamp = None
                if isinstance(item, tuple):  # (key, value)
                    (key_obj, value_obj), partition = item, given
                elif isinstance(item, Message):
                    m = self._message(item, given)
                    key_obj, value_obj, partition = m.key, m.value, m.partition
                    headers, timestamp = list(m.headers) or None, m.timestamp
                else:  # a bare value is its own key, in a canonical form: equal items, equal key bytes
                    key_obj = _canonical(item) if isinstance(item, (dict, list)) else item
                    value_obj, partition = item, given
                try:
                    key = None if key_obj is None else key_bytes(key_obj)
                    value = None if value_obj is None else value_bytes(value_obj)
                except Exception as fast_error:
                    e = _serde_error(key_serde, key_obj) or _serde_error(msg_serde, value_obj) or fast_error
                    # Dropped: nothing sent.
                    self._inputs[index] = _Input(feed.stream, feed.partitions, [], feed.raw, feed.system)
                    fix = (
                        "add_input(..., raw=True) sends keys and values of bytes (or None) as they are"
                        if feed.raw
                        else "check the item, or the stream's serde in the config (systems.<system>.streams."
                        "<stream>.samza.key.serde / msg.serde)"
                    )
                    raise TestRunnerError(
                        f"add_input({feed.stream!r}): item {n} (key {key_obj!r}, value {value_obj!r}) does "
                        f"not serialize: {e}; {fix}. Nothing of that add_input was sent; it is dropped"
                    ) from e
                if partition is None:
                    if key is None:
                        partition = 0
                    else:
                        partition = placed.get(key)
                        if partition is None:
                            partition = placed[key] = partition_for(key, feed.partitions)
                batch = parts.get(partition)
                if batch is None:
                    batch = parts[partition] = []
                batch.append((key, value, timestamp or now, headers))
                if pure and type(item) is str and given is None:
                    done[item] = (key, value, batch)
        # Each partition's records in one append, in the order given, as a producer's batch goes.
        for (url, stream), parts in batches.items():
            log = broker(url)
            for partition, batch in parts.items():
                log.append_batch(stream, partition, batch)
        for index, feed in pending:
            feed.topic = self._topic(stream_of[index])
        self._fed.update(index for index, _ in pending)

    @staticmethod
    def _seed_tasks(plan: Mapping[str, list[tuple[str, Any, Any]]], tasks: Sequence[TaskInstance]) -> None:
        """add_store's initial contents, put into a container's task stores at its first start before the
        tasks' init(); its start-up commit keeps them (a restart restores them through the store's
        backend). An entry the store cannot take fails that start: nothing of it is committed."""
        for ti in tasks:
            for store, key, value in plan.get(ti.name, ()):
                target = ti.storage.stores[store]
                try:
                    target.put(key, value)
                    target.flush()  # a cached store serializes here: the error names the entry
                except Exception as e:
                    raise TestRunnerError(
                        f"add_store({store!r}): initial entry {key!r}: {value!r} cannot go into the store: "
                        f"{e}; check it against stores.{store}.key.serde / msg.serde"
                    ) from e

    def _seed_plan(self, job: JobConfig) -> dict[str, list[tuple[str, Any, Any]]]:
        """Task name -> (store, key, value) of the initial contents it gets."""
        assert self._model is not None
        plan: dict[str, list[tuple[str, Any, Any]]] = {}
        seeded = [init for init in self._stores.values() if init.initial or init.by_partition]
        if not seeded:
            return plan
        other = job.broadcast_streams | set(job.adjunct_inputs.values())
        grouped = [ss for ss in job.inputs if ss not in other]
        tasks = self._model.tasks
        primary = grouped[0] if grouped else None
        task_of: dict[int, str] = {}
        for t in tasks:
            for ssp in t.partitions:
                if primary is not None and ssp.system_stream == primary:
                    task_of[ssp.partition] = t.name
        for init in seeded:
            if init.name not in store_specs(job.config):
                raise TestRunnerError(
                    f"add_store({init.name!r}): the job has no store {init.name!r}; define "
                    f"stores.{init.name}.factory (or check the name)"
                )
            for partition, entries in sorted(init.by_partition.items()):
                if partition not in task_of:
                    raise TestRunnerError(
                        f"add_store({init.name!r}, by_partition=...): no task reads partition {partition} "
                        f"of the job's input {primary.stream if primary else '(none)'!r} (partitions: "
                        f"{', '.join(map(str, sorted(task_of))) or 'none'})"
                    )
                plan.setdefault(task_of[partition], []).extend((init.name, k, v) for k, v in entries.items())
            if not init.initial:
                continue
            if primary is None or len(tasks) == 1:
                plan.setdefault(tasks[0].name, []).extend((init.name, k, v) for k, v in init.initial.items())
                continue
            key_serde, _ = self._stream_serdes(job, primary)
            count = len(task_of)
            for key, value in init.initial.items():
                try:
                    raw = key_serde.to_bytes(key)
                except Exception as e:
                    raise TestRunnerError(
                        f"add_store({init.name!r}): initial key {key!r} goes where input {primary.stream!r} "
                        f"sends that key, but the stream's key serde cannot serialize it ({e}); give each "
                        f"task's entries with add_store({init.name!r}, by_partition={{partition: {{key: "
                        "value}})"
                    ) from e
                plan.setdefault(task_of[partition_for(raw, count)], []).append((init.name, key, value))
        return plan

    # -- reading results ---------------------------------------------------------------------------
    def read_stream(
        self, stream: str, partition: int | None = None, raw: bool = False, system: str | None = None
    ) -> list[Message]:
        job = self._prepare()
        ss = self._resolve(job, stream, system, self._named, "result.messages")
        topic = self._topic(ss)
        count = self._stream_partitions(ss)
        if partition is not None and not 0 <= partition < count:
            raise TestRunnerError(f"stream {stream!r} has {count} partition(s), no partition {partition}")
        # A dead-letter stream holds the records that did not deserialize, as they came: bytes.
        raw = raw or topic in self._dead_letter_topics(job)
        key_serde, msg_serde = (BytesSerde(), BytesSerde()) if raw else self._stream_serdes(job, ss)
        records: Iterable[Record] = self._read_records(topic, partition, count)
        if job.exactly_once and not raw:
            records = self._read_by_samsa(topic, count, map(as_message, records))
        with _collector_paused():
            return _messages(stream, records, key_serde, msg_serde)

    def _read_by_samsa(
        self, topic: _Topic, count: int, records: Iterable[InMemoryMessage]
    ) -> Iterator[InMemoryMessage]:
        """The records of an exactly-once job's stream that a Samsa reader takes: neither its checkpoint
        markers and restore commands, nor the records of versions a restore command voided (docs/
        exactly-once.md: replayed after a crash, in a new generation)."""
        # A restore command voids its producer's older records wherever they lie, before it and on every
        # partition (a reading task drops them, or rewinds the work it did with them): know every fence
        # first. A changelog restore applies the same fences to tagged writes.
        reader = ChangelogReader()
        reader.select(
            [m for m in self._read_raw(topic, None, count) if type(classify_message(m)) is RestoreCommand]
        )
        for m in records:
            if reader.select([m])[0]:  # [m] (kept) or [] (a control record, a voided version)
                yield m

    def _dead_letter_topics(self, job: JobConfig) -> set[_Topic]:
        """The topics the job sends the input records that do not deserialize to."""
        if job.deserialization_policy != "dlq":
            return set()
        return {self._topic(job.dlq_stream(ss.system)) for ss in job.inputs}

    def _stream_partitions(self, ss: SystemStream) -> int:
        url, stream = self._topic(ss)
        topics = broker(url).partition_counts()
        if stream in topics:
            return topics[stream]
        where = f" on system {ss.system!r}" if len(set(self._urls.values())) > 1 else ""
        # A stream the task sent to undeclared on another cluster is there, not on the default system.
        elsewhere = sorted(
            s for s, u in self._urls.items() if u != url and stream in broker(u).partition_counts()
        )
        hint = (
            f"; {stream!r} is on system {elsewhere[0]!r}: pass system={elsewhere[0]!r}" if elsewhere else ""
        )
        raise TestRunnerError(
            f"no stream {stream!r}{where} in this test: the job wrote none and the test declared none; "
            f"streams{where}: {', '.join(sorted(topics)) or 'none'}{hint}"
        )

    def read_store(self, store: str) -> dict[Any, Any]:
        """The store's entries over all tasks; a key held by two tasks is an error (see store_by_task)."""
        merged: dict[Any, Any] = {}
        owner: dict[Any, str] = {}
        # Each container holds a copy of a broadcast store, read from the whole stream: equal copies show
        # once.
        copies = self._broadcast_store(self._prepare(), store)
        for task, contents in self._store_contents(store, shared_once=True).items():
            for key, value in contents.items():
                if key in owner and not (copies and merged[key] == value):
                    raise TestRunnerError(
                        f"store {store!r}: key {key!r} is in the stores of tasks {owner[key]!r} and "
                        f"{task!r}, so one dict cannot show it; read result.store_by_task({store!r})"
                    )
                owner[key] = task
                merged[key] = value
        return merged

    def read_store_by_task(self, store: str) -> dict[str, dict[Any, Any]]:
        return self._store_contents(store, shared_once=False)

    def read_metrics(self, task: str | None) -> dict[str, float | TimerSample]:
        """One task's metrics, or every task's added up (see TestResult.metrics)."""
        if task is not None:
            found = self._task_metrics.get(task)
            if found is None:
                known = ", ".join(map(repr, self._task_metrics)) or "none yet: call run() first"
                raise TestRunnerError(f"no task {task!r} ran in this test (tasks: {known})")
            return found.read()
        total: dict[str, float | TimerSample] = {}
        for name, metrics in self._task_metrics.items():
            for key, value in metrics.read().items():
                before = total.get(key)
                if before is None:
                    total[key] = value if not isinstance(value, TimerSample) else replace(value, labels={})
                elif isinstance(before, TimerSample) and isinstance(value, TimerSample):
                    total[key] = TimerSample(
                        {},
                        before.count + value.count,
                        before.sum_seconds + value.sum_seconds,
                        max(before.max_seconds, value.max_seconds),
                    )
                elif isinstance(before, TimerSample) or isinstance(value, TimerSample):
                    raise TestRunnerError(
                        f"metric {key!r} is a timer in one task and a number in another (task {name!r}), "
                        "so they cannot be added up: read result.metrics(task=...) of each"
                    )
                else:
                    total[key] = before + value
        return total

    def _store_contents(self, store: str, shared_once: bool) -> dict[str, dict[Any, Any]]:
        """Task name -> the store's entries: read from the running tasks' stores, or (the containers
        stopped: closed, restarted or shut down) from its changelog. The store the tasks of a container
        share (a broadcast adjunct store) shows once per container with `shared_once`."""
        job = self._prepare()
        specs = store_specs(job.config)
        if store not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise TestRunnerError(f"no store {store!r} in the job (stores: {known})")
        tasks = [ti for container in self._containers.values() for ti in container.tasks]
        if not tasks and self._failure is not None:
            # Its changelog holds writes after the last commit that a restart trims: not what a restart sees.
            raise TestRunnerError(
                f"store {store!r}: the job failed ({self._failure!r}), so its stores are what a restart "
                "restores: call restart() and run() before reading it"
            )
        if not tasks and self._crashed:
            # As after a failure: a crash restart restores the last commit's state, undoing the rest.
            raise TestRunnerError(
                f"store {store!r}: the job's containers were killed (restart(crash=True), or a failed run), "
                "so its stores are what the next start restores from their last commit (the changelog also "
                "holds the writes after it, which that start undoes): call run() before reading it, or read "
                "it before the crash"
            )
        if not tasks:
            return self._store_from_changelog(job, store)
        out: dict[str, dict[Any, Any]] = {}
        for container in self._containers.values():
            for ti in container.tasks:
                found = ti.storage.stores.get(store)
                if found is None:
                    continue
                out[ti.name] = {_hashable(store, key): value for key, value in found.all()}
                if shared_once and self._broadcast_store(job, store):
                    break  # every task of the container reads its one store (each a read-only view of it)
        if self._shut_down and not self._broadcast_store(job, store):
            # The containers its tasks shut down ended while others run on: their tasks' entries are in the
            # changelog (a broadcast store's copy in a running container is the same).
            assert self._model is not None
            ended = {t.name for m in self._model.containers if m.id in self._shut_down for t in m.tasks}
            if store not in changelogs(job, specs):
                raise TestRunnerError(
                    f"store {store!r} has no changelog, so the entries of the tasks of container(s) "
                    f"{', '.join(sorted(self._shut_down))}, which their tasks shut down, are gone from the "
                    f"test: read result.store({store!r}) before, or give it stores.{store}.changelog"
                )
            logged = self._store_from_changelog(job, store)
            out.update((task, entries) for task, entries in logged.items() if task in ended)
        return out

    @staticmethod
    def _broadcast_store(job: JobConfig, store: str) -> bool:
        """Whether the store is a broadcast adjunct store: one per container, which all its tasks read."""
        return job.adjunct_inputs.get(store) in job.broadcast_streams

    def _store_from_changelog(self, job: JobConfig, store: str) -> dict[str, dict[Any, Any]]:
        specs = store_specs(job.config)
        logs = changelogs(job, specs)
        if store not in logs:
            raise TestRunnerError(
                f"store {store!r} has no changelog, so once the job's containers stopped (closed, restarted, "
                f"failed or shut down) its contents are gone from the test: read result.store({store!r}) "
                f"before, or give it stores.{store}.changelog"
            )
        assert self._model is not None
        task_of = {changelog_partition(t): t.name for t in self._model.tasks}
        registry = self._serdes(job)
        key_serde, msg_serde = registry.get(specs[store].key_serde), registry.get(specs[store].msg_serde)
        latest: dict[int, dict[bytes, bytes | None]] = {}
        readers: dict[int, ChangelogReader] = {}
        for m in self._read_raw(self._topic(logs[store]), None, self._stream_partitions(logs[store])):
            applied: list[RawMessage] = [m]
            if job.exactly_once:  # commit and abort records, and the writes a restart voided, are no entries
                applied, _ = readers.setdefault(m.partition(), ChangelogReader()).select([m])
            for kept in applied:
                if (key := kept.key()) is not None:
                    latest.setdefault(kept.partition(), {})[key] = kept.value()
        return {
            task_of.get(p, f"Partition {p}"): {
                _hashable(store, key_serde.from_bytes(k)): msg_serde.from_bytes(v)
                for k, v in entries.items()
                if v is not None
            }
            for p, entries in sorted(latest.items())
        }

    def _read_raw(self, topic: _Topic, partition: int | None, count: int) -> Iterator[InMemoryMessage]:
        """Every committed record of the topic (or one partition) as a message, as `_read_records`."""
        return map(as_message, self._read_records(topic, partition, count))

    @staticmethod
    def _read_records(topic: _Topic, partition: int | None, count: int) -> Iterator[Record]:
        """Every committed record of the topic (or one partition), in partition then offset order, as a
        read_committed consumer reads them; a batch at a time, so a large output is never held twice (raw
        and converted)."""
        partitions = range(count) if partition is None else [partition]
        url, name = topic
        log = broker(url)
        for p in partitions:
            # A read_committed consumer stops at the last stable offset (the first record of a transaction
            # still open: a failed, timed-out or crashed exactly-once job's): read to it, never past.
            offset, _, stable = log.watermarks(name, p)
            while offset < stable:
                # Transaction markers and aborted records take offsets but are never delivered: read to the
                # position after them, not a count.
                records, after = log.records(name, p, offset, min(_READ_BATCH, stable - offset), True)
                if after <= offset:
                    break  # nothing readable there any more (the topic was recreated meanwhile)
                offset = after
                yield from records


def _is_set(value: object) -> bool:
    """Whether a config value sets its key: blank means unset, as everywhere in Samsa's config."""
    return value is not None and bool(str(value).strip())


def _serde_error(serde: Serde[Any], obj: Any) -> Exception | None:
    """The serde's own error serializing `obj` (after its fast path failed), or None if it takes it."""
    if obj is None:
        return None
    try:
        serde.to_bytes(obj)
    except Exception as e:
        return e
    return None


def _messages(
    stream: str, records: Iterable[Record], key_serde: Serde[Any], msg_serde: Serde[Any]
) -> list[Message]:
    """The records as a test reads them: keys and values deserialized."""
    key_of, value_of = fast_from_bytes(key_serde), fast_from_bytes(msg_serde)
    out: list[Message] = []
    new = object.__new__
    # The records' fields straight from the broker's tuples (message.Record), no accessor calls.
    for _, part, offset, key, value, (_, timestamp), headers, _, _ in records:
        try:
            value_obj = None if value is None else value_of(value)
            key_obj = None if key is None else key_of(key)
        except Exception as fast_error:
            # The serde's own error, not its fast path's terse one.
            e = _deserde_error(msg_serde, value) or _deserde_error(key_serde, key) or fast_error
            raise TestRunnerError(
                f"stream {stream!r} partition {part} offset {offset}: the record does not "
                f"deserialize with the stream's serdes: {e}; check systems.<system>.streams.{stream}."
                f"samza.key.serde / msg.serde, or read its bytes with result.messages({stream!r}, "
                "raw=True)"
            ) from e
        # Message(...) without its frozen __init__ (one object.__setattr__ per field): a third of reading
        # a large output back. The same fields, so the same Message (tests check it equals one built).
        m = new(Message)
        m.__dict__.update(
            value=value_obj,
            key=key_obj,
            partition=part,
            headers=headers or (),
            timestamp=timestamp,
            offset=offset,
        )
        out.append(m)
    return out


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off meanwhile (as it was after): for making many objects that all live
    on, where each of its full passes, triggered by their number, would walk the whole heap for nothing."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _deserde_error(serde: Serde[Any], data: bytes | None) -> Exception | None:
    """The serde's own error deserializing `data` (after its fast path failed), or None if it takes it."""
    if data is None:
        return None
    try:
        serde.from_bytes(data)
    except Exception as e:
        return e
    return None


def _canonical(item: Any) -> Any:
    """`item` with every dict's keys in sorted order (sorted by repr when they do not compare)."""
    # Equal dicts built in another order serialize to other bytes (JSON keeps insertion order): as a
    # bare item's key they would go to other partitions, though the item is the same.
    if isinstance(item, dict):
        try:
            keys = sorted(item)
        except TypeError:
            keys = sorted(item, key=repr)
        return {key: _canonical(item[key]) for key in keys}
    if type(item) in (list, tuple):
        return type(item)(_canonical(v) for v in item)
    return item


def _hashable(store: str, key: Any) -> Any:
    """A store key as a dict key: JSON lists (composite keys) become tuples."""
    if isinstance(key, list):
        return tuple(_hashable(store, k) for k in key)
    try:
        hash(key)
    except TypeError:
        raise TestRunnerError(
            f"store {store!r}: key {key!r} cannot be a dict key; read its entries with the store's own all()"
        ) from None
    return key
