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

import logging
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer, RawMessage
from samsa.kafka.inmemory import forget
from samsa.kafka.partitioner import partition_for
from samsa.runtime.classpath import register_object
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, ContainerHooks
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.job_model import JobModel
from samsa.runtime.run_loop import RunLoop
from samsa.runtime.state import changelogs
from samsa.serde.base import Serde
from samsa.serde.registry import SerdeRegistry
from samsa.stores.factory import StoreSpec, store_specs
from samsa.streams import SystemStream
from samsa.testing.exceptions import TestRunnerError

log = logging.getLogger(__name__)

SYSTEM = "kafka"
# Serde of streams and stores the test's config leaves unset: JSON takes str, int, float, list and dict.
DEFAULT_SERDE = "json"
_READ_BATCH = 10_000  # records per consume when reading results back


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


@dataclass
class _StoreInit:
    name: str
    initial: dict[Any, Any] = field(default_factory=dict)


class TestResult:
    """What a run left: the output streams' messages and the stores' contents."""

    __test__ = False  # not a pytest test class

    def __init__(self, runner: TestRunner) -> None:
        self._runner = runner

    def messages(self, stream: str, partition: int | None = None) -> list[Message]:
        """Every message of `stream` (of one partition, or all in partition order), deserialized."""
        return self._runner.read_stream(stream, partition)

    def output(self, stream: str, partition: int | None = None) -> list[Any]:
        """The values sent to `stream` (of one partition, or all in partition order)."""
        return [m.value for m in self.messages(stream, partition)]

    def output_by_partition(self, stream: str) -> dict[int, list[Any]]:
        """Partition -> the values sent to it."""
        out: dict[int, list[Any]] = {}
        for m in self.messages(stream):
            assert m.partition is not None
            out.setdefault(m.partition, []).append(m.value)
        return out

    def store(self, name: str) -> dict[Any, Any]:
        """The store's contents over all tasks after the run (read from its changelog)."""
        return self._runner.read_store(name)


class TestRunner:
    """Builds a job from a task class and a config, feeds it inputs on the in-memory system, runs its
    containers in this process until every input is processed, and returns a `TestResult`."""

    __test__ = False  # not a pytest test class

    def __init__(self, task: str, state_dir: Path | None = None) -> None:
        self._task = task
        self._config: dict[str, str] = {}
        self._inputs: list[_Input] = []
        self._outputs: dict[str, int] = {}
        self._stores: dict[str, _StoreInit] = {}
        self._namespace = f"testrunner-{uuid.uuid4().hex[:12]}"
        self._own_dir = state_dir is None
        self._state_dir = state_dir or Path(tempfile.mkdtemp(prefix="samsa-testrunner-"))
        self._prepared = False
        self._job: JobConfig | None = None
        self._model: JobModel | None = None
        self._fed: set[int] = set()  # inputs already produced (a restart feeds only new ones)
        self._clock = ManualClock()
        self._containers: dict[str, Container] = {}
        # A runner dropped without close() (`result = TestRunner.of(...).run()`) still releases its stores.
        self._finalizer = weakref.finalize(self, _release, self._containers, self._state_dir, self._own_dir)
        # Its in-memory system goes once neither the runner nor a result of it is left (results read from
        # it, after close() too): else every runner of a test session would keep all its records.
        weakref.finalize(self, forget, self._bootstrap)

    # -- building the test -------------------------------------------------------------------------
    @classmethod
    def of(cls, task: type | str, state_dir: Path | None = None) -> TestRunner:
        """A runner for a `StreamTask` class (or its `module:Class` path)."""
        path = task if isinstance(task, str) else register_object(task)
        return cls(path, state_dir)

    def with_config(self, config: Mapping[str, Any]) -> TestRunner:
        """Job config keys (a job.yaml's); every system becomes an in-memory one."""
        self._config.update({str(k): str(v) for k, v in config.items()})
        return self

    def add_input(
        self,
        stream: str,
        messages: Iterable[Any] | Mapping[int, Iterable[Any]],
        partitions: int | None = None,
    ) -> TestRunner:
        """Messages of an input stream. A list or generator of items: an item is a `Message`, a (key, value)
        tuple, or a bare value that is also its key (so equal items share a partition, as on a keyed
        topic). A dict partition -> items puts them there."""
        if isinstance(messages, Mapping):
            count = partitions or max(messages, default=0) + 1
            batch = [(item, p) for p, items in sorted(messages.items()) for item in items]
        else:
            count = partitions or 1
            batch = [(item, None) for item in messages]
        self._inputs.append(_Input(stream, count, batch))
        return self

    def add_output(self, stream: str, partitions: int = 1) -> TestRunner:
        """An output stream the task sends to (streams in `task.outputs` are created with one partition)."""
        self._outputs[stream] = partitions
        return self

    def add_store(self, name: str, initial: Mapping[Any, Any] | None = None) -> TestRunner:
        """A store of the task, with contents it starts with. Unless the config says otherwise it is an
        in-memory store with JSON serdes and a changelog (so a restart restores it)."""
        self._stores[name] = _StoreInit(name, dict(initial or {}))
        return self

    @staticmethod
    def _message(item: Any, partition: int | None) -> Message:
        if isinstance(item, Message):
            return item if partition is None else Message(**{**item.__dict__, "partition": partition})
        if isinstance(item, tuple) and len(item) == 2:
            return Message(item[1], item[0], partition)
        raise TypeError(f"not a message: {item!r}")

    # -- running -----------------------------------------------------------------------------------
    def with_clock(self, clock: ManualClock) -> TestRunner:
        """Drive the job's timers (commit, window) by `clock`, which only `advance_time` moves."""
        self._clock = clock
        return self

    @property
    def clock(self) -> ManualClock:
        """The job's clock: time stands still during `run`; `advance_time` moves it."""
        return self._clock

    def run(self, timeout: float = 30.0) -> TestResult:
        """Feeds the inputs added since the last run, starts the containers (once), and steps them until
        nothing is left to process; then commits every task, so outputs, stores and checkpoints show all
        of it. Raises TestRunnerError after `timeout` seconds."""
        job = self._prepare()
        self._feed(job)
        deadline = time.monotonic() + timeout
        loops = self._start_containers(deadline)
        idle_rounds = 0
        # In-memory fetches are synchronous: a round in which every loop found nothing, twice in a row
        # (the second sees what the first round's processing sent to the job's own inputs), ends it.
        while idle_rounds < 2:
            if time.monotonic() > deadline:
                raise TestRunnerError(f"the test job did not finish within its timeout of {timeout} s")
            busy = False
            for loop in loops:
                step = loop.step()
                while step is not None and step[0] == "fetch" and step[1]:
                    step = loop.step()  # what was fetched is processed before the round counts as busy
                if step is not None and step[0] not in ("idle", "fetch"):
                    busy = True
            idle_rounds = 0 if busy else idle_rounds + 1
        for container in self._containers.values():
            container.commit_all()
        return TestResult(self)

    def advance_time(self, ms: int, timeout: float = 30.0) -> TestResult:
        """Moves the job's clock `ms` forward and runs: due window and commit timers fire."""
        self._clock.advance(ms / 1000)
        return self.run(timeout)

    def restart(self, keep_local_state: bool = False, crash: bool = False) -> TestRunner:
        """Stops the containers (gracefully with a final commit, or like kill -9 with `crash`), so that
        the next `run()` starts them again as on a new host: local state is gone (unless kept), stores
        come back through their backends, and inputs resume at the checkpoints."""
        self._stop_containers(crash)
        if not keep_local_state and self._job is not None:
            for base in {self._job.logged_store_dir, self._job.non_logged_store_dir}:
                shutil.rmtree(base, ignore_errors=True)
        return self

    def close(self) -> None:
        """Stops the containers (final commit) and removes the state dir when the runner made it."""
        self._stop_containers(crash=False)
        self._finalizer()

    def __enter__(self) -> TestRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start_containers(self, deadline: float) -> list[RunLoop]:
        assert self._job is not None and self._model is not None
        for model in self._model.containers:
            if model.id in self._containers:
                continue
            container = Container(self._job, model, hooks=ContainerHooks(clock=self._clock))
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), container.stop)
            timer.start()
            try:
                loop = container.start()
            finally:
                timer.cancel()
            if loop is None:
                raise TestRunnerError(f"container {model.id} did not finish restoring within the timeout")
            self._containers[model.id] = container
        loops = [c.loop for c in self._containers.values()]
        return [loop for loop in loops if loop is not None]

    def _stop_containers(self, crash: bool) -> None:
        containers = list(self._containers.values())
        self._containers.clear()
        for container in containers:
            if crash:
                container.crash()
            else:
                container.finish()

    # -- set-up ------------------------------------------------------------------------------------
    def _prepare(self) -> JobConfig:
        if self._job is not None:
            return self._job
        config = self._job_config()
        job = JobConfig(Config(config))
        admin = KafkaAdmin({"bootstrap.servers": self._bootstrap})
        try:
            for item in self._inputs:
                admin.ensure_topic(item.stream, item.partitions)
            for output in job.outputs:
                self._outputs.setdefault(output.stream, 1)
            for stream, partitions in self._outputs.items():
                admin.ensure_topic(stream, partitions)
        finally:
            admin.close()
        self._model = JobCoordinator(job).prepare()
        self._job = job
        self._seed_stores(job)
        return job

    @property
    def _bootstrap(self) -> str:
        return f"inmemory://{self._namespace}"

    def _job_config(self) -> dict[str, str]:
        name = self._task.rsplit(":", 1)[-1].rsplit(".", 1)[-1].lower() or "job"
        config: dict[str, str] = {
            "job.name": name,
            "task.class": self._task,
            f"systems.{SYSTEM}.samza.key.serde": DEFAULT_SERDE,
            f"systems.{SYSTEM}.samza.msg.serde": DEFAULT_SERDE,
            f"systems.{SYSTEM}.samza.offset.default": "oldest",
            **self._config,
            # The test's stores live in the runner's dir, never in a production config's paths.
            "job.logged.store.base.dir": str(self._state_dir / "state"),
            "job.non-logged.store.base.dir": str(self._state_dir / "state"),
        }
        if "task.inputs" not in config:
            # An adjunct store's stream is read into its store, never by process(): not a task input.
            adjunct = {v.split(".", 1)[-1] for k, v in config.items() if k.endswith(".adstore.input")}
            streams = [i.stream for i in self._inputs if i.stream not in adjunct]
            config["task.inputs"] = ",".join(f"{SYSTEM}.{s}" for s in dict.fromkeys(streams))
        for system in {k.split(".")[1] for k in config if k.startswith("systems.")} | {SYSTEM}:
            config[f"systems.{system}.samza.factory"] = "inmemory"
            config[f"systems.{system}.bootstrap.servers"] = self._bootstrap
            # librdkafka settings of a production config mean nothing to the in-memory system.
            for key in [
                k
                for k in config
                if k.startswith((f"systems.{system}.consumer.", f"systems.{system}.producer."))
            ]:
                del config[key]
        for store in self._stores:
            prefix = f"stores.{store}."
            config.setdefault(prefix + "factory", "inmemory")
            config.setdefault(prefix + "key.serde", DEFAULT_SERDE)
            config.setdefault(prefix + "msg.serde", DEFAULT_SERDE)
            backed = prefix + "changelog" in config or prefix + "backup.factories" in config
            if not backed:
                config[prefix + "changelog"] = f"{SYSTEM}.{name}-{store}-changelog"
        return config

    def _serdes(self, job: JobConfig) -> SerdeRegistry:
        return SerdeRegistry(job.config)

    def _stream_serdes(self, job: JobConfig, stream: str) -> tuple[Serde[Any], Serde[Any]]:
        settings = job.stream(SystemStream(SYSTEM, stream))
        registry = self._serdes(job)
        return (
            registry.get(settings.key_serde, stream, is_key=True),
            registry.get(settings.msg_serde, stream, is_key=False),
        )

    def _feed(self, job: JobConfig) -> None:
        producer = KafkaProducer({"bootstrap.servers": self._bootstrap})
        try:
            for index, feed in enumerate(self._inputs):
                if index in self._fed:
                    continue
                key_serde, msg_serde = self._stream_serdes(job, feed.stream)
                placed: dict[bytes, int] = {}  # test inputs repeat their keys: hash each once
                send = producer.send
                for item, given in feed.items:
                    if isinstance(item, (Message, tuple)):
                        m = self._message(item, given)
                        key_obj, value_obj, partition = m.key, m.value, m.partition
                        headers, timestamp = list(m.headers) or None, m.timestamp
                    else:  # a bare value is its own key
                        key_obj, value_obj, partition, headers, timestamp = item, item, given, None, None
                    key = None if key_obj is None else key_serde.to_bytes(key_obj)
                    if partition is None:
                        if key is None:
                            partition = 0
                        else:
                            partition = placed.get(key)
                            if partition is None:
                                partition = placed[key] = partition_for(key, feed.partitions)
                    value = None if value_obj is None else msg_serde.to_bytes(value_obj)
                    if headers is None and timestamp is None:
                        send(feed.stream, value, key=key, partition=partition)
                    else:
                        send(
                            feed.stream,
                            value,
                            key=key,
                            partition=partition,
                            headers=headers,
                            timestamp=timestamp,
                        )
                self._fed.add(index)
            producer.flush()
        finally:
            producer.close()

    def _changelog(self, job: JobConfig, store: str) -> tuple[str, StoreSpec]:
        specs = store_specs(job.config)
        if store not in specs:
            raise TestRunnerError(
                f"no store {store!r} in the job (stores: {', '.join(sorted(specs)) or 'none'})"
            )
        logs = changelogs(job, specs)
        if store not in logs:
            raise TestRunnerError(
                f"store {store!r} has no changelog, so the TestRunner cannot read it: give it "
                f"stores.{store}.changelog (or add it with add_store, which does)"
            )
        return logs[store].stream, specs[store]

    def _seed_stores(self, job: JobConfig) -> None:
        """Initial store contents go into the stores' changelogs: the first start restores them."""
        assert self._model is not None
        tasks = len(self._model.tasks)
        producer = KafkaProducer({"bootstrap.servers": self._bootstrap})
        try:
            for init in self._stores.values():
                if not init.initial:
                    continue
                topic, spec = self._changelog(job, init.name)
                registry = self._serdes(job)
                key_serde, msg_serde = registry.get(spec.key_serde), registry.get(spec.msg_serde)
                for key, value in init.initial.items():
                    raw = key_serde.to_bytes(key)
                    producer.send(
                        topic, msg_serde.to_bytes(value), key=raw, partition=partition_for(raw, tasks)
                    )
            producer.flush()
        finally:
            producer.close()

    # -- reading results ---------------------------------------------------------------------------
    def read_stream(self, stream: str, partition: int | None = None) -> list[Message]:
        job = self._prepare()
        key_serde, msg_serde = self._stream_serdes(job, stream)
        key_of, value_of = key_serde.from_bytes, msg_serde.from_bytes

        def message(m: RawMessage) -> Message:
            key, value = m.key(), m.value()
            return Message(
                None if value is None else value_of(value),
                None if key is None else key_of(key),
                m.partition(),
                tuple(m.headers() or ()),
                m.timestamp()[1],
                m.offset(),
            )

        return [message(m) for m in self._read_raw(stream, partition)]

    def read_store(self, store: str) -> dict[Any, Any]:
        job = self._prepare()
        topic, spec = self._changelog(job, store)
        registry = self._serdes(job)
        key_serde, msg_serde = registry.get(spec.key_serde), registry.get(spec.msg_serde)
        latest: dict[bytes, bytes | None] = {}
        for m in self._read_raw(topic, None):
            key = m.key()
            if key is not None:
                latest[key] = m.value()
        return {key_serde.from_bytes(k): msg_serde.from_bytes(v) for k, v in latest.items() if v is not None}

    def _read_raw(self, topic: str, partition: int | None) -> Iterator[RawMessage]:
        """Every committed record of the topic (or one partition), in partition then offset order; a batch
        at a time, so a large output is never held twice (raw and converted)."""
        admin = KafkaAdmin({"bootstrap.servers": self._bootstrap})
        try:
            count = admin.require_topics([topic])[topic]
        finally:
            admin.close()
        partitions = range(count) if partition is None else [partition]
        with KafkaConsumer({"bootstrap.servers": self._bootstrap}) as consumer:
            for p in partitions:
                low, high = consumer.watermarks((topic, p))
                if high <= low:
                    continue
                consumer.assign({(topic, p): OFFSET_BEGINNING})
                # Transaction markers take offsets but are never delivered: read to the position, not a count.
                while consumer.position([(topic, p)]).get((topic, p), -1) < high:
                    yield from consumer.consume(_READ_BATCH, 0.05)
                consumer.unassign()
