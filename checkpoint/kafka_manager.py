"""Checkpoints kept in one compacted Kafka topic per job, keyed by task name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samsa.checkpoint.compacted_log import read_latest
from samsa.checkpoint.model import KEY_TYPE_V1, Checkpoint, checkpoint_key, decode, encode, parse_key
from samsa.kafka import KafkaAdmin, KafkaProducer


def checkpoint_topic(job_name: str, job_id: str) -> str:
    """Samza's naming, with our prefix: `__samsa_checkpoint_ver_1_for_<name>_<id>`."""
    return f"__samsa_checkpoint_ver_1_for_{job_name.replace('_', '-')}_{job_id.replace('_', '-')}"


class KafkaCheckpointManager:
    """Reads every task's last checkpoint at start and appends new ones at commit."""

    def __init__(
        self, topic: str, client_config: Mapping[str, Any], producer: KafkaProducer | None = None
    ) -> None:
        self.topic = topic
        self._client_config = dict(client_config)
        self._producer = producer

    def create_resources(self) -> None:
        """Creates the compacted single-partition topic, or checks the existing one."""
        admin = KafkaAdmin(self._client_config)
        try:
            admin.ensure_topic(self.topic, 1, {"cleanup.policy": "compact"})
        finally:
            admin.close()

    def read_last(self) -> dict[str, Checkpoint]:
        """The last checkpoint of every task that has one."""
        out: dict[str, Checkpoint] = {}
        for key, value, offset in read_latest(self._client_config, self.topic):
            kind, task = parse_key(key)
            if kind != KEY_TYPE_V1:
                continue  # other versions are read by their own reader
            if value is None:
                out.pop(task, None)
            else:
                out[task] = decode(value, f"{self.topic}#0@{offset}")
        return out

    def write(self, task_name: str, checkpoint: Checkpoint) -> None:
        """Queues a checkpoint record; durable after `flush()`."""
        assert self._producer is not None, "a write needs the manager built with a producer"
        self._producer.send(self.topic, encode(checkpoint), key=checkpoint_key(task_name), partition=0)

    def flush(self) -> None:
        assert self._producer is not None
        self._producer.flush()
