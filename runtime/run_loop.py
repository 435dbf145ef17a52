"""The run loop: fetch in batches, choose round-robin across partitions, run commit > window > process."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from samsa.adjunct.bounded import has_end_marker
from samsa.adjunct.exceptions import AdjunctStreamResetError, ExtractionError
from samsa.exactly_once.alignment import Action, MarkerIn, RestoreIn, RetiredIn, Rewind
from samsa.exactly_once.buffer import BufferedMessage
from samsa.exactly_once.exceptions import NotIntermediateError, ProtocolError
from samsa.exactly_once.protocol import (
    HEADER,
    Marker,
    RecordTag,
    RestoreCommand,
    Retired,
    classify,
    classify_message,
    producer_name,
)
from samsa.exceptions import InvalidConfigError
from samsa.kafka import KafkaConsumer, RawMessage
from samsa.runtime.exceptions import TaskError, UserCodeError
from samsa.runtime.metrics import Counter, Timer
from samsa.runtime.task import IncomingMessageEnvelope, RequestScope
from samsa.runtime.task_instance import TaskInstance
from samsa.runtime.user_errors import USER_FAILURES, call_task, described, escaped, interrupted, returned
from samsa.serde.base import Serde, fast_from_bytes
from samsa.streams import SystemStreamPartition

log = logging.getLogger(__name__)

# Partitions with buffered messages are topped up this often (Samza's task.poll.interval.ms default).
_POLL_INTERVAL_S = 0.05
# Longest blocking fetch when nothing is buffered, so timers and stop requests are seen promptly.
_MAX_IDLE_S = 0.1
# Messages asked of the consumer per fetch.
FETCH_SIZE = 2000
# Top up only while the container holds fewer messages than this: the rest waits in librdkafka's own
# bounded prefetch queue (queued.max.messages.kbytes). Pausing is no way to throttle every batch, because
# librdkafka drops a paused partition's prefetched messages and fetches them again on resume.
TOP_UP_BELOW = 2 * FETCH_SIZE
# A partition holding more than two batches (one far ahead of the others) is paused until it drains.
PAUSE_ABOVE = 2 * FETCH_SIZE
# With a single partition ready there is nothing to alternate with: take this many at a time.
_SOLO_CHUNK = 256

BadMessageHandler = Callable[["PartitionBuffer", RawMessage, str, Exception], None]
#: Picks which of the ready partitions `RunLoop.step` processes next (an index into them).
Chooser = Callable[[Sequence["PartitionBuffer"]], int]
#: What one `RunLoop.step` did: ("timer", commit tasks, window tasks), ("fetch", messages), ("idle",), or
#: ("process", task, "stream#partition", first offset, next offset).
Step = tuple[Any, ...]


class StoreWriter(Protocol):
    """Takes a partition's messages instead of the task's `process`, a chunk at a time (an adjunct store).

    `write` raises `ExtractionError` for a message it cannot store before it writes anything of the
    chunk: the run loop hands that message to the bad-message policy and writes the others again."""

    #: Whether `write_pairs` may take the messages' decoded (key, value) pairs instead of envelopes.
    plain: bool

    def write(self, envelopes: list[IncomingMessageEnvelope]) -> None: ...

    def write_pairs(self, pairs: list[tuple[Any, Any]]) -> None: ...


class PartitionBuffer:
    """The fetched, not yet processed messages of one input partition, and how to read them."""

    __slots__ = (
        "bootstrap",
        "bytes_only",
        "consumer",
        "end_markers",
        "eos",
        "handler",
        "held",
        "key_from",
        "key_serde",
        "key_serde_name",
        "last",
        "messages",
        "msg_from",
        "msg_serde",
        "msg_serde_name",
        "paused",
        "pos",
        "refuse_eos",
        "ssp",
        "task",
        "tasks",
        "tp",
    )

    def __init__(
        self,
        ssp: SystemStreamPartition,
        task: TaskInstance,
        consumer: KafkaConsumer,
        key_serde: tuple[str, Serde[Any]],
        msg_serde: tuple[str, Serde[Any]],
        bootstrap: bool = False,
    ) -> None:
        self.ssp = ssp
        self.tp = (ssp.stream, ssp.partition)
        self.task = task
        self.consumer = consumer
        self.key_serde_name, self.key_serde = key_serde
        self.msg_serde_name, self.msg_serde = msg_serde
        self.key_from = fast_from_bytes(self.key_serde)
        self.msg_from = fast_from_bytes(self.msg_serde)
        #: Both serdes take any bytes: a raw pass-through need not check that messages decode.
        self.bytes_only = self.key_serde_name == self.msg_serde_name == "bytes"
        self.bootstrap = bootstrap
        #: Takes the partition's messages instead of the task's `process` (an adjunct store's stream).
        self.handler: StoreWriter | None = None
        #: The last message handed to `handler` (the record before the task's offset): its mark goes in
        #: the adjunct store's offsets file.
        self.last: RawMessage | None = None
        #: The partition feeds a bounded dataset's store: a record with the end-of-dataset header is its
        #: marker, handed over without decoding its key and value (a marker's are ignored).
        self.end_markers = False
        #: A broadcast partition read once for several tasks: every message goes to each of them (`task`
        #: is the first), each from its own offset.
        self.tasks: tuple[TaskInstance, ...] | None = None
        self.messages: list[RawMessage] = []
        self.pos = 0
        self.paused = False
        #: An intermediate input of an exactly-once task: every record goes through its aligner.
        self.eos = False
        #: Held back (out of the ready queue, paused) while the task's exactly-once buffer is full.
        self.held = False
        #: An input of an exactly-once job not marked intermediate: a record with the exactly-once header
        #: fails the task before `process` sees it (the job's intermediate flags disagree).
        self.refuse_eos = False

    @property
    def pending(self) -> int:
        return len(self.messages) - self.pos

    def start_offset(self) -> int:
        """Where the consumer starts: the lowest offset of the tasks reading the partition."""
        if self.tasks is None:
            return self.task.offsets[self.ssp]
        return min(ti.offsets[self.ssp] for ti in self.tasks)


def _not_intermediate(buf: PartitionBuffer, msg: RawMessage) -> ProtocolError:
    """A record of an exactly-once producer on an input this exactly-once job does not mark intermediate."""
    try:
        tag = classify_message(msg)
    except ProtocolError as e:
        return e
    kind = {
        Marker: "a checkpoint marker",
        RestoreCommand: "a restore command",
        Retired: "a retired record",
    }.get(type(tag), "a data record")
    system, stream, _ = buf.ssp
    return NotIntermediateError(
        f"{kind} of an exactly-once job (it has the {HEADER} header) on input {system}.{stream}, which this "
        f"job does not mark intermediate: the upstream job writes the stream as intermediate. Set "
        f"systems.{system}.streams.{stream}.samza.intermediate: true on this (downstream) job too, or remove "
        "it from the upstream job; the record was not handed to process() and is read again after the fix",
        topic=stream,
        partition=msg.partition(),
        offset=msg.offset(),
    )


def _untagged(ssp: SystemStreamPartition, offset: int) -> ProtocolError:
    """A record without the exactly-once header on an intermediate input: not a record of the protocol."""
    return ProtocolError(
        f"a record without the {HEADER} header on intermediate stream {ssp.system}.{ssp.stream}: only "
        "exactly-once Samsa jobs may write it; send other producers' records to a stream not marked "
        "samza.intermediate",
        topic=ssp.stream,
        partition=ssp.partition,
        offset=offset,
    )


def _check_not_reset(buf: PartitionBuffer, first: int, last: int, count: int) -> None:
    """Fails when a fetched chunk of an adjunct stream's partition (`count` messages, offsets `first` to
    `last`) goes back: below the next offset the store expects, or within the chunk (more messages than
    offsets between its ends). Offsets only grow in a partition; the consumer went back because its
    position was out of range in a topic deleted and recreated while the job ran (librdkafka's
    auto.offset.reset). Writing on would lay the new topic's records over the deleted one's rows (or skip
    them as replays of sealed versions); a start checks the store against the topic and rebuilds it."""
    expected = buf.task.offsets.get(buf.ssp)
    if (expected is None or first >= expected) and last - first >= count - 1:
        return
    system, stream, partition = buf.ssp
    went = (
        f"records from offset {first} were fetched, below offset {expected}, the next one its store expects"
        if expected is not None and first < expected
        else f"the offsets of the records fetched go back between offsets {first} and {last}"
    )
    raise AdjunctStreamResetError(
        f"task {buf.task.name}: topic {stream} partition {partition} (system {system}), an adjunct store's "
        f"stream: {went}. The consumer's position was reset (out of range), as when the topic is deleted and "
        "recreated while the job runs: the store holds rows of the deleted topic. The records were not "
        "written into the store; the container stops, and its restart checks the store against the topic "
        "and rebuilds it from the new one"
    )


def _message(env: IncomingMessageEnvelope, broadcast: bool) -> str:
    """Where the message is, for an error: "in#0@7", "broadcast in#0@7"."""
    return f"{'broadcast ' if broadcast else ''}{env.stream}#{env.partition}@{env.offset}"


class RunLoop:
    """Single-threaded loop over all of a container's tasks (Samza's RunLoop with max concurrency 1)."""

    def __init__(
        self,
        sources: Sequence[tuple[KafkaConsumer, dict[tuple[str, int], PartitionBuffer]]],
        tasks: Sequence[TaskInstance],
        commit: Callable[..., None],
        on_bad_message: BadMessageHandler,
        batch_size: int = 1,
        end_offsets: dict[SystemStreamPartition, int] | None = None,
        bootstrap_ends: dict[SystemStreamPartition, int] | None = None,
        on_bootstrapped: Callable[[], None] | None = None,
        poll: Callable[[], None] = lambda: None,
        polled: Counter | None = None,
        poll_timer: Timer | None = None,
        clock: Callable[[], float] = time.monotonic,
        chooser: Chooser | None = None,
        on_aligned: Callable[[TaskInstance], None] | None = None,
        on_rewind: Callable[[TaskInstance, Rewind], None] | None = None,
        name: str = "run loop",
    ) -> None:
        """`on_aligned` commits an exactly-once task's aligned version; `on_rewind` takes it back to its
        last checkpoint (the loop then re-reads its inputs from the checkpointed offsets). `clock` drives
        the commit and window timers (a test's virtual clock); `chooser` picks the next ready partition in
        `step` (default: round-robin, as `run` does). `name` says whose loop it is in errors ("container
        0")."""
        self._sources = sources
        self._tasks = list(tasks)
        self._commit = commit
        self._on_bad_message = on_bad_message
        self._batch_size = batch_size
        self._end_offsets = end_offsets
        self._poll_producers = poll
        self._polled = polled or Counter({})
        self._poll_timer = poll_timer or Timer({})
        self._ready: deque[PartitionBuffer] = deque()
        self._held: list[PartitionBuffer] = []  # non-bootstrap buffers while bootstrap streams catch up
        self._bootstrap_ends = {ssp: end for ssp, end in (bootstrap_ends or {}).items()}
        self._bootstrapping = False
        self._on_bootstrapped = on_bootstrapped
        self._stopping = False
        self._next_timer = 0.0
        self._buffered = 0  # messages fetched and not yet processed, over all partitions
        self._by_ssp = {buf.ssp: buf for _, routes in sources for buf in routes.values()}
        self._clock = clock
        self._chooser = chooser
        self._begun = False
        self._next_poll = 0.0
        self._on_aligned = on_aligned
        self._on_rewind = on_rewind
        self._held_by_task: dict[str, list[PartitionBuffer]] = {}
        self._name = name
        #: The thread running the loop, once begun: the watchdog looks at its stack (`StepWatchdog`).
        self.thread: int | None = None
        # After a round of timers, a chunk of input (or a fetch finding none) comes before the next round: a
        # scheduler callback scheduling itself at or before now (an event-time timer, replaying old data)
        # would otherwise be due again at once, round after round, and no message would be processed.
        self._owed = False
        self.caught_up = False
        # The tasks' callback schedulers (a task built without a context, in a unit test, has none). A timer
        # scheduled sooner than the loop's next one brings that forward: an idle fetch waits no longer.
        self._timers = [(ti, ti.context.scheduler) for ti in self._tasks if ti.context is not None]

        def sooner(due: float) -> None:
            self._next_timer = min(self._next_timer, due)

        for _, timers in self._timers:
            timers.on_sooner = sooner

    @property
    def end_offsets(self) -> dict[SystemStreamPartition, int] | None:
        """Where a loop that runs until caught up stops (the high watermarks at its start)."""
        return None if self._end_offsets is None else dict(self._end_offsets)

    def stop(self) -> None:
        """Asks the loop to return after the message in hand (safe from a signal handler)."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        """Whether the loop is over or ends after the message in hand (stopped, or its tasks shut down)."""
        return self._stopping

    # -- the loop ---------------------------------------------------------------------------------
    def begin(self) -> None:
        """Starts the bootstrap streams and the timers; `run` does it, a driver calling `step` first."""
        if not self._begun:
            self._begun = True
            self.thread = threading.get_ident()
            self._start_bootstrap()
            self._reschedule()

    def run(self) -> None:
        self.begin()
        ready = self._ready
        mono = self._clock
        next_poll = 0.0
        owed = False  # see `_owed`
        while not self._stopping:
            now = mono()
            if now >= self._next_timer and not owed:
                self._fire_timers(now)
                owed = True
                continue
            owed = False
            if not ready:
                self._fetch(min(_MAX_IDLE_S, max(0.0, self._next_timer - now)))
                next_poll = now + _POLL_INTERVAL_S
                if not ready:
                    if self._bootstrapping:
                        self._check_bootstrap()  # the tail may be transaction markers: no buffer empties
                    if self._end_offsets is not None and self._is_caught_up():
                        self.caught_up = True
                        return
                    continue
            elif now >= next_poll:
                if self._buffered < TOP_UP_BELOW:
                    self._fetch(0)
                next_poll = now + _POLL_INTERVAL_S
            buf = ready[0]
            self._process(buf, self._batch_size if len(ready) > 1 else max(self._batch_size, _SOLO_CHUNK))
            self._after_chunk(buf, 0, rotate=True)

    def step(self) -> Step | None:
        """One unit of `run`'s work for a driver that interleaves loops: the due timers, one fetch, or one
        chunk of one ready partition (the chooser's). Never blocks. None once the loop is over (stopped,
        or caught up when it runs until caught up)."""
        try:
            return self._step()
        except (SystemExit, KeyboardInterrupt) as e:
            # What a container's run turns into its failure (see `Container._released_on_failure`), for a
            # driver stepping the loop itself (the TestRunner): a serde's or a store's sys.exit().
            if interrupted(e):
                raise
            raise escaped(e, self._name) from e

    def _step(self) -> Step | None:
        self.begin()
        if self._stopping:
            return None
        now = self._clock()
        if now >= self._next_timer and not self._owed:
            commits = tuple(t.name for t in self._tasks if t.next_commit <= now)
            windows = tuple(t.name for t in self._tasks if t.next_window <= now and not self._bootstrapping)
            self._fire_timers(now)
            self._owed = True
            return ("timer", commits, windows)
        ready = self._ready
        if not ready or (now >= self._next_poll and self._buffered < TOP_UP_BELOW):
            fetched = self._fetch(0)
            self._next_poll = now + _POLL_INTERVAL_S
            if not ready:
                if self._bootstrapping:
                    self._check_bootstrap()
                if self._end_offsets is not None and self._is_caught_up():
                    self.caught_up = True
                    return None
            if fetched or not ready:
                if not ready:
                    self._owed = False  # nothing to process: the timers may run again
                return ("fetch", fetched) if fetched else ("idle",)
        self._owed = False
        index = self._chooser(ready) if self._chooser is not None else 0
        buf = ready[index]
        first = buf.messages[buf.pos].offset()
        self._process(buf, self._batch_size if len(ready) > 1 else max(self._batch_size, _SOLO_CHUNK))
        done = (buf.task.name, f"{buf.ssp.stream}#{buf.ssp.partition}", first, buf.task.offsets[buf.ssp])
        self._after_chunk(buf, index, rotate=self._chooser is None)
        return ("process", *done)

    def _after_chunk(self, buf: PartitionBuffer, index: int, rotate: bool) -> None:
        """After a chunk of `ready[index]`: drop the drained buffer (resuming its partition) or move on
        round-robin, then the bootstrap check and the task's commit/shutdown requests."""
        ready = self._ready
        if index >= len(ready) or ready[index] is not buf:
            # An exactly-once cut or rewind reordered the queue (held partitions back, inputs re-read).
            index = next((i for i, b in enumerate(ready) if b is buf), -1)
        if index < 0:
            pass  # a rewind took it out of the queue: its partition is read again from the checkpoint
        elif buf.held or buf.pos >= len(buf.messages):
            del ready[index]
            if buf.held:
                if not buf.paused:
                    buf.consumer.pause([buf.tp])
                    buf.paused = True
            else:
                buf.messages = []
                buf.pos = 0
                if buf.paused:
                    buf.consumer.resume([buf.tp])
                    buf.paused = False
        elif rotate and len(ready) > 1:
            ready.rotate(-1)
        if self._bootstrapping and buf.bootstrap:
            self._check_bootstrap()  # a partition is done at its start-time watermark, buffered or not
        if buf.tasks is not None:
            for ti in buf.tasks:
                if ti.coordinator.requested:
                    self._handle_requests(ti)
        elif buf.task.coordinator.requested:
            self._handle_requests(buf.task)

    # The watchdog (runtime/watchdog.py) finds a chunk in progress by this method's frame and its locals.
    def _process(self, buf: PartitionBuffer, limit: int) -> None:
        """Processes up to `limit` messages of one partition: the hot path."""
        if buf.handler is not None:
            self._write_to_store(buf, buf.handler)
            return
        if buf.tasks is not None:
            self._fan_out(buf, buf.tasks, limit)
            return
        if buf.eos:
            self._process_eos(buf, limit)
            return
        msgs = buf.messages
        pos = first = buf.pos
        end = min(pos + limit, len(msgs))
        ti = buf.task
        process = buf.handler or ti.task.process
        collector = ti.collector
        coordinator = ti.coordinator
        key_from, msg_from = buf.key_from, buf.msg_from
        system, stream, partition = buf.ssp
        timer = ti.process_timer
        perf = time.perf_counter_ns
        mono = self._clock
        next_timer = self._next_timer
        envelope = IncomingMessageEnvelope
        refuse_eos = buf.refuse_eos
        last = -1
        count = 0
        try:
            while pos < end:
                msg = msgs[pos]
                pos += 1
                offset = msg.offset()
                headers = msg.headers()
                if refuse_eos and headers and any(name == HEADER for name, _ in headers):
                    pos -= 1
                    raise _not_intermediate(buf, msg)
                raw_key = msg.key()
                raw_value = msg.value()
                try:
                    key = None if raw_key is None else key_from(raw_key)
                except Exception as e:
                    self._on_bad_message(buf, msg, "key", e)
                    last = offset
                    continue
                try:
                    value = None if raw_value is None else msg_from(raw_value)
                except Exception as e:
                    self._on_bad_message(buf, msg, "message", e)
                    last = offset
                    continue
                env = envelope(system, stream, partition, offset, key, value, msg.timestamp()[1], headers)
                start = perf()
                try:  # inline, not `call_task`: the call and the message's name would cost every message
                    result = process(env, collector, coordinator)
                except USER_FAILURES as e:
                    if interrupted(e):
                        raise
                    raise UserCodeError(
                        f"task {ti.name}: process() failed on {stream}#{partition}@{offset}: {described(e)}; "
                        f"the message is not checkpointed and will be processed again after a restart"
                    ) from e
                if result is not None:  # one comparison per message: the check itself is off this path
                    returned(result, ti.name, f"process() on {stream}#{partition}@{offset}")
                timer.update_ns(perf() - start)
                last = offset
                count += 1
                # Commit and window outrank process, and a stop ends the chunk: no waiting out a batch.
                if coordinator.requested or self._stopping or mono() >= next_timer:
                    break
        finally:
            buf.pos = pos
            self._buffered -= pos - first
            if last >= 0:
                ti.offsets[buf.ssp] = last + 1
            ti.processed.inc(count)

    def _fan_out(self, buf: PartitionBuffer, tasks: tuple[TaskInstance, ...], limit: int) -> None:
        """Processes up to `limit` messages of a broadcast partition, each by every task whose offset has
        not passed it (after a restart the tasks may resume from different checkpoints)."""
        msgs = buf.messages
        pos = first = buf.pos
        end = min(pos + limit, len(msgs))
        ssp = buf.ssp
        try:
            while pos < end:
                msg = msgs[pos]
                pos += 1
                offset = msg.offset()
                takers = [ti for ti in tasks if ti.offsets.get(ssp, 0) <= offset]
                if not takers:
                    continue
                env = self._envelope(buf, msg)
                for ti in takers:
                    if env is not None:
                        self._process_one(ti, env, broadcast=True)
                    ti.offsets[ssp] = offset + 1
                if (
                    self._stopping
                    or self._clock() >= self._next_timer
                    or any(ti.coordinator.requested for ti in takers)
                ):
                    break
        finally:
            buf.pos = pos
            self._buffered -= pos - first

    # -- exactly-once ---------------------------------------------------------------------------------
    def _process_eos(self, buf: PartitionBuffer, limit: int) -> None:
        """Up to `limit` records of an exactly-once task's intermediate input, each through its aligner:
        processed, buffered on disk for a later version, or dropped; markers and restore commands drive
        the versions. A record without the exactly-once header goes to the bad-message policy, never to
        process or the aligner."""
        ti = buf.task
        eos = ti.eos
        assert eos is not None and eos.aligner is not None and eos.buffer is not None
        aligner, ebuf, ssp = eos.aligner, eos.buffer, buf.ssp
        msgs = buf.messages
        pos = first = buf.pos
        end = min(pos + limit, len(msgs))
        aligned = False
        rewind: Rewind | None = None
        try:
            while pos < end:
                if eos.rereading and self._reread_done(ti, ssp):
                    aligned = True
                    break
                msg = msgs[pos]
                offset = msg.offset()
                tag = classify_message(msg)
                if tag is None:
                    # A stray producer's record: a bad message like one that does not decode (fail stops
                    # the task here, unread). Skipped or sent to the dead-letter stream, it is passed over
                    # like a control record: it carries no version, so the aligner never sees it.
                    self._on_bad_message(buf, msg, "record", _untagged(ssp, offset))
                    pos += 1
                    ti.offsets[ssp] = offset + 1
                    continue
                if type(tag) is RecordTag:
                    if (ebuf.over_limit or ssp in eos.reread) and (ahead := self._ahead(buf, tag)):
                        if ssp not in eos.reread and ssp not in eos.rereading and self._hold(buf):
                            break
                        # The version waits on this partition: pausing it would stall for good. Records
                        # ahead are left unbuffered and read again from the broker after the cut.
                        first, version = eos.reread.get(ssp, (offset, ahead))
                        eos.reread[ssp] = (first, min(version, ahead))
                        eos.reread_messages += 1
                        pos += 1
                        ti.offsets[ssp] = offset + 1
                        continue
                    pos += 1
                    decision = aligner.classify(ssp, tag)
                    if decision.action is Action.PROCESS:
                        env = self._envelope(buf, msg)
                        if env is not None:
                            self._process_one(ti, env)
                    elif decision.action is Action.BUFFER:
                        assert decision.version is not None
                        ebuf.append(decision.version, BufferedMessage.of(ssp, msg))
                    ti.offsets[ssp] = offset + 1
                    if ti.coordinator.requested or self._stopping or self._clock() >= self._next_timer:
                        break
                    continue
                pos += 1
                ti.offsets[ssp] = offset + 1
                if type(tag) is Marker:
                    marker = MarkerIn(tag.producer, tag.generation, tag.version, tag.job, tag.tasks)
                    if aligner.on_marker(ssp, marker, offset) and not eos.rereading:
                        aligned = True
                        break
                else:
                    if type(tag) is RestoreCommand:
                        command = RestoreIn(tag.producer, tag.generation, tag.version, tag.job, tag.tasks)
                        rewind = aligner.on_restore(ssp, command, offset)
                        for notice in aligner.take_notices():
                            log.warning("task %s: %s", ti.name, notice)
                    else:
                        assert type(tag) is Retired
                        retired = RetiredIn(tag.producer, tag.generation, tag.version, tag.job)
                        rewind = aligner.on_retired(ssp, retired, offset)
                        log.info(
                            "task %s: upstream producer %d (%s) is retired at version %d (read on %s)",
                            ti.name,
                            tag.producer,
                            producer_name(msg.value()) or "unnamed",
                            tag.version,
                            ssp,
                        )
                    if rewind is not None or (aligner.aligned and not eos.rereading):
                        aligned = rewind is None
                        break
        finally:
            buf.pos = pos
            self._buffered -= pos - first
        if rewind is None and not aligned and eos.rereading and self._reread_done(ti, ssp):
            aligned = True
        if rewind is not None:
            self.rewind(ti, rewind)
        elif aligned:
            self._cut_aligned(ti)

    @staticmethod
    def _process_one(ti: TaskInstance, env: IncomingMessageEnvelope, broadcast: bool = False) -> None:
        """The task's process() of one message, off the hot path (`_process`): an exactly-once task's, a
        broadcast partition's (`broadcast`: read for several tasks, checkpointed by each)."""
        start = time.perf_counter_ns()
        # The try is here, not in `call_task`: naming the message in its arguments would cost every message.
        try:
            result = ti.task.process(env, ti.collector, ti.coordinator)  # type: ignore[func-returns-value]
        except USER_FAILURES as e:
            if interrupted(e):
                raise
            raise UserCodeError(
                f"task {ti.name}: process() failed on {_message(env, broadcast)}: {described(e)}; the "
                f"message is not checkpointed{' for this task' if broadcast else ''} and will be processed "
                "again after a restart"
            ) from e
        if result is not None:
            returned(result, ti.name, f"process() on {_message(env, broadcast)}")
        ti.process_timer.update_ns(time.perf_counter_ns() - start)
        ti.processed.inc()

    @staticmethod
    def _reread_done(ti: TaskInstance, ssp: SystemStreamPartition) -> bool:
        """Whether reading `ssp` again just reached where it was before: True when that ends the re-reads
        of the task and its version is aligned (cut it now)."""
        eos = ti.eos
        assert eos is not None and eos.aligner is not None
        horizon = eos.rereading.get(ssp)
        if horizon is None or ti.offsets[ssp] < horizon:
            return False
        del eos.rereading[ssp]
        return not eos.rereading and eos.aligner.aligned

    @staticmethod
    def _ahead(buf: PartitionBuffer, tag: RecordTag) -> int:
        """The task version of a record of a version after the current one (it would be buffered); 0 for
        any other (current, duplicate, stale, or of a producer not seen yet: the aligner decides)."""
        eos = buf.task.eos
        assert eos is not None and eos.aligner is not None
        offset = eos.aligner.offset(buf.ssp, tag.producer)
        if offset is None or tag.version - offset <= eos.aligner.current_version:
            return 0
        return tag.version - offset

    def _hold(self, buf: PartitionBuffer) -> bool:
        """The buffer is full and the partition's next record would be buffered: hold the partition back,
        unless the version waits on it (another producer's records or marker behind this one)."""
        eos = buf.task.eos
        assert eos is not None and eos.aligner is not None
        if any(p == buf.ssp for p, _ in eos.aligner.waiting_for()):
            return False
        buf.held = True
        self._held_by_task.setdefault(buf.task.name, []).append(buf)
        log.info(
            "task %s: exactly-once buffer full (task.eos.buffer.max.bytes); pausing %s until version %d is "
            "aligned",
            buf.task.name,
            buf.ssp,
            eos.aligner.current_version,
        )
        return True

    def _cut_aligned(self, ti: TaskInstance) -> None:
        """Commits every version that is aligned (or, catching up, moves on without a checkpoint: see
        `EosTask.next_to_merge`), draining the buffer of each next version into process."""
        eos = ti.eos
        assert eos is not None and eos.aligner is not None and eos.buffer is not None
        aligner = eos.aligner
        while aligner.aligned and not eos.rereading:
            reread: dict[SystemStreamPartition, tuple[int, int]] = {}
            merge = eos.next_to_merge(self._clock(), ti.commit_interval)
            if merge is not None:
                aligner.pass_to(merge)
                eos.versions_merged += 1
            else:
                assert self._on_aligned is not None
                self._on_aligned(ti)
                eos.cut_at = self._clock()
                reread, eos.reread = eos.reread, {}
            for ssp, (offset, _) in reread.items():
                # Markers read past `offset` closed versions whose records are not read yet: no cut
                # until the partition is read again up to where it was.
                eos.rereading[ssp] = ti.offsets[ssp]
                self._read_again(self._by_ssp[ssp], offset)
            for held in self._held_by_task.pop(ti.name, []):
                held.held = False
                if held.pending:
                    self._make_ready(held)
            for bm in eos.buffer.drain(aligner.current_version):
                tag = classify(bm.headers)
                assert type(tag) is RecordTag
                if aligner.admit_buffered(bm.ssp, tag).action is Action.PROCESS:
                    env = self._envelope(self._by_ssp[bm.ssp], bm.as_raw())
                    if env is not None:
                        self._process_one(ti, env)
            if reread:
                # The next version's records left unbuffered come first: no cut before they are read.
                break

    def rewind(self, ti: TaskInstance, rewind: Rewind) -> None:
        """Takes an exactly-once task back to its last checkpoint: the container drops its open version
        (stores, sink transaction, buffer), then every input partition is read again from there."""
        assert self._on_rewind is not None and ti.eos is not None
        log.warning(
            "task %s: upstream producer %d %s version %d as generation %d (seen on %s) after this task "
            "used its voided records; going back to checkpoint version %d",
            ti.name,
            rewind.producer,
            "was retired at" if rewind.retired else "restored",
            rewind.restored_version,
            rewind.generation,
            rewind.partition,
            rewind.to_version,
        )
        self._on_rewind(ti, rewind)
        self._held_by_task.pop(ti.name, None)
        ti.eos.reread.clear()
        ti.eos.rereading.clear()
        for buf in self._by_ssp.values():
            if buf.task is ti and buf.tasks is None:
                self._read_again(buf, ti.offsets[buf.ssp])

    def _read_again(self, buf: PartitionBuffer, offset: int) -> None:
        """Drops what is fetched of the partition and reads it again from `offset`."""
        self._buffered -= buf.pending
        buf.messages = []
        buf.pos = 0
        buf.held = False
        if buf in self._ready:
            self._ready.remove(buf)
        if buf in self._held:
            self._held.remove(buf)
        buf.consumer.seek(buf.tp, offset)
        buf.task.offsets[buf.ssp] = offset
        if buf.paused:
            buf.consumer.resume([buf.tp])
            buf.paused = False

    def _envelope(self, buf: PartitionBuffer, msg: RawMessage) -> IncomingMessageEnvelope | None:
        """The message decoded, or None when it does not decode (handed to the bad-message policy)."""
        raw_key, raw_value = msg.key(), msg.value()
        try:
            key = None if raw_key is None else buf.key_from(raw_key)
        except Exception as e:
            self._on_bad_message(buf, msg, "key", e)
            return None
        try:
            value = None if raw_value is None else buf.msg_from(raw_value)
        except Exception as e:
            self._on_bad_message(buf, msg, "message", e)
            return None
        system, stream, partition = buf.ssp
        return IncomingMessageEnvelope(
            system, stream, partition, msg.offset(), key, value, msg.timestamp()[1], msg.headers()
        )

    def _write_to_store(self, buf: PartitionBuffer, writer: StoreWriter) -> None:
        """Hands every buffered message of the partition to its store in one chunk: no `process` call, no
        timer per message (a store bootstrap reads millions)."""
        msgs, first = buf.messages, buf.pos
        _check_not_reset(buf, msgs[first].offset(), msgs[-1].offset(), len(msgs) - first)
        key_from, msg_from = buf.key_from, buf.msg_from
        if writer.plain and self._write_pairs(buf, writer, msgs[first:]):
            return
        system, stream, partition = buf.ssp
        envelopes: list[IncomingMessageEnvelope] = []
        last = -1
        end_markers = buf.end_markers
        for msg in msgs[first:]:
            offset = msg.offset()
            raw_key, raw_value = msg.key(), msg.value()
            last = offset
            headers = msg.headers()
            if end_markers and has_end_marker(headers):
                # Taken by its header: a key or value the stream's serdes cannot read must not make the
                # marker a bad message (skipped, the dataset would merge with the next one).
                envelopes.append(
                    IncomingMessageEnvelope(
                        system, stream, partition, offset, None, None, msg.timestamp()[1], headers
                    )
                )
                continue
            try:
                key = None if raw_key is None else key_from(raw_key)
            except Exception as e:
                self._on_bad_message(buf, msg, "key", e)
                continue
            try:
                value = None if raw_value is None else msg_from(raw_value)
            except Exception as e:
                self._on_bad_message(buf, msg, "message", e)
                continue
            envelopes.append(
                IncomingMessageEnvelope(
                    system, stream, partition, offset, key, value, msg.timestamp()[1], headers
                )
            )
        self._write_envelopes(buf, writer, envelopes, msgs[first].offset(), last)
        buf.pos = len(msgs)
        self._buffered -= len(msgs) - first
        if last >= 0:
            buf.task.offsets[buf.ssp] = last + 1
            buf.last = msgs[-1]
        buf.task.processed.inc(len(envelopes))

    def _write_envelopes(
        self,
        buf: PartitionBuffer,
        writer: StoreWriter,
        envelopes: list[IncomingMessageEnvelope],
        lo: int,
        hi: int,
    ) -> None:
        """`writer.write(envelopes)`; a message whose entries cannot be extracted (an `ExtractionError`,
        raised before anything of the chunk is written) goes to the bad-message policy, and the messages
        around it are written without it."""
        rest = envelopes
        while True:
            try:
                writer.write(rest)
                return
            except ExtractionError as e:
                bad = next((i for i, env in enumerate(rest) if env.offset == e.offset), None)
                if bad is None or e.partition != buf.ssp.partition or e.stream != buf.ssp.stream:
                    raise self._write_failed(buf, lo, hi, e) from e
                error: Exception = e
            except InvalidConfigError:
                raise  # the store's serde fits none of the stream's records: a restart meets it again
            except Exception as e:
                raise self._write_failed(buf, lo, hi, e) from e
            if bad:
                self._write_envelopes(buf, writer, rest[:bad], lo, hi)
            msg = next(m for m in buf.messages if m.offset() == rest[bad].offset)
            self._on_bad_message(buf, msg, "extraction", error)
            rest = rest[bad + 1 :]

    @staticmethod
    def _write_failed(buf: PartitionBuffer, lo: int, hi: int, e: Exception) -> TaskError:
        return TaskError(
            f"task {buf.task.name}: writing {buf.ssp.stream}#{buf.ssp.partition} offsets {lo} to {hi} into "
            f"its store failed: {e!r}; they are not checkpointed and are read again after a restart"
        )

    def _write_pairs(self, buf: PartitionBuffer, writer: StoreWriter, chunk: list[RawMessage]) -> bool:
        """The common case, fast: every message of the chunk decodes; keyless ones have nothing to store.
        False (nothing written) when one does not decode, or the store refuses the chunk: the caller then
        goes message by message, naming the message at fault (and its store's writer says whether its
        serde fits the stream at all)."""
        if not chunk:
            return True
        key_from, msg_from = buf.key_from, buf.msg_from
        raw = getattr(writer, "raw_pairs", False)
        try:
            if raw:  # the messages' bytes are the store's: checked to decode, then stored as they are
                pairs = [(key, m.value()) for m in chunk if (key := m.key()) is not None]
                if not buf.bytes_only:
                    for key, value in pairs:
                        key_from(key)
                        if value is not None:
                            msg_from(value)
            else:
                pairs = [
                    (key_from(key), None if (value := m.value()) is None else msg_from(value))
                    for m in chunk
                    if (key := m.key()) is not None
                ]
        except Exception:
            return False
        try:
            writer.write_raw_pairs(pairs) if raw else writer.write_pairs(pairs)  # type: ignore[attr-defined]
        except Exception:
            # A batch refused (a serde that does not take a value, or the engine): written again message
            # by message, which names the message, or fails as a write failure (puts are idempotent).
            return False
        buf.pos = len(buf.messages)
        self._buffered -= len(chunk)
        buf.task.offsets[buf.ssp] = chunk[-1].offset() + 1
        buf.last = chunk[-1]
        buf.task.processed.inc(len(chunk))
        return True

    def _fetch(self, timeout: float) -> int:
        fetched = 0
        self._poll_producers()
        for consumer, routes in self._sources:
            start = time.perf_counter_ns()
            msgs = consumer.consume(FETCH_SIZE, timeout)
            self._poll_timer.update_ns(time.perf_counter_ns() - start)
            timeout = 0.0
            if not msgs:
                continue
            fetched += len(msgs)
            self._buffered += len(msgs)
            self._polled.inc(len(msgs))
            current: PartitionBuffer | None = None
            current_key: tuple[str, int] | None = None
            to_pause = []
            for msg in msgs:
                tp = (msg.topic(), msg.partition())
                if tp != current_key:
                    current_key = tp
                    current = routes[tp]
                    if current.pos >= len(current.messages):
                        current.messages = []
                        current.pos = 0
                        self._make_ready(current)
                assert current is not None
                current.messages.append(msg)
            for buf in routes.values():
                if not buf.paused and buf.pending > PAUSE_ABOVE:
                    buf.paused = True
                    to_pause.append(buf.tp)
            if to_pause:
                consumer.pause(to_pause)
        return fetched

    def _make_ready(self, buf: PartitionBuffer) -> None:
        if self._bootstrapping and not buf.bootstrap:
            self._held.append(buf)
        else:
            self._ready.append(buf)

    # -- bootstrap streams ------------------------------------------------------------------------
    def _start_bootstrap(self) -> None:
        lagging = {ssp for ssp, end in self._bootstrap_ends.items() if self._next_offset(ssp) < end}
        self._bootstrap_ends = {ssp: self._bootstrap_ends[ssp] for ssp in lagging}
        if not lagging:
            return
        self._bootstrapping = True
        for consumer, routes in self._sources:
            others = [b.tp for b in routes.values() if not b.bootstrap]
            if others:
                consumer.pause(others)
        log.info("bootstrapping %d partitions before other inputs", len(lagging))

    def _check_bootstrap(self) -> None:
        self._bootstrap_ends = {
            ssp: end for ssp, end in self._bootstrap_ends.items() if self._next_offset(ssp) < end
        }
        if self._bootstrap_ends:
            return
        self._bootstrapping = False
        for consumer, routes in self._sources:
            others = [b.tp for b in routes.values() if not b.bootstrap and not b.paused]
            if others:
                consumer.resume(others)
        self._ready.extend(self._held)
        self._held = []
        self._reschedule()  # the windows that waited are due now
        log.info("bootstrap streams caught up; processing all inputs")
        if self._on_bootstrapped is not None:
            self._on_bootstrapped()

    def _next_offset(self, ssp: SystemStreamPartition) -> int:
        buf = self._by_ssp[ssp]
        tasks = buf.tasks or (buf.task,)
        offset = min(ti.offsets.get(ssp, -1) for ti in tasks)
        if offset < 0 or buf.pending:
            return offset
        # Past the last record there may be transaction markers only: the consumer's position skips them.
        return max(offset, buf.consumer.position([buf.tp]).get(buf.tp, -1))

    # -- timers and requests ----------------------------------------------------------------------
    def _reschedule(self) -> None:
        # While bootstrap streams catch up, window() waits like process(): it would see partial stores.
        windows = not self._bootstrapping
        self._next_timer = min(
            (min(t.next_commit, t.next_window if windows else t.next_commit) for t in self._tasks),
            default=float("inf"),
        )
        if windows and self._timers:  # scheduler callbacks wait like window()
            self._next_timer = min(self._next_timer, min(timers.next_due for _, timers in self._timers))

    def _fire_timers(self, now: float) -> None:
        due = [t for t in self._tasks if t.next_commit <= now]
        if due:
            self._commit(due)
        for t in self._tasks:
            if t.next_window <= now and not self._bootstrapping:
                t.window()
                if t.window_interval:
                    t.next_window = self._clock() + t.window_interval  # the loop's clock, maybe virtual
                if t.coordinator.requested:
                    self._handle_requests(t)
        self._run_callbacks(now)
        self._reschedule()

    def _run_callbacks(self, now: float) -> None:
        """The tasks' due scheduler callbacks, earliest timestamp first, each called as window() is: with the
        task's collector (in its transaction, exactly-once) and coordinator, whose requests are handled
        after it returns. Not while bootstrap streams catch up (the stores are partial)."""
        if self._bootstrapping:
            return
        for ti, timers in self._timers:
            if timers.next_due > now:
                continue
            for key, callback in timers.due(now):
                call = f"callback {getattr(callback, '__qualname__', repr(callback))}() for key {key!r}"
                call_task(
                    ti.name,
                    call,
                    callback,
                    key,
                    ti.collector,
                    ti.coordinator,
                    failed=f"scheduler {call} failed",
                    then="; timers are not checkpointed: after a restart, init() schedules again what the "
                    "task's store holds",
                )
                if ti.coordinator.requested:
                    self._handle_requests(ti)

    def _handle_requests(self, ti: TaskInstance) -> None:
        c = ti.coordinator
        c.requested = False
        if c.commit_scope is not None:
            scope, c.commit_scope = c.commit_scope, None
            self._commit(
                self._tasks if scope is RequestScope.ALL_TASKS_IN_CONTAINER else [ti], requested=True
            )
            self._reschedule()
        if c.shutdown_scope is not None:
            scope, c.shutdown_scope = c.shutdown_scope, None
            ti.shutdown_voted = True
            if scope is RequestScope.ALL_TASKS_IN_CONTAINER or all(t.shutdown_voted for t in self._tasks):
                log.info("shutdown requested by task %s", ti.name)
                self._stopping = True

    def _is_caught_up(self) -> bool:
        assert self._end_offsets is not None
        return all(self._next_offset(ssp) >= end or end == 0 for ssp, end in self._end_offsets.items())
