"""Checks of a job that need code loaded (task class, serdes, stores), run once before containers start."""

from __future__ import annotations

from samsa.checkpoint.versions import READ_VERSIONS_KEY, WRITE_VERSIONS_KEY, checkpoint_versions
from samsa.exceptions import SamsaError
from samsa.runtime.classpath import load_object
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.task import StreamTask
from samsa.serde.registry import SerdeRegistry
from samsa.stores.backends import BLOBSTORE, store_backends
from samsa.stores.factory import store_specs
from samsa.streams import SystemStream


def task_class(job: JobConfig) -> type[StreamTask]:
    """The `task.class`, imported and checked to be a StreamTask."""
    found = load_object(job.task_class, "task.class")
    if not (isinstance(found, type) and issubclass(found, StreamTask)):
        raise ConfigError(f"task.class={job.task_class!r} is not a samsa.StreamTask subclass")
    return found


def serde_key(job: JobConfig, stream: SystemStream, part: str) -> str:
    """The config key that names a stream's `key` or `msg` serde (the stream's own, else its system's)."""
    own = f"systems.{stream.system}.streams.{stream.stream}.samza.{part}.serde"
    return own if own in job.config else f"systems.{stream.system}.samza.{part}.serde"


def check_job(job: JobConfig) -> None:
    """Everything a container would fail on at start, found before any starts; errors name the key."""
    task_class(job)
    serdes = SerdeRegistry(job.config)
    for stream in (*job.inputs, *job.outputs):
        settings = job.stream(stream)
        for part, name in (("key", settings.key_serde), ("msg", settings.msg_serde)):
            _resolve(serdes, name, serde_key(job, stream, part), stream.stream, part == "key")
    specs = store_specs(job.config)
    for store, spec in specs.items():
        _resolve(serdes, spec.key_serde, f"stores.{store}.key.serde", None, True)
        _resolve(serdes, spec.msg_serde, f"stores.{store}.msg.serde", None, False)
    for store in job.adjunct_inputs:
        if store in specs and store_backends(job.config, specs[store]).durable:
            raise ConfigError(
                f"stores.{store}.backup.factories: store {store!r} is an adjunct store, rebuilt from its "
                f"stream; set stores.{store}.backup.factories= (empty) to keep the job-wide backup off it"
            )
        if store not in specs:
            raise ConfigError(
                f"stores.{store}.factory is required: stores.{store}.adstore.input names store {store!r}"
            )
    _check_blob_checkpoints(
        job, [s for s, spec in specs.items() if BLOBSTORE in store_backends(job.config, spec).backup]
    )


def _check_blob_checkpoints(job: JobConfig, blob_stores: list[str]) -> None:
    # Snapshot index ids live in Checkpoint V2 only: without it a blob-backed store restores nothing
    # (Samza's silent no-op when reading V1 only).
    if not blob_stores:
        return
    write, read = checkpoint_versions(job.config)
    for key, versions in ((WRITE_VERSIONS_KEY, write), (READ_VERSIONS_KEY, read)):
        if 2 not in versions or (key == READ_VERSIONS_KEY and versions[0] != 2):
            raise ConfigError(
                f"{key}={','.join(map(str, versions))}: store(s) {', '.join(blob_stores)} are backed up "
                "to the blob store, whose snapshots only Checkpoint V2 records; "
                + ("add 2 to it" if key == WRITE_VERSIONS_KEY else "read version 2 first (2,1)")
            )


def _resolve(serdes: SerdeRegistry, name: str, key: str, topic: str | None, is_key: bool) -> None:
    try:
        serdes.get(name, topic, is_key=is_key)
    except SamsaError as e:
        raise ConfigError(f"{key}={name}: {e}") from e
