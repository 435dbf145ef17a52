"""What `samsa checkpoint show` and `samsa checkpoint reset` do, over the job's checkpoint manager."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from samsa.checkpoint.exceptions import CheckpointError
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.model import Checkpoint
from samsa.streams import SystemStreamPartition


def parse_reset_target(text: str) -> str | int:
    """`earliest`, `latest`, epoch milliseconds, or an ISO-8601 time (local time unless it names a zone)."""
    if text in ("earliest", "latest"):
        return text
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CheckpointError(
            f"--to {text!r}: write earliest, latest, epoch milliseconds "
            f"or an ISO time like 2026-11-23T10:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, with the offset in force on that date
    return int(moment.timestamp() * 1000)


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
) -> dict[str, Checkpoint]:
    """Writes a new checkpoint for each task at `target`; `resolve` turns a target into an offset."""
    written = {}
    for task_name, partitions in sorted(tasks.items()):
        checkpoint = Checkpoint({ssp: resolve(ssp, target) for ssp in partitions})
        manager.write(task_name, checkpoint)
        written[task_name] = checkpoint
    manager.flush()
    return written
