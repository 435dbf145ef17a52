"""A container's exactly-once tasks: their setup at start, version cuts, rewinds and metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from samsa.checkpoint.model import AnyCheckpoint, CheckpointV2
from samsa.exactly_once.alignment import BarrierAligner, Rewind
from samsa.exactly_once.buffer import EosBuffer, buffer_dir
from samsa.exactly_once.changelog import abort_record, commit_record, write_headers
from samsa.exactly_once.protocol import Producer
from samsa.exactly_once.task import EosState, EosTask
from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.message import Headers
from samsa.runtime import metrics as m
from samsa.runtime.collector import ExactlyOnceCollector
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_system, client_config
from samsa.runtime.exceptions import ContainerError
from samsa.runtime.run_loop import PartitionBuffer
from samsa.runtime.state import ContainerState
from samsa.runtime.task_instance import TaskInstance
from samsa.runtime.validation import check_exactly_once_sinks
from samsa.serde.registry import SerdeRegistry
from samsa.stores.storage_manager import task_dir_name
from samsa.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)

_INIT_THREADS = 16  # tasks whose transactional producers register at once


def transactional_id(job: JobConfig, task: str) -> str:
    """The task's transactional.id: the same at every start, so a new start fences the old one."""
    return f"samsa-eos-{job.job_key}-{task}"


def eos_dir(job: JobConfig, task: str) -> Path:
    """The task's exactly-once directory (its buffer of early arrivals)."""
    return job.non_logged_store_dir / job.job_key / "exactly-once" / task_dir_name(task)


class ExactlyOnceTasks:
    """Sets up and drives the exactly-once side of a container's tasks (docs/exactly-once.md)."""

    def __init__(
        self,
        job: JobConfig,
        state: ContainerState,
        producers: Mapping[str, KafkaProducer],
        serdes: SerdeRegistry,
        new_producer: Callable[[dict[str, Any]], KafkaProducer],
        registry: m.MetricsRegistry,
        clock: Callable[[], float],
        version_clock: Callable[[], float] = time.time,
        read_for: Callable[[TaskInstance], Mapping[SystemStreamPartition, int]] = lambda ti: {},
    ) -> None:
        """`version_clock` (seconds, the same on every host: wall time) numbers the source tasks' versions;
        `read_for(task)`: the offsets of partitions another task reads for it, checkpointed with its own
        (the container's `_read_for`)."""
        self.job = job
        self._state = state
        self._producers = producers
        self._serdes = serdes
        self._new_producer = new_producer
        self._registry = registry
        self._clock = clock
        self._version_clock = version_clock
        self._read_for = read_for
        #: Every task's transactional producer (closed with the container's).
        self.sinks: list[KafkaProducer] = []
        #: Set by the container's graceful stop before its final commit (`cut_source`).
        self.stopping = False
        self._reported: dict[str, float] = {}
        self._alignment_wait: dict[str, m.Timer] = {}
        self._changelogs: dict[str, list[SystemStreamPartition]] = {}

    # -- start --------------------------------------------------------------------------------------
    def abort_changelogs(self, checkpoints: Mapping[str, AnyCheckpoint]) -> None:
        """Before the restore: each task's abort record (its coming generation, its checkpointed version)
        on its changelogs, so that writes of an older start landing after it are void (a zombie's)."""
        job = self.job
        for task in self._state.storage.contexts:
            restored = _restored_state(task, checkpoints.get(task))
            identity = Producer.of(job.name, job.id, task)
            self._changelog_control(task, abort_record(identity, restored.generation + 1, restored.committed))
        for producer in self._producers.values():
            producer.flush()

    def set_up(self, tasks: Sequence[TaskInstance], checkpoints: Mapping[str, AnyCheckpoint]) -> None:
        """Before the loop: each task's generation, aligner, buffer, transactional producer and collector."""
        job = self.job
        counts = self._partition_counts()
        grouped = [ss for ss in job.inputs if ss not in {p.system_stream for p in job.broadcast}]
        job_tasks = max((counts[ss] for ss in grouped), default=0)
        system = checkpoint_system(job)
        check_exactly_once_sinks(job)
        outputs = {
            ss: (self._producers[ss.system].send, counts[ss]) for ss in job.outputs if job.intermediate(ss)
        }
        for ti in tasks:
            restored = _restored_state(ti.name, checkpoints.get(ti.name))
            inputs = [ssp for ssp in ti.offsets if job.intermediate(ssp.system_stream)]
            aligner: BarrierAligner | None = None
            buffer: EosBuffer | None = None
            if inputs:
                if restored.alignment is not None:
                    aligner = BarrierAligner.from_dict(restored.alignment, inputs, clock=self._clock)
                else:
                    aligner = BarrierAligner(
                        inputs, clock=self._clock, current_version=restored.committed + 1
                    )
                # The crash rule: a checkpoint never passes a buffered record, so what was buffered is read
                # again from the inputs.
                buffer = EosBuffer(buffer_dir(eos_dir(job, ti.name)), job.eos_buffer_max_bytes)
                buffer.clear()
            eos = EosTask(
                Producer.of(job.name, job.id, ti.name), job_tasks, restored, outputs, aligner, buffer
            )
            eos.committed_offsets = dict(ti.offsets)
            config = client_config(job, system, "producer")
            config["transactional.id"] = transactional_id(job, ti.name)
            sink = self._new_producer(config)
            sink.name_settings(f"systems.{system}.producer.")  # a too-large record's error names the key
            self.sinks.append(sink)
            ti.eos, ti.sink = eos, sink
            ti.collector = ExactlyOnceCollector(job, self._producers, self._serdes, eos, sink, ti.name)
            self._state.transactions[ti.name] = sink
            self._metrics(ti, eos)
            log.info(
                "task %s: exactly-once generation %d from version %d (%s)",
                ti.name,
                eos.generation,
                eos.committed,
                "aligned on " + ", ".join(sorted({str(p.system_stream) for p in inputs}))
                if inputs
                else "source",
            )
        # Registering an id aborts the open transaction of the task's previous start and fences it: a
        # broker round trip or two per task, run side by side (they wait on the network, not the GIL).
        with ThreadPoolExecutor(min(len(tasks), _INIT_THREADS) or 1, "samsa-eos-init") as pool:
            for future in [pool.submit(_open_transaction, ti.sink) for ti in tasks if ti.sink is not None]:
                future.result()

    def mark_inputs(self, buffers: Sequence[PartitionBuffer]) -> None:
        """Routes the intermediate inputs of aligned tasks through their aligners; the other inputs of
        `process` refuse exactly-once records (the upstream job writes them as intermediate, this one does
        not read them so: its control records would reach `process`)."""
        for buf in buffers:
            eos = buf.task.eos
            if eos is None or buf.handler is not None:
                continue
            intermediate = self.job.intermediate(buf.ssp.system_stream)
            buf.eos = intermediate and eos.aligner is not None
            buf.refuse_eos = not intermediate

    def announce(self, tasks: Sequence[TaskInstance]) -> None:
        """After the start-up checkpoint made the new generations durable: the restore commands."""
        for ti in tasks:
            assert ti.eos is not None
            ti.eos.send_restore_commands()
        for producer in self._producers.values():
            producer.flush()

    # -- versions -----------------------------------------------------------------------------------
    def commit(self, ti: TaskInstance, advance: bool, target: int | None = None) -> None:
        """Checkpoints the task: with `advance`, cuts its open version (then sends its markers), a source
        task's numbered `target` (default: the clock's version) or one more than its last; without,
        re-commits the last version (a new generation at start or after a rewind)."""
        eos = ti.eos
        assert eos is not None
        start = time.perf_counter_ns()
        if advance:
            version = self._clock_version() if target is None else target
            offsets, state = eos.cut(ti.offsets, version, ti.processed.value)
            # The version's store writes reach the changelog in this commit's flush, tagged with it.
            context = self._state.storage.contexts[ti.name]
            context.changelog_headers = write_headers(eos.producer, eos.generation, eos.committed)
        else:
            offsets, state = dict(eos.committed_offsets), eos.state()
        self._state.pending_eos[ti.name] = state
        # Not among `committed_offsets`: a rewind restores those as the partitions the task reads.
        checkpointed = {**self._read_for(ti), **offsets}
        self._state.commit_managers[ti.name].commit(checkpointed, wait=True, requested=True)
        eos.committed_offsets = offsets
        if advance:
            eos.send_markers()
            self._changelog_control(ti.name, commit_record(eos.producer, eos.generation, eos.committed))
            if eos.aligner is not None:
                self._alignment_wait[ti.name].update_ns(int(eos.aligner.last_alignment_wait * 1e9))
        ti.committed(time.perf_counter_ns() - start)
        self.schedule(ti)

    def schedule(self, ti: TaskInstance) -> None:
        """Sets the task's next commit timer, by the container's clock (maybe virtual). A source task's
        fires on the version clock's next multiple of task.commit.ms: every source task then cuts a version at
        about the same moment, so a downstream barrier waits for the skew between their clocks, not for up
        to a whole interval between timers started at different times."""
        interval = ti.commit_interval
        if not interval:
            return
        now = self._clock()
        assert ti.eos is not None
        if ti.eos.aligner is not None:
            ti.next_commit = now + interval
            return
        wall_ms = self._version_clock() * 1000
        step = self.job.commit_ms
        ti.next_commit = now + ((wall_ms // step + 1) * step - wall_ms) / 1000

    def cut_source(self, ti: TaskInstance) -> None:
        """A source task's commit timer (or request): cuts its version unless it is idle and the clock's
        version has not moved past its last (an idle task keeps pace with the clock, no faster). At a
        graceful stop (`stopping`): cuts on the clock's next version boundary."""
        eos = ti.eos
        assert eos is not None and eos.aligner is None
        if self.stopping:
            # A graceful stop cuts on the clock's next boundary, idle or not: every task of the job that
            # stops within one interval ends on the same version, which their downstream then aligns (cut
            # at the current boundary, a task that had processed since it ended one version further than an
            # idle one, and the downstream waited for the idle one's next marker until the job ran again).
            # A later start numbers its versions above it anyway.
            self.commit(ti, advance=True, target=self._clock_version() + self.job.commit_ms)
        elif not eos.idle(ti.processed.value) or self._clock_version() > eos.committed:
            self.commit(ti, advance=True)

    def _clock_version(self) -> int:
        """The clock's version: its last multiple of task.commit.ms, in milliseconds."""
        # In milliseconds whatever the interval, so that jobs with different task.commit.ms sharing an
        # intermediate stream number versions alike (counted in intervals, a 1 s job's versions ran 5x ahead
        # of a 5 s job's, and their downstream waited ever longer for the slow job's clock to reach the fast
        # one's records). Rounded down to the interval, so that the tasks cutting on one timer boundary,
        # a few ms apart, cut the same version: their downstream aligns it at once.
        step = self.job.commit_ms
        return int(self._version_clock() * 1000) // step * step if step > 0 else 0

    def abort_open(self, ti: TaskInstance) -> None:
        """At a stop without a cut (an aligned task between barriers): its open version's sink records go;
        the next start reads those inputs again."""
        if ti.sink is not None:
            ti.sink.abort_transaction()

    def rewind(self, ti: TaskInstance, rewind: Rewind) -> None:
        """Back to the last checkpoint: the open version's store writes, sink records and buffered records
        go, inputs restart at the checkpointed offsets, a new generation says so downstream."""
        eos, sink = ti.eos, ti.sink
        assert eos is not None and sink is not None and eos.buffer is not None
        dropped = ti.storage.discard_uncommitted()
        sink.abort_transaction()
        sink.begin_transaction()
        eos.buffer.clear()
        ti.offsets.clear()
        ti.offsets.update(eos.committed_offsets)
        eos.rewound()
        self.commit(ti, advance=False)
        eos.send_restore_commands()
        log.info(
            "task %s: rewound to version %d (%d uncommitted store keys dropped); generation %d",
            ti.name,
            rewind.to_version,
            dropped,
            eos.generation,
        )

    def check_barriers(self, ti: TaskInstance) -> None:
        """On the task's commit timer: name the upstream producers a barrier has waited on too long."""
        eos = ti.eos
        if eos is None or eos.aligner is None:
            return
        wait = eos.aligner.alignment_wait()
        if wait * 1000 < self.job.eos_barrier_timeout_ms:
            return
        now = self._clock()
        if now - self._reported.get(ti.name, float("-inf")) < self.job.eos_barrier_timeout_ms / 1000:
            return
        self._reported[ti.name] = now
        missing = eos.aligner.waiting_for()
        log.warning(
            "task %s: version %d has waited %.1f s (task.eos.barrier.timeout.ms=%d) for markers of: %s; "
            "processing of the later versions waits (buffered on disk) until they come",
            ti.name,
            eos.aligner.current_version,
            wait,
            self.job.eos_barrier_timeout_ms,
            ", ".join(
                f"{p} from {'an unseen producer' if q is None else f'producer {q}'}" for p, q in missing
            ),
        )

    # -- internals ----------------------------------------------------------------------------------
    def _changelog_control(self, task: str, record: tuple[bytes, bytes, Headers]) -> None:
        key, value, headers = record
        changelogs = self._changelogs.get(task)
        if changelogs is None:
            changelogs = self._changelogs[task] = self._state.storage.changelogs(task)
        for ssp in changelogs:
            self._producers[ssp.system].send(ssp.stream, value, key, ssp.partition, headers)

    def _partition_counts(self) -> dict[SystemStream, int]:
        streams = {*self.job.inputs, *(ss for ss in self.job.outputs if self.job.intermediate(ss))}
        out: dict[SystemStream, int] = {}
        for system in sorted({ss.system for ss in streams}):
            admin = KafkaAdmin(client_config(self.job, system))
            try:
                wanted = [ss for ss in streams if ss.system == system]
                counts = admin.partition_counts(ss.stream for ss in wanted)
            finally:
                admin.close()
            for ss in wanted:
                count = counts.get(ss.stream)
                if not count:
                    raise ContainerError(f"stream {ss} does not exist; create it (or let the job create it)")
                out[ss] = count
        return out

    def _metrics(self, ti: TaskInstance, eos: EosTask) -> None:
        r, labels = self._registry, {"task": ti.name}
        r.counter_fn(
            m.EOS_VERSIONS_COMMITTED,
            "Exactly-once versions the task committed since start",
            labels,
            lambda: eos.versions_committed,
        )
        r.counter_fn(m.EOS_REWINDS, "Rewinds to the last checkpoint since start", labels, lambda: eos.rewinds)
        r.counter_fn(
            m.EOS_REREAD,
            "Early records left unbuffered over task.eos.buffer.max.bytes, read again after a cut",
            labels,
            lambda: eos.reread_messages,
        )
        r.counter_fn(
            m.EOS_VERSIONS_MERGED,
            "Aligned versions passed without a checkpoint of their own while catching up",
            labels,
            lambda: eos.versions_merged,
        )
        aligner, buffer = eos.aligner, eos.buffer
        if aligner is None or buffer is None:
            return
        r.gauge_fn(
            m.EOS_BUFFERED_MESSAGES, "Early arrivals buffered on disk", labels, lambda: buffer.messages
        )
        r.gauge_fn(
            m.EOS_BUFFERED_BYTES,
            "Bytes of early arrivals buffered on disk",
            labels,
            lambda: buffer.bytes_used,
        )
        r.counter_fn(
            m.EOS_DUPLICATES_DROPPED,
            "Duplicate records dropped (already seen sequence, or a committed version)",
            labels,
            lambda: aligner.duplicates_dropped,
        )
        r.counter_fn(
            m.EOS_STALE_DROPPED,
            "Records of restarted upstream generations dropped (voided by a restore command)",
            labels,
            lambda: aligner.stale_dropped,
        )
        r.gauge_fn(
            m.EOS_BARRIER_MISSING,
            "Upstream (partition, producer) pairs the barrier waits for beyond task.eos.barrier.timeout.ms",
            labels,
            lambda: (
                len(aligner.waiting_for())
                if aligner.alignment_wait() * 1000 >= self.job.eos_barrier_timeout_ms
                else 0
            ),
        )
        self._alignment_wait[ti.name] = r.timer(
            m.EOS_ALIGNMENT_WAIT_SECONDS,
            "From the first marker of a version to its last, per version",
            labels,
        )


def _open_transaction(sink: KafkaProducer) -> None:
    sink.init_transactions()
    sink.begin_transaction()


def _restored_state(task: str, checkpoint: AnyCheckpoint | None) -> EosState:
    if isinstance(checkpoint, CheckpointV2) and checkpoint.exactly_once is not None:
        return EosState.from_dict(checkpoint.exactly_once, task)
    if checkpoint is not None and checkpoint.offsets:
        log.warning(
            "task %s: its checkpoint has no exactly-once state (written under at-least-once?): starting at "
            "version 1 from its offsets",
            task,
        )
    return EosState()
