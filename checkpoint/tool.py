"""What `samsa checkpoint show` and `samsa checkpoint reset` do, over the job's checkpoint manager."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.exceptions import CheckpointError
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, StoredCheckpoint, choose
from samsa.checkpoint.model import AnyCheckpoint, Checkpoint, CheckpointV2
from samsa.checkpoint.versions import DEFAULT_WRITE_VERSIONS
from samsa.stores.backends import CHANGELOG
from samsa.stores.changelog.exceptions import ChangelogMarkerError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStream, SystemStreamPartition

# The last millisecond of year 9999, the latest time an ISO time can write: a larger number is a typo (and
# past Kafka's 64-bit timestamps, it failed deep in the client).
MAX_TARGET_MS = int(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC).timestamp() * 1000)


def parse_reset_target(text: str) -> str | int:
    """`earliest`, `latest`, epoch milliseconds, or an ISO-8601 time (local time unless it names a zone),
    from 1970 to the end of year 9999."""
    if text in ("earliest", "latest"):
        return text
    if text.isascii() and text.isdigit():
        millis = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.astimezone()  # local time, with the offset in force on that date
            millis = int(moment.timestamp() * 1000)
        except (ValueError, OverflowError):  # not a time; a local time off the calendar's ends
            raise _bad_target(text) from None
    if not 0 <= millis <= MAX_TARGET_MS:
        # Kafka reads -1 and -2 as latest and earliest: a time before 1970 must not become one of them.
        raise _bad_target(text, " (a time from 1970 to the end of year 9999)")
    return millis


def _bad_target(text: str, why: str = "") -> CheckpointError:
    return CheckpointError(
        f"--to {text!r}: write earliest, latest, epoch milliseconds or an ISO time like "
        f"2026-11-23T10:00:00Z{why}"
    )


def require_checkpoints(
    manager: KafkaCheckpointManager, job_name: str, job_id: str, action: str = ""
) -> None:
    """Raises naming the job when its checkpoint topic does not exist: it never ran, or job.name / job.id
    is mistyped (reading the topic would only say librdkafka's unknown partition); or when the topic belongs
    to another job, whose job.name or job.id differs by '_' vs '-' (the topic name blurs them)."""
    if manager.topic_exists():
        owner = manager.read_owner()
        if owner is not None and owner != (job_name, job_id):
            raise CheckpointError(
                f"job.name={job_name!r}, job.id={job_id!r}: checkpoint topic {manager.topic} belongs to "
                f"another job, job.name={owner[0]!r}, job.id={owner[1]!r} (the topic name turns each '_' "
                "into '-'): its checkpoints are not this job's; nothing was read or written. Check job.name "
                "and job.id, and give one of the two jobs another job.name or job.id"
            )
        return
    then = f"; {action}" if action else ""
    raise CheckpointError(
        f"job {job_name} (id {job_id}) has no checkpoints: topic {manager.topic} does not exist "
        f"(has it run? check job.name and job.id){then}"
    )


def live_containers(pid_dir: Path) -> list[str]:
    """Pid files of containers still running on this machine."""
    alive = []
    for pid_file in sorted(pid_dir.glob("container-*.pid")):
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError, FileNotFoundError):
            continue
        except PermissionError:
            pass
        alive.append(f"{pid_file.stem} (pid {pid})")
    return alive


def reset(
    manager: KafkaCheckpointManager,
    tasks: dict[str, list[SystemStreamPartition]],
    target: str | int,
    resolve: Callable[[SystemStreamPartition, str | int], int],
    write_versions: Sequence[int] = DEFAULT_WRITE_VERSIONS,
    read_versions: Sequence[int] | None = None,
) -> dict[str, AnyCheckpoint]:
    """Writes new input offsets at `target` for each task; `resolve` turns a target into an offset.

    Every record the job would still read is rewritten with the new offsets and its state positions kept
    (V1 changelog offsets; V2 id and markers), so whichever version the job reads resumes at `target`; the
    offsets it kept of streams that are no inputs now are dropped (`_with_offsets`). A
    record already outranked by the live-max-age rule is left alone, so the same version keeps winning.
    Returns what the job will read per task (`read_versions`, default the manager's).
    """
    reads = manager.read_versions if read_versions is None else list(read_versions)
    stored = manager.read_records()
    written: dict[str, AnyCheckpoint] = {}
    for task_name, partitions in sorted(tasks.items()):
        offsets = {ssp: resolve(ssp, target) for ssp in partitions}
        records = stored.get(task_name, {})
        winner = choose(list(records.values()), reads, manager.live_max_age_ms)
        rewrite = [r.checkpoint for r in records.values() if _still_read(r, winner, manager)]
        if winner is None:
            have = {c.version for c in rewrite}
            rewrite += [_fresh(v) for v in write_versions if v not in have]
        fresh = [_with_offsets(c, offsets) for c in sorted(rewrite, key=lambda c: c.version)]
        for checkpoint in fresh:
            manager.write(task_name, checkpoint)
        written[task_name] = _read_back(fresh, reads)
    manager.flush()
    return written


def _still_read(
    record: StoredCheckpoint, winner: StoredCheckpoint | None, manager: KafkaCheckpointManager
) -> bool:
    """False for a record the live-max-age rule already outranks: refreshing it would make it win again."""
    if winner is None or record is winner or record.timestamp is None or winner.timestamp is None:
        return True
    return winner.timestamp - record.timestamp <= manager.live_max_age_ms


def _fresh(version: int) -> AnyCheckpoint:
    """A record for a task without one to rewrite (its checkpoint topic lost): no state markers, yet the
    reset keeps the state, and V2 says so (`local_state_kept`): a blob-backed store keeps its local dirs.
    `_with_offsets` keeps a rewritten record's markers, and the state with them: it needs no flag."""
    if version == 2:
        return CheckpointV2(CheckpointId.create(), local_state_kept=True)
    return Checkpoint()


def _with_offsets(checkpoint: AnyCheckpoint, offsets: dict[SystemStreamPartition, int]) -> AnyCheckpoint:
    """The checkpoint with `offsets` as its inputs' only ones: what it kept of partitions the task does not
    read now (`kept_inputs`) is dropped with their marks and counts, so that a stream added back later
    starts as a new input does, at samza.offset.default."""
    streams = {ssp.system_stream for ssp in offsets}
    counts = {ss: n for ss, n in checkpoint.input_counts.items() if ss in streams}
    if isinstance(checkpoint, CheckpointV2):
        marks = {ssp: m for ssp, m in checkpoint.input_marks.items() if ssp in offsets}
        return replace(
            checkpoint, offsets=dict(offsets), input_marks=marks, input_counts=counts, kept_inputs=frozenset()
        )
    return replace(checkpoint, offsets=dict(offsets), input_counts=counts, kept_inputs=frozenset())


def _read_back(written: list[AnyCheckpoint], read_versions: Sequence[int]) -> AnyCheckpoint:
    # All rewritten records are appended together, so priority alone decides among them.
    for version in read_versions:
        for checkpoint in written:
            if checkpoint.version == version:
                return checkpoint
    return written[0]


def with_changelog_markers(checkpoint: AnyCheckpoint, markers: Mapping[str, str]) -> AnyCheckpoint:
    """The checkpoint with the changelog markers of `markers` (store -> marker) in place of its own, its id,
    input offsets and everything else kept: a V2 record holds them as they are, a V1 record (which names no
    store) beside its position on the marker's changelog partition (`Checkpoint.changelog_marks`)."""
    if isinstance(checkpoint, CheckpointV2):
        state = {backend: dict(m) for backend, m in checkpoint.state_markers.items()}
        state[CHANGELOG] = {**state.get(CHANGELOG, {}), **markers}
        return replace(checkpoint, state_markers=state)
    marks = dict(checkpoint.changelog_marks)
    for store, text in markers.items():
        ssp = ChangelogMarker.decode(text, store).changelog
        if ssp in checkpoint.changelog_offsets:
            marks[ssp] = text
    return replace(checkpoint, changelog_marks=marks)


def forget_changelogs(
    manager: KafkaCheckpointManager,
    tasks: Iterable[str],
    changelogs: Mapping[str, SystemStream],
    read_versions: Sequence[int] | None = None,
) -> dict[str, list[str]]:
    """Drops the changelog positions of the stores of `changelogs` (store -> its changelog): their next start
    restores them from what their changelogs hold (`samsa checkpoint forget-changelog`; see `forget_stores`).
    """
    return forget_stores(manager, tasks, changelogs, (CHANGELOG,), read_versions)


def forget_stores(
    manager: KafkaCheckpointManager,
    tasks: Iterable[str],
    stores: Mapping[str, SystemStream | None],
    backends: Collection[str] | None = None,
    read_versions: Sequence[int] | None = None,
    emptied: dict[str, list[str]] | None = None,
) -> dict[str, list[str]]:
    """Drops the markers of `stores` (store -> its changelog, None for one without: a V1 record names no
    store, only the changelog it has a position on) of `backends` (None: every backend's, the changelog
    position and the blob-store snapshot alike) from each task's checkpoint records the job still reads,
    keeping everything else, so that the next start restores those stores without the state the markers
    pointed at (`samsa checkpoint forget-store`). Returns task -> the stores dropped from its checkpoint; a
    task whose checkpoint has none of them is not written.

    A store whose changelog a cut-short start was rebuilding (its marker says `rebuilding`) keeps a marker
    saying the state was given up instead (`given_up`): its changelog holds part of the old state, and
    restoring what it holds would mix old counts with new ones, so the next start empties the store and
    undoes what the changelog holds. `emptied` gets task -> those stores."""
    reads = manager.read_versions if read_versions is None else list(read_versions)
    stored = manager.read_records()
    dropped: dict[str, list[str]] = {}
    for task_name in sorted(tasks):
        records = stored.get(task_name, {})
        winner = choose(list(records.values()), reads, manager.live_max_age_ms)
        kept = [r.checkpoint for r in records.values() if _still_read(r, winner, manager)]
        gone: set[str] = set()
        given_up: set[str] = set()
        fresh = [
            _without_stores(c, stores, backends, gone, given_up)
            for c in sorted(kept, key=lambda c: c.version)
        ]
        if not gone:
            continue
        # Every record still read is written again together, so the same version keeps winning.
        for checkpoint in fresh:
            manager.write(task_name, checkpoint)
        dropped[task_name] = sorted(gone)
        if given_up and emptied is not None:
            emptied[task_name] = sorted(given_up)
    manager.flush()
    return dropped


def _without_stores(
    checkpoint: AnyCheckpoint,
    stores: Mapping[str, SystemStream | None],
    backends: Collection[str] | None,
    gone: set[str],
    given_up: set[str],
) -> AnyCheckpoint:
    """The checkpoint without the markers of `stores` of `backends` (None: all); `gone` gets the stores it
    had one of. A changelog marker of an unsealed rebuild, of the changelog the store has now, is replaced
    by one saying the state was given up (`given_up` gets the store), not dropped."""
    if isinstance(checkpoint, CheckpointV2):
        state: dict[str, dict[str, str]] = {}
        for backend, markers in checkpoint.state_markers.items():
            drop = backends is None or backend in backends
            gone.update(s for s in markers if drop and s in stores)
            state[backend] = {s: m for s, m in markers.items() if not (drop and s in stores)}
            if drop and backend == CHANGELOG:
                for s, m in markers.items():
                    emptied = _given_up(m, s, stores.get(s)) if s in stores else None
                    if emptied is not None:
                        state[backend][s] = emptied
                        given_up.add(s)
        return replace(checkpoint, state_markers=state)
    if backends is not None and CHANGELOG not in backends:
        return checkpoint
    # V1 names no store: a position is a store's when it is on the store's changelog.
    by_stream = {stream: store for store, stream in stores.items() if stream is not None}
    gone.update(
        by_stream[s.system_stream] for s in checkpoint.changelog_offsets if s.system_stream in by_stream
    )
    offsets = {s: o for s, o in checkpoint.changelog_offsets.items() if s.system_stream not in by_stream}
    marks = {s: m for s, m in checkpoint.changelog_marks.items() if s.system_stream not in by_stream}
    for ssp, mark in checkpoint.changelog_marks.items():
        store = by_stream.get(ssp.system_stream)
        emptied = None if store is None else _given_up(mark, store, ssp.system_stream)
        if store is not None and emptied is not None and ssp in checkpoint.changelog_offsets:
            offsets[ssp], marks[ssp] = checkpoint.changelog_offsets[ssp], emptied
            given_up.add(store)
    return replace(checkpoint, changelog_offsets=offsets, changelog_marks=marks)


def _given_up(marker: str, store: str, changelog: SystemStream | None) -> str | None:
    """The marker saying the store's state was given up, for a marker of an unsealed rebuild (or one given up
    already) of `changelog` (the store's changelog now); None for any other marker (dropped)."""
    try:
        decoded = ChangelogMarker.decode(marker, store)
    except ChangelogMarkerError:
        return None
    if changelog is None or decoded.changelog.system_stream != changelog:
        return None  # the store has no changelog now, or another one: nothing of this one is restored
    if decoded.rebuilding is None and not decoded.given_up:
        return None
    return replace(decoded, rebuilding=None, given_up=True).encode()
