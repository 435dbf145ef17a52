"""A job config written as a job file for the CLI, and the input offsets its checkpoints hold."""

from __future__ import annotations

import json
from pathlib import Path

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config
from samsa.streams import SystemStreamPartition


def write_job_file(tmp_path: Path, config: dict[str, str]) -> Path:
    """`config` as `tmp_path`/job.yaml (JSON is YAML)."""
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(config))
    return path


def checkpointed_offsets(config: dict[str, str]) -> dict[str, dict[SystemStreamPartition, int]]:
    """Task -> the input offsets of its last checkpoint."""
    job = JobConfig(Config(config))
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    return {task: cp.offsets for task, cp in manager.read_last().items()}
