"""Takeover on a new job model: the start that publishes a model moving tasks between containers fences the
containers that ran those tasks under the replaced model, wherever they run, before any of its containers
reads a checkpoint or restores a store."""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from samsa.checkpoint.compacted_log import read_latest
from samsa.checkpoint.starts import ContainerStart, start_key
from samsa.kafka import KafkaProducer
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager, checkpoint_system, client_config, coordinator_topic
from samsa.runtime.job_model import ContainerModel, JobModel

log = logging.getLogger(__name__)

# How long a takeover waits once it fenced containers of the replaced model: a live one learns of its
# fencing at its next look for a newer start (every 0.1 s while it runs) and stops without writing more;
# the wait keeps its last changelog writes from landing after a new owner of its tasks restored.
TAKEOVER_WAIT_S = 1.0


def checkpoint_producer_config(job: JobConfig, container_id: str) -> dict[str, Any]:
    """The client config of a container's checkpoint producer, whose transactional id is the container's."""
    config = client_config(job, checkpoint_system(job), "producer")
    # One id per container, the same at every start (any host, any deployment): a start registering it
    # fences the older ones, whose checkpoint transactions then fail. A transactional producer is
    # idempotent, with acks=all, whatever the system's producer settings say (an at-least-once job's
    # `acks=1` with `enable.idempotence=false` is for its outputs).
    config["transactional.id"] = f"samsa-checkpoint-{job.job_key}-container-{container_id}"
    config.pop("enable.idempotence", None)
    config.pop("acks", None)
    # Connected to every broker at once, init_transactions takes 1-3 ms on the dev broker; with sparse
    # connections it waited for librdkafka's connection timers: 53 ms, and 503 ms one start in three.
    config.setdefault("enable.sparse.connections", False)
    # A start killed inside a checkpoint transaction holds every read_committed reader of the topic
    # (other containers' starts, `samsa checkpoint show`) until the broker aborts it: 15 s, not
    # librdkafka's 60 s; a checkpoint transaction lasts milliseconds.
    config.setdefault("transaction.timeout.ms", 15_000)
    return config


def moved_containers(replaced: JobModel, model: JobModel) -> list[str]:
    """The containers of `replaced` whose tasks differ in `model` (or that `model` no longer has)."""
    now = {c.id: c.tasks for c in model.containers}
    return [c.id for c in replaced.containers if now.get(c.id) != c.tasks]


def assignment(container: ContainerModel) -> str:
    """A digest of the tasks a container runs (and their partitions), recorded in its start record."""
    text = repr([(t.name, sorted(t.partitions)) for t in sorted(container.tasks, key=lambda t: t.name)])
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def fence_replaced(job: JobConfig, replaced: JobModel, model: JobModel) -> list[str]:
    """Fences every container of `replaced` whose tasks `model` moves: registers its checkpoint producer
    (its next checkpoint transaction fails) and records a start of it that names the new model (its start
    watch sees it and it stops without committing), then waits for live ones to notice. A container whose
    newest start already runs its tasks of `model` (another start of the job took over first) is left be.
    Call before publishing `model`: a takeover that fails leaves the old model, and the next start redoes
    it. Returns the ids fenced."""
    moved = moved_containers(replaced, model)
    if not moved:
        return []
    wanted = {c.id: assignment(c) for c in model.containers}
    moved = [c for c in moved if wanted.get(c) is None or _newest_assignment(job, c) != wanted[c]]
    if not moved:
        return []
    reason = (
        f"the job model changed (to {model.fingerprint}, {len(model.containers)} container(s)); a start "
        f"of the job with the new model took this container's tasks over"
    )
    for container_id in moved:
        now_ms = int(time.time() * 1000)
        producer = KafkaProducer(checkpoint_producer_config(job, container_id))
        try:
            manager = checkpoint_manager(job, producer, epoch=now_ms)
            manager.init_fencing(ContainerStart.here(job.job_key, container_id, now_ms, now_ms, reason))
        finally:
            producer.close(0)
    log.info(
        "job model %s replaces %s: container(s) %s of the old model are fenced (one still running anywhere "
        "stops without committing; a new owner of its tasks resumes from its last checkpoint)",
        model.fingerprint,
        replaced.fingerprint,
        ", ".join(moved),
    )
    time.sleep(TAKEOVER_WAIT_S)
    return moved


def _newest_assignment(job: JobConfig, container_id: str) -> str:
    """The assignment the newest start record of the container names ("" when none does)."""
    # Uncommitted records too: a start record is written in its start's transaction.
    config = {**client_config(job, checkpoint_system(job)), "isolation.level": "read_uncommitted"}
    key = start_key(container_id)
    for record in reversed(read_latest(config, coordinator_topic(job))):
        if record.key == key and record.value is not None:
            start = ContainerStart.decode(record.value)
            return start.assignment if start is not None else ""
    return ""
