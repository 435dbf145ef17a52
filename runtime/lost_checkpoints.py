"""Tells a job's first start ("no checkpoint yet") from a start whose checkpoints are gone (its checkpoint
topic deleted or emptied), and refuses the latter when the job holds durable state: restored state plus
inputs read again from `samza.offset.default` would count every input twice."""

from __future__ import annotations

import json
import logging

from samsa.checkpoint.compacted_log import read_latest
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.checkpoint.starts import START_KEY_TYPE
from samsa.kafka import KafkaAdmin, KafkaConsumer, KafkaSystemError
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_system, client_config, coordinator_topic
from samsa.runtime.exceptions import ConfigError
from samsa.stores.factory import store_specs

log = logging.getLogger(__name__)


class CheckpointsLostError(ConfigError):
    """The job's containers started before, its checkpoint topic holds no checkpoint, and its stores hold
    state: a start would restore that state and process the inputs again on top of it."""


def started_containers(job: JobConfig) -> list[str]:
    """Ids of the job's containers that have a start record in its coordinator topic (they started)."""
    config = {**client_config(job, checkpoint_system(job)), "isolation.level": "read_uncommitted"}
    admin = KafkaAdmin(client_config(job, checkpoint_system(job)))
    try:
        if not admin.partition_counts([coordinator_topic(job)]).get(coordinator_topic(job)):
            return []  # the job never ran (or job.name / job.id names another)
    finally:
        admin.close()
    started = []
    for record in read_latest(config, coordinator_topic(job)):
        try:
            key = json.loads(record.key)
        except ValueError:
            continue
        if isinstance(key, dict) and key.get("type") == START_KEY_TYPE and record.value is not None:
            started.append(str(key.get("container")))
    return sorted(started)


def stores_with_state(job: JobConfig, changelog_partitions: int) -> dict[str, str]:
    """Store -> where its durable state lies: a changelog holding records. A store backed up to the blob
    store only has no state without a checkpoint (its snapshots are named by checkpoints; its restore starts
    it empty), and its local directories also remain after a first start whose start-up commit failed."""
    # state builds on the coordinator, as this module does
    from samsa.runtime.state import changelogs

    specs = store_specs(job.config)
    held: dict[str, str] = {}
    consumers: dict[str, KafkaConsumer] = {}
    try:
        for store, stream in changelogs(job, specs).items():
            if stream.system not in consumers:
                consumers[stream.system] = KafkaConsumer(client_config(job, stream.system))
            consumer = consumers[stream.system]
            for partition in range(changelog_partitions):
                try:
                    low, high = consumer.watermarks((stream.stream, partition))
                except KafkaSystemError:  # a changelog not created yet (or smaller) holds nothing there
                    break
                if high > low:
                    held[store] = f"changelog {stream} holds records"
                    break
    finally:
        for consumer in consumers.values():
            consumer.close()
    return held


def check_checkpoints_kept(
    job: JobConfig, manager: KafkaCheckpointManager, changelog_partitions: int
) -> None:
    """Refuses the start of a job that started before, has no checkpoint of any task, and holds durable
    state. Every start runs a start-up commit right after its restore, so started containers without any
    checkpoint mean the checkpoints were lost; state seeded before a first start (`samsa state bootstrap`)
    comes with checkpoints, and a genuine first start has no start records."""
    if manager.topic_exists() and manager.read_records((1, 2)):
        return
    started = started_containers(job)
    if not started:
        return  # no checkpoint *yet*: a first start keeps whatever state was seeded
    held = stores_with_state(job, changelog_partitions)
    if not held:
        return
    stores = "; ".join(f"store {s!r}: {where}" for s, where in sorted(held.items()))
    raise CheckpointsLostError(
        f"job {job.job_key} has started before (containers {', '.join(started)} in "
        f"{coordinator_topic(job)}) but its checkpoint topic {manager.topic} holds no checkpoint (deleted or "
        f"emptied), while its stores hold state ({stores}): starting would restore that state and read the "
        f"inputs again from samza.offset.default, counting them twice. Nothing was restored or read. Ways "
        f"on: restore the checkpoint topic {manager.topic}; or, to reprocess on purpose, start the state "
        f"over (delete the stores' changelog topics, their local directories under "
        f"{job.logged_store_dir} and their blob snapshots; see docs/state.md); or write fresh checkpoints "
        f"with `samsa checkpoint reset --to earliest|latest|<time>` (the state is kept) and start again"
    )
