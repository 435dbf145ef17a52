"""Refuses a start whose grouped inputs changed partition counts since the published job model while a
changelog holds the state placed by the old counts (Samza fails such a job only while it runs)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from samsa.kafka import KafkaAdmin, KafkaConsumer
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config
from samsa.runtime.exceptions import StateKeysMovedError
from samsa.runtime.job_model import JobModel, grouped_counts
from samsa.runtime.state import changelogs
from samsa.stores.backends import BLOBSTORE, CHANGELOG, store_backends
from samsa.stores.factory import store_specs
from samsa.streams import SystemStream, SystemStreamPartition

#: stream -> (its partition count in the published job model, its count in the new one)
Changes = dict[SystemStream, tuple[int, int]]


def grouped_changes(
    stored: JobModel, model: JobModel, broadcast: Collection[SystemStreamPartition] = ()
) -> Changes:
    """The streams grouped into tasks in both models whose partition count differs: a key's task follows
    from it. A broadcast stream reaches every task (none of its keys belongs to one), and a stream new to the
    inputs or removed from them moves no key of the others."""
    was = grouped_counts(stored.partition_counts(), broadcast)
    now = grouped_counts(model.partition_counts(), broadcast)
    return {ss: (was[ss], now[ss]) for ss in sorted(was) if ss in now and now[ss] != was[ss]}


def logged_state(job: JobConfig) -> tuple[dict[str, SystemStream], list[str]]:
    """The stores that keep state across starts in a changelog (store -> changelog), and those of them also
    backed up to the blob store."""
    specs = store_specs(job.config)
    backends = {s: store_backends(job.config, spec) for s, spec in specs.items()}
    logged = {s: spec for s, spec in specs.items() if CHANGELOG in backends[s].backup}
    return changelogs(job, logged), sorted(s for s in logged if BLOBSTORE in backends[s].backup)


def holding_data(job: JobConfig, logs: Mapping[str, SystemStream]) -> dict[str, SystemStream]:
    """The `logs` whose topic exists and has a partition with records: a missing or empty changelog holds no
    state to misplace (a start after the changelog was deleted goes through)."""
    by_system: dict[str, dict[str, SystemStream]] = {}
    for store, stream in logs.items():
        by_system.setdefault(stream.system, {})[store] = stream
    found: dict[str, SystemStream] = {}
    for system, stores in by_system.items():
        config = client_config(job, system)
        with KafkaAdmin(config) as admin:
            counts = admin.partition_counts({s.stream for s in stores.values()})
        with KafkaConsumer(config) as consumer:
            for store, stream in stores.items():
                n = counts[stream.stream] or 0
                if any(
                    high > low for low, high in (consumer.watermarks((stream.stream, p)) for p in range(n))
                ):
                    found[store] = stream
    return dict(sorted(found.items()))


def check_state_placement(job: JobConfig, stored: JobModel, model: JobModel) -> None:
    """Raises `StateKeysMovedError` when `model` changes a grouped input's partition count from `stored`'s
    while a changelog holds the job's state; asks the broker only when a count changed."""
    changes = grouped_changes(stored, model, job.broadcast)
    if not changes:
        return
    logs, blob_backed = logged_state(job)
    kept = holding_data(job, logs) if logs else {}
    if not kept:
        return
    raise StateKeysMovedError(
        job.job_key,
        {str(ss): counts for ss, counts in changes.items()},
        {store: str(stream) for store, stream in kept.items()},
        [s for s in blob_backed if s in kept],
        ", ".join(f"{job.logged_store_dir / job.job_key}/*/{s} and {s}-*" for s in kept),
    )
