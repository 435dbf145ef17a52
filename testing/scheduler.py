"""The deterministic scheduler: containers of one or more jobs stepped in one process under a seeded choice.

Each step a seeded `random.Random` picks one piece of work among every live container's: a run-loop step
(due timers, a fetch, or one chunk of the partition it also picks), one queued commit async phase, a
delivery of some of a producer's buffered sends, or the restart of a crashed container. The virtual clock
moves forward by a seeded amount each step, so commit and window timers fire at the same steps every run.
Faults come from a plan (`Crash`, `StallCommits`) and from seeded rates; a crash kills the container in
place (`Container.crash`), and a later step starts a new container on the same model, which restores its
state through the configured backend. With the in-process in-memory system (`inmemory://NAME`) there is
no thread and no clock besides the scheduler's: the same seed gives the same event trace.

Trace events (tuples, first the step number, then the kind, the job index and container id):
`start n` (n-th start of the container), `timer commits windows`, `fetch messages`, `idle`,
`process task stream#partition first next`, `commit task` (an async phase run by the scheduler), `point
name` (a crash point passed), `crash point visit`, `lost sends` (undelivered at the crash), `deliver sends
duplicates`, `stall steps`, `finish`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from samsa.checkpoint.faults import SimulatedCrash, install_crash_hook
from samsa.kafka import KafkaConsumer, KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, ContainerHooks
from samsa.runtime.coordinator import JobCoordinator, client_config
from samsa.runtime.job_model import ContainerModel
from samsa.runtime.run_loop import PartitionBuffer
from samsa.streams import SystemStreamPartition
from samsa.testing.exceptions import SchedulerError
from samsa.testing.executor import DeterministicExecutor
from samsa.testing.faults import PROCESSING, BufferedProducer, Crash, Fault, StallCommits

log = logging.getLogger(__name__)

Event = tuple[Any, ...]

# Virtual milliseconds the clock may move per step: commit intervals of tens to hundreds of ms then fire
# every few dozen steps.
_MAX_TICK_MS = 20


@dataclass
class _Slot:
    """One container of one job, across its starts."""

    job_index: int
    job: JobConfig
    model: ContainerModel
    container: Container | None = None
    executor: DeterministicExecutor | None = None
    producers: list[BufferedProducer] = field(default_factory=list)
    starts: int = 0
    done: bool = False
    #: Where the last run stopped, caught up (the inputs' high watermarks at its start).
    ends: dict[SystemStreamPartition, int] = field(default_factory=dict)
    stalled_until: int = -1

    @property
    def who(self) -> tuple[int, str]:
        return (self.job_index, self.model.id)


class DeterministicScheduler:
    """Runs jobs' containers until every one is caught up with its inputs and finished, choosing each step
    with `random.Random(seed)`; `trace` records what ran.

    `crash_rate`: chance of a crash at each crash point passed (at most `max_crashes` in all, so a run
    ends); `duplicate_rate`: chance that a delivered send goes out twice; `faults`: a plan of crashes at
    given visits and commit stalls."""

    def __init__(
        self,
        seed: int,
        faults: Sequence[Fault] = (),
        crash_rate: float = 0.0,
        duplicate_rate: float = 0.0,
        max_crashes: int = 10,
        max_steps: int = 200_000,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = list(faults)
        self.crash_rate = crash_rate
        self.duplicate_rate = duplicate_rate
        self.max_crashes = max_crashes
        self.max_steps = max_steps
        self.trace: list[Event] = []
        self.crashes: list[tuple[int, str, str]] = []  # (job, container, point)
        self.now = 0.0
        self.step_no = 0
        self._slots: list[_Slot] = []
        self._current: _Slot | None = None
        self._visits: dict[tuple[int, str, str], int] = {}
        self._frozen = False  # the clock stands still while exactly-once jobs settle
        self._jobs = 0

    # -- setup ------------------------------------------------------------------------------------
    def add_job(self, config: Mapping[str, str] | Config) -> JobConfig:
        """Prepares a job (topics, job model) and schedules all its containers; returns its config."""
        job = JobConfig(config if isinstance(config, Config) else Config(dict(config)))
        model = JobCoordinator(job).prepare()
        index, self._jobs = self._jobs, self._jobs + 1
        self._slots += [_Slot(index, job, c) for c in model.containers]
        return job

    def clock(self) -> float:
        """The virtual clock (seconds), for every container's timers."""
        return self.now

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> list[Event]:
        """Steps every container to its end; returns the trace."""
        self._check_faults()
        with self._crash_hook():
            while not all(s.done for s in self._slots) or self._reopen():
                if self.step_no >= self.max_steps:
                    raise SchedulerError(
                        f"seed {self.seed}: not done after {self.max_steps} steps; raise max_steps or look "
                        f"for a container that never catches up (trace tail: {self.trace[-5:]})"
                    )
                self.step_no += 1
                if not self._frozen:
                    self.now += self.rng.randint(0, _MAX_TICK_MS) / 1000
                self._stall()
                kind, slot = self.rng.choice(self._options())
                self._run_one(kind, slot)
        return self.trace

    def _check_faults(self) -> None:
        """Raises naming a planned fault whose job or container is not scheduled (it would never fire)."""
        scheduled = {slot.who for slot in self._slots}
        for fault in self.faults:
            if (fault.job, fault.container) in scheduled:
                continue
            containers = sorted(c for j, c in scheduled if j == fault.job)
            jobs = ", ".join(map(str, range(self._jobs))) or "none (add_job first)"
            where = (
                f"job {fault.job} has containers {', '.join(map(repr, containers))}"
                if containers
                else f"the scheduler has jobs {jobs}"
            )
            raise SchedulerError(
                f"fault {fault!r} names job {fault.job!r}, container {fault.container!r}, which this "
                f"scheduler does not run, so it would never happen: {where} (a job is its add_job index from "
                "0, a container its id, a string)"
            )

    def _options(self) -> list[tuple[str, _Slot]]:
        options: list[tuple[str, _Slot]] = []
        for slot in self._slots:
            if slot.done:
                continue
            if slot.container is None:
                options.append(("start", slot))
                continue
            options.append(("loop", slot))
            if slot.executor is not None and slot.executor.queue and slot.stalled_until < self.step_no:
                options.append(("commit", slot))
            if any(p.buffered for p in slot.producers):
                options.append(("deliver", slot))
        return options

    def _run_one(self, kind: str, slot: _Slot) -> None:
        self._current = slot
        try:
            if kind == "start":
                self._start(slot)
            elif kind == "loop":
                self._loop_step(slot)
            elif kind == "commit":
                assert slot.executor is not None
                work = slot.executor.run_next(self.rng.randrange(len(slot.executor.queue)))
                self._event("commit", slot, work.label)
            else:
                self._deliver(slot)
        except SimulatedCrash as crash:
            self._crashed(slot, crash.point)
        finally:
            self._current = None

    def _start(self, slot: _Slot) -> None:
        slot.starts += 1
        slot.executor = DeterministicExecutor()
        slot.producers = []
        hooks = ContainerHooks(
            clock=self.clock,
            executor=slot.executor,
            chooser=self._choose,
            producer_factory=lambda config: self._producer(slot, config),
            version_clock=self.clock,
        )
        slot.container = Container(slot.job, slot.model, until_caught_up=True, hooks=hooks)
        self._event("start", slot, slot.starts)
        if slot.container.start() is None:
            raise SchedulerError(f"container {slot.model.id} stopped while restoring")

    def _loop_step(self, slot: _Slot) -> None:
        container = slot.container
        assert container is not None and container.loop is not None
        step = container.loop.step()
        if step is None:
            slot.ends = container.loop.end_offsets or {}
            container.finish()
            slot.done = True
            self._event("finish", slot)
            return
        self._event(step[0], slot, *step[1:])
        if step[0] == "process":
            # A kill -9 lands between two chunks as well as inside a commit.
            self._point(PROCESSING)

    def _deliver(self, slot: _Slot) -> None:
        producer = self.rng.choice([p for p in slot.producers if p.buffered])
        before = producer.duplicated
        sent = producer.deliver(self.rng.randint(1, producer.buffered))
        self._event("deliver", slot, sent, producer.duplicated - before)

    def _crashed(self, slot: _Slot, point: str) -> None:
        if slot.container is not None:
            slot.container.crash()
        self._event("lost", slot, sum(p.lost for p in slot.producers))
        slot.container = None
        slot.executor = None
        slot.producers = []

    def _reopen(self) -> bool:
        """All finished: starts again every container whose inputs grew since its run began (a job
        reading another's output); True when one was."""
        eos = [slot for slot in self._slots if slot.job.exactly_once]
        if eos and not self._frozen:
            # Exactly-once source tasks number their versions by the clock and stopped at different ones:
            # one more start each, with the clock moved on and then stopped, brings all to the same final
            # version, which their downstream jobs then align and commit.
            self._frozen = True
            self.now += 3600
            for slot in eos:
                slot.done = False
                slot.container = None
                self._event("reopen", slot)
            return True
        reopened = False
        for slot in self._slots:
            grown = False
            for system in sorted({ssp.system for ssp in slot.ends}):
                consumer = KafkaConsumer(client_config(slot.job, system))
                try:
                    grown = grown or any(
                        consumer.watermarks((ssp.stream, ssp.partition))[1] > end
                        for ssp, end in slot.ends.items()
                        if ssp.system == system
                    )
                finally:
                    consumer.close()
            if grown:
                slot.done = False
                slot.container = None
                reopened = True
                self._event("reopen", slot)
        return reopened

    def _stall(self) -> None:
        for fault in self.faults:
            if isinstance(fault, StallCommits) and fault.at_step == self.step_no:
                for slot in self._slots:
                    if slot.who == (fault.job, fault.container):
                        slot.stalled_until = self.step_no + fault.steps
                        self._event("stall", slot, fault.steps)

    # -- hooks the containers call ----------------------------------------------------------------
    def _choose(self, ready: Sequence[PartitionBuffer]) -> int:
        return self.rng.randrange(len(ready))

    def _producer(self, slot: _Slot, config: dict[str, Any]) -> KafkaProducer:
        # A transactional producer is idempotent (Kafka requires it): its retries never duplicate a send.
        duplicate = self._duplicate if not config.get("transactional.id") else (lambda topic: False)
        producer = BufferedProducer(KafkaProducer(config), duplicate)
        slot.producers.append(producer)
        return producer

    def _duplicate(self, topic: str) -> bool:
        return self.duplicate_rate > 0 and self.rng.random() < self.duplicate_rate

    @contextmanager
    def _crash_hook(self) -> Iterator[None]:
        previous = install_crash_hook(self._point)
        try:
            yield
        finally:
            install_crash_hook(previous)

    def _point(self, name: str) -> None:
        """A container passes crash point `name`: record it, and crash it when the plan or the rate says."""
        slot = self._current
        if slot is None:  # a container outside this scheduler's steps (not expected in one process)
            return
        key = (slot.job_index, slot.model.id, name)
        visit = self._visits[key] = self._visits.get(key, 0) + 1
        if name != PROCESSING:
            self._event("point", slot, name)
        planned = any(
            isinstance(f, Crash) and (f.job, f.container, f.point, f.visit) == (*slot.who, name, visit)
            for f in self.faults
        )
        room = len(self.crashes) < self.max_crashes
        if planned or (room and self.crash_rate > 0 and self.rng.random() < self.crash_rate):
            self.crashes.append((*slot.who, name))
            self._event("crash", slot, name, visit)
            raise SimulatedCrash(name)

    def _event(self, kind: str, slot: _Slot, *details: Any) -> None:
        self.trace.append((self.step_no, kind, *slot.who, *details))
