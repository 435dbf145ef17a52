"""Refuses the first start of a job whose store changelogs already hold committed data records: another
job's state (two jobs naming one changelog), or this job's under another `job.id` (redeployed to reprocess,
its explicit `stores.<s>.changelog` left in place). Restored without a checkpoint, that state would be taken
over and the inputs then read from `samza.offset.default` on top of it: every input counted again.

Samza's `task.transactional.state.retain.existing.state` says what to do on purpose: true takes the state
over, false starts the stores empty (the restore undoes what the changelog holds); unset, such a start is
refused here, once per start, before any store is restored (`JobCoordinator.prepare`).
"""

from __future__ import annotations

import logging

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.keys import RETAIN_EXISTING_STATE
from samsa.runtime.coordinator import coordinator_topic
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.lost_checkpoints import ChangelogState, changelog_states

log = logging.getLogger(__name__)


class InheritedStateError(ConfigError):
    """A job that never started (no checkpoint, no start record) has a store whose changelog already holds
    committed data records, and task.transactional.state.retain.existing.state is unset."""


def check_inherited_state(job: JobConfig, manager: KafkaCheckpointManager, changelog_partitions: int) -> None:
    """For a job that never started (`lost_checkpoints.check_checkpoints_kept` says so): refuses the start
    while a store's changelog holds a committed data record (control records and an empty changelog are no
    state) and `task.transactional.state.retain.existing.state` is unset. The watermarks are asked first; a
    changelog with records is read up to its first data record only."""
    retain = job.config.value(RETAIN_EXISTING_STATE)
    if retain is not None:
        # Set on purpose: the restore keeps (true) or undoes (false) what a changelog holds; nothing to read.
        return
    held = changelog_states(job, changelog_partitions)
    if held:
        raise InheritedStateError(_refusal(job, manager, held))


def _refusal(job: JobConfig, manager: KafkaCheckpointManager, held: dict[str, ChangelogState]) -> str:
    stores = "; ".join(
        f"store {store!r}: changelog {state.changelog} {state.where}, up to {state.offsets} record(s) in "
        f"{state.partitions} partition(s)"
        for store, state in sorted(held.items())
    )
    names = sorted(held)
    topics = ", ".join(sorted({state.changelog.stream for state in held.values()}))
    keys = ", ".join(f"stores.{s}.changelog" for s in names)
    return (
        f"job {job.job_key} has never started (no checkpoint in {manager.topic}, no container start in "
        f"{coordinator_topic(job)}), yet its stores' changelogs already hold committed data ({stores}): "
        "another job's state, or this job's under another job.id. Starting would take that state over and "
        "then read the inputs from samza.offset.default, counting them again on top of it. Nothing was "
        f"restored or read. Ways on: (a) give each store a changelog of its own ({keys}: Samsa derives no "
        f"default name, every job names its changelogs); or (b) delete topic {topics} if its state is no "
        "longer needed (stop every job writing it first); or (c) take the state over on purpose with "
        f"{RETAIN_EXISTING_STATE}=true (the inputs are then read from samza.offset.default on top of it), "
        "or start the stores empty with =false (the restore undoes what the changelog holds: state another "
        "job keeps there is lost to it)"
    )
