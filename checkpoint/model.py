"""Checkpoint V1: the next input offset of every partition a task consumes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from samsa.checkpoint.exceptions import CheckpointError
from samsa.streams import SystemStreamPartition

KEY_TYPE_V1 = "checkpoint"


@dataclass(frozen=True)
class Checkpoint:
    """Input positions of one task. Offsets are the NEXT offset to read (Kafka's convention)."""

    offsets: dict[SystemStreamPartition, int] = field(default_factory=dict)
    version: int = 1


def checkpoint_key(task_name: str) -> bytes:
    """The compacted-topic key of a task's checkpoint (versioned, so V2 can sit beside V1)."""
    return json.dumps({"taskName": task_name, "type": KEY_TYPE_V1}, sort_keys=True).encode()


def parse_key(raw: bytes) -> tuple[str, str]:
    """(type, task name) of a checkpoint record key."""
    data = json.loads(raw)
    return str(data["type"]), str(data["taskName"])


def encode(checkpoint: Checkpoint) -> bytes:
    """Checkpoint V1 as JSON with structured partition entries (no dotted strings to split)."""
    entries = [
        {"system": p.system, "stream": p.stream, "partition": p.partition, "offset": str(o)}
        for p, o in sorted(checkpoint.offsets.items())
    ]
    return json.dumps({"version": 1, "offsets": entries}, separators=(",", ":")).encode()


def decode(raw: bytes, where: str) -> Checkpoint:
    """Parses a V1 record; `where` names the topic and offset for the error message."""
    try:
        data = json.loads(raw)
        offsets = {
            SystemStreamPartition(e["system"], e["stream"], int(e["partition"])): int(e["offset"])
            for e in data["offsets"]
        }
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(
            f"checkpoint record at {where} is unreadable ({e}); "
            f"reset it with `samsa checkpoint reset` or delete the record"
        ) from e
    return Checkpoint(offsets)
