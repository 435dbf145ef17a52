"""Checkpoint records: V1 (input offsets, optional changelog positions), V2 (offsets plus state markers)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.checkpoint.exceptions import CheckpointError
from samsa.kafka.record_marks import RecordMark
from samsa.streams import SystemStream, SystemStreamPartition

KEY_TYPE_V1 = "checkpoint"
KEY_TYPE_V2 = "checkpoint-v2"
# Record key type of each version: versions sit side by side in the topic, one record per task each.
KEY_TYPES: Mapping[int, str] = {1: KEY_TYPE_V1, 2: KEY_TYPE_V2}
VERSION_OF_KEY_TYPE: Mapping[str, int] = {t: v for v, t in KEY_TYPES.items()}


@dataclass(frozen=True)
class Checkpoint:
    """V1: input positions of one task. Offsets are the NEXT offset to read (Kafka's convention).

    `changelog_offsets` carries, for V1-only restores, each store changelog partition's position at the
    commit: (checkpoint id, last offset written, or None for an empty changelog).
    """

    offsets: dict[SystemStreamPartition, int] = field(default_factory=dict)
    changelog_offsets: dict[SystemStreamPartition, tuple[str, int | None]] = field(default_factory=dict)
    #: As `CheckpointV2.input_counts`.
    input_counts: dict[SystemStream, int] = field(default_factory=dict)
    #: As `CheckpointV2.kept_inputs`.
    kept_inputs: frozenset[SystemStreamPartition] = frozenset()
    #: The whole changelog marker of a position of `changelog_offsets` that says more than its offset (a
    #: rebuild of a lost changelog begun, the state given up: `samsa.stores.changelog.marker`), opaque here.
    #: Absent from a commit's checkpoint; an older reader ignores it.
    changelog_marks: dict[SystemStreamPartition, str] = field(default_factory=dict)
    version: ClassVar[int] = 1


@dataclass(frozen=True)
class CheckpointV2:
    """V2: input positions plus each state backend's per-store checkpoint markers (opaque strings)."""

    checkpoint_id: CheckpointId
    offsets: dict[SystemStreamPartition, int] = field(default_factory=dict)
    # backend name -> store name -> marker (a changelog position, a blob index id...)
    state_markers: dict[str, dict[str, str]] = field(default_factory=dict)
    #: An exactly-once task's state at this checkpoint (generation, committed version, output sequences,
    #: alignment); None for at-least-once tasks. Opaque JSON here: `samsa.exactly_once` reads it.
    exactly_once: dict[str, Any] | None = None
    #: Per input partition, the mark of its first record when the run that wrote this checkpoint started:
    #: the next start tells by it that the topic was deleted and recreated since (`runtime.offsets`).
    #: Empty in a checkpoint of an older Samsa, and for partitions that were empty.
    input_marks: dict[SystemStreamPartition, RecordMark] = field(default_factory=dict)
    #: Per input stream of the task, its partition count when the job first checkpointed it: a partition
    #: numbered past it that no task checkpointed was added since (`runtime.offsets.added_since`), one
    #: below it merely has no checkpoint yet. Empty in a checkpoint of an older Samsa.
    input_counts: dict[SystemStream, int] = field(default_factory=dict)
    #: The partitions of `offsets` the run that wrote this checkpoint did not read (their stream was
    #: removed from task.inputs): their offsets, marks and counts are those of the checkpoint it started
    #: from, kept so that a stream added back resumes where it stopped (`runtime.state.checkpoint_inputs`).
    kept_inputs: frozenset[SystemStreamPartition] = frozenset()
    #: Written by `samsa checkpoint reset` without a checkpoint to rewrite (the checkpoint topic lost): it
    #: has no state markers, yet the stores keep their state, so a blob-backed store keeps its local dirs
    #: rather than starting empty as one new to the checkpoint does (`stores.blobstore.restore`). A commit's
    #: checkpoint, with the markers of what it restored, never carries it.
    local_state_kept: bool = False
    version: ClassVar[int] = 2


AnyCheckpoint = Checkpoint | CheckpointV2


def checkpoint_key(task_name: str, version: int = 1) -> bytes:
    """The compacted-topic key of a task's checkpoint of `version` (versioned, so V2 sits beside V1)."""
    return json.dumps({"taskName": task_name, "type": KEY_TYPES[version]}, sort_keys=True).encode()


def parse_key(raw: bytes) -> tuple[str, str]:
    """(type, task name) of a checkpoint record key."""
    data = json.loads(raw)
    return str(data["type"]), str(data["taskName"])


def encode(checkpoint: AnyCheckpoint) -> bytes:
    """Either version as JSON with structured partition entries (no dotted strings to split)."""
    data: dict[str, Any]
    if isinstance(checkpoint, CheckpointV2):
        data = {
            "version": 2,
            "checkpointId": str(checkpoint.checkpoint_id),
            "offsets": _offset_entries(checkpoint.offsets),
            "stateCheckpointMarkers": {
                backend: dict(sorted(markers.items()))
                for backend, markers in sorted(checkpoint.state_markers.items())
            },
        }
        if checkpoint.exactly_once is not None:
            data["exactlyOnce"] = checkpoint.exactly_once
        if checkpoint.input_marks:
            # An added field: an older reader (`decode_v2` picks the fields it knows) ignores it.
            data["inputMarks"] = [
                {"system": p.system, "stream": p.stream, "partition": p.partition, **mark.to_json()}
                for p, mark in sorted(checkpoint.input_marks.items())
            ]
        if checkpoint.local_state_kept:
            # An added field, absent when false: an older reader ignores it.
            data["localStateKept"] = True
    else:
        data = {"version": 1, "offsets": _offset_entries(checkpoint.offsets)}
        if checkpoint.changelog_offsets:  # absent when empty: the bytes of offset-only records stay as before
            data["changelogOffsets"] = [
                {
                    "system": p.system,
                    "stream": p.stream,
                    "partition": p.partition,
                    "checkpointId": cp_id,
                    "offset": None if o is None else str(o),
                    # An added field, absent from a commit's entries: an older reader ignores it.
                    **({"marker": checkpoint.changelog_marks[p]} if p in checkpoint.changelog_marks else {}),
                }
                for p, (cp_id, o) in sorted(checkpoint.changelog_offsets.items())
            ]
    if checkpoint.input_counts:
        # An added field, absent when empty: an older reader (either version) ignores it.
        data["inputPartitionCounts"] = [
            {"system": s.system, "stream": s.stream, "partitions": n}
            for s, n in sorted(checkpoint.input_counts.items())
        ]
    if checkpoint.kept_inputs:
        # An added field, absent when empty: an older reader (either version) ignores it, and reads the
        # kept offsets, which stay in "offsets", as any others (a stream added back resumes at them too).
        data["keptInputs"] = [
            {"system": p.system, "stream": p.stream, "partition": p.partition}
            for p in sorted(checkpoint.kept_inputs)
        ]
    return json.dumps(data, separators=(",", ":")).encode()


def decode(raw: bytes, where: str) -> Checkpoint:
    """Parses a V1 record; `where` names the topic and offset for the error message."""
    try:
        data = _object(raw)
        _check_version(data, 1, default=1)
        offsets = _read_offsets(data["offsets"])
        changelog: dict[SystemStreamPartition, tuple[str, int | None]] = {}
        marks: dict[SystemStreamPartition, str] = {}
        for e in data.get("changelogOffsets", []):
            cp_id = str(CheckpointId.parse(e["checkpointId"]))
            changelog[_ssp(e)] = (cp_id, None if e["offset"] is None else int(e["offset"]))
            if isinstance(e.get("marker"), str):
                marks[_ssp(e)] = e["marker"]
    except (ValueError, KeyError, TypeError, AttributeError, CheckpointError) as e:
        raise _unreadable(where, e) from e
    counts = _read_counts(data.get("inputPartitionCounts"))
    return Checkpoint(offsets, changelog, counts, _read_kept(data.get("keptInputs"), offsets), marks)


def decode_v2(raw: bytes, where: str) -> CheckpointV2:
    """Parses a V2 record; unknown fields are ignored so a newer writer's additions do not break us."""
    try:
        data = _object(raw)
        _check_version(data, 2, default=None)
        checkpoint_id = CheckpointId.parse(data["checkpointId"])
        offsets = _read_offsets(data["offsets"])
        markers_in = data.get("stateCheckpointMarkers", {})
        if not isinstance(markers_in, dict):
            raise TypeError("stateCheckpointMarkers is not an object")
        markers: dict[str, dict[str, str]] = {}
        for backend, stores in markers_in.items():
            if not isinstance(stores, dict) or not all(isinstance(v, str) for v in stores.values()):
                raise TypeError(f"the markers of backend {backend!r} are not an object of strings")
            markers[backend] = dict(stores)
        exactly_once = data.get("exactlyOnce")
        if exactly_once is not None and not isinstance(exactly_once, dict):
            raise TypeError("exactlyOnce is not an object")
        input_marks = _read_marks(data.get("inputMarks"))
    except (ValueError, KeyError, TypeError, AttributeError, CheckpointError) as e:
        raise _unreadable(where, e) from e
    input_counts = _read_counts(data.get("inputPartitionCounts"))
    kept = _read_kept(data.get("keptInputs"), offsets)
    local_kept = data.get("localStateKept") is True
    return CheckpointV2(
        checkpoint_id, offsets, markers, exactly_once, input_marks, input_counts, kept, local_kept
    )


def decode_record(key_type: str, raw: bytes, where: str) -> AnyCheckpoint:
    """Parses a record of the version named by its key type."""
    return decode_v2(raw, where) if key_type == KEY_TYPE_V2 else decode(raw, where)


def _offset_entries(offsets: Mapping[SystemStreamPartition, int]) -> list[dict[str, Any]]:
    return [
        {"system": p.system, "stream": p.stream, "partition": p.partition, "offset": str(o)}
        for p, o in sorted(offsets.items())
    ]


def _object(raw: bytes) -> dict[str, Any]:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise TypeError("the record is not a JSON object")
    return data


def _check_version(data: Mapping[str, Any], expected: int, default: int | None) -> None:
    version = data.get("version", default)
    if version != expected:
        raise ValueError(f"schema version {version!r}, expected {expected} (written by a newer samsa?)")


def _ssp(entry: Mapping[str, Any]) -> SystemStreamPartition:
    system, stream, partition = entry["system"], entry["stream"], entry["partition"]
    if not isinstance(system, str) or not isinstance(stream, str) or isinstance(partition, bool):
        raise TypeError(f"bad partition entry {dict(entry)!r}")
    return SystemStreamPartition(system, stream, int(partition))


def _read_offsets(entries: Any) -> dict[SystemStreamPartition, int]:
    if not isinstance(entries, list):
        raise TypeError("offsets is not a list")
    return {_ssp(e): int(e["offset"]) for e in entries}


def _read_marks(entries: Any) -> dict[SystemStreamPartition, RecordMark]:
    # A mark only lets a start check the topic's incarnation: one unreadable is dropped, not fatal.
    marks: dict[SystemStreamPartition, RecordMark] = {}
    for e in entries if isinstance(entries, list) else []:
        try:
            ssp = _ssp(e)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        mark = RecordMark.from_json(e)
        if mark is not None:
            marks[ssp] = mark
    return marks


def _read_counts(entries: Any) -> dict[SystemStream, int]:
    # A count only informs which partitions were added since: one unreadable is dropped, not fatal.
    counts: dict[SystemStream, int] = {}
    for e in entries if isinstance(entries, list) else []:
        try:
            system, stream, n = e["system"], e["stream"], e["partitions"]
        except (KeyError, TypeError):
            continue
        if isinstance(system, str) and isinstance(stream, str) and type(n) is int and n >= 0:
            counts[SystemStream(system, stream)] = n
    return counts


def _read_kept(
    entries: Any, offsets: Mapping[SystemStreamPartition, int]
) -> frozenset[SystemStreamPartition]:
    # The flag only tells a start (and `checkpoint show`) that an offset was kept while its stream was not
    # an input: one unreadable, or of no offset, is dropped, not fatal.
    kept: set[SystemStreamPartition] = set()
    for e in entries if isinstance(entries, list) else []:
        try:
            ssp = _ssp(e)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if ssp in offsets:
            kept.add(ssp)
    return frozenset(kept)


def _unreadable(where: str, error: Exception) -> CheckpointError:
    return CheckpointError(
        f"checkpoint record at {where} is unreadable ({error}); "
        f"reset it with `samsa checkpoint reset` or delete the record"
    )
