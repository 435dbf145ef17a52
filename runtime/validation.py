"""Checks of a job that need code loaded (task class, serdes, stores), run once before containers start."""

from __future__ import annotations

import difflib
import logging
import weakref
from collections.abc import Mapping

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.checkpoint.versions import READ_VERSIONS_KEY, WRITE_VERSIONS_KEY, checkpoint_versions
from samsa.exceptions import SamsaError
from samsa.runtime.classpath import load_object
from samsa.runtime.config.job import JobConfig, parse_stream
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.task import StreamTask
from samsa.runtime.task_instance import check_constructor
from samsa.serde.registry import SerdeRegistry
from samsa.stores.backends import BLOBSTORE, store_backends
from samsa.stores.changelog.admin import check_unique_changelogs
from samsa.stores.factory import StoreSpec, check_factory, store_specs
from samsa.stores.rocksdb_options import RocksDbMemory
from samsa.streams import SystemStream

log = logging.getLogger(__name__)

_MAX_PORT = 65535

_STREAM_KEY = "systems.<sys>.streams.<stream>."
_DLQ_KEY = "task.deserialization.dlq.stream"
# Per-stream settings that decide where or in what order a stream is read: one naming no stream of the job
# is a typo that silently reads the real stream otherwise (from `upcoming`, skipping what is there).
# The others (serdes) may be for a stream the task sends to without listing it in task.outputs, as Samza
# allows: a warning.
_CONSUMPTION_SETTINGS = frozenset(
    {"samza.offset.default", "samza.reset.offset", "samza.bootstrap", "samza.priority"}
)


# Per job, the keys naming no stream of it that were already logged.
_WARNED: weakref.WeakKeyDictionary[JobConfig, set[str]] = weakref.WeakKeyDictionary()
_SERDE_KEYS = frozenset(
    {
        "systems.<sys>.samza.key.serde",
        "systems.<sys>.samza.msg.serde",
        f"{_STREAM_KEY}samza.key.serde",
        f"{_STREAM_KEY}samza.msg.serde",
        "stores.<s>.key.serde",
        "stores.<s>.msg.serde",
    }
)


def task_class(job: JobConfig) -> type[StreamTask]:
    """The `task.class`, imported and checked to be a StreamTask."""
    found = load_object(job.task_class, "task.class")
    if not (isinstance(found, type) and issubclass(found, StreamTask)):
        raise ConfigError(f"task.class={job.task_class!r} is not a samsa.StreamTask subclass")
    check_constructor(found, job.task_class)
    return found


def serde_key(job: JobConfig, stream: SystemStream, part: str) -> str:
    """The config key that names a stream's `key` or `msg` serde (the stream's own, else its system's)."""
    own = f"systems.{stream.system}.streams.{stream.stream}.samza.{part}.serde"
    return own if own in job.config else f"systems.{stream.system}.samza.{part}.serde"


def check_job(job: JobConfig) -> None:
    """Everything a container would fail on at start, found before any starts; errors name the key."""
    task_class(job)
    RocksDbMemory.from_config(job.config)  # job.container.rocksdb.* (store_specs checks stores.<s>.rocksdb.*)
    serdes = SerdeRegistry(job.config)
    for stream in (*job.inputs, *job.outputs):
        settings = job.stream(stream)
        for part, name in (("key", settings.key_serde), ("msg", settings.msg_serde)):
            _resolve(serdes, name, serde_key(job, stream, part), stream.stream, part == "key")
    specs = store_specs(job.config)
    _check_dead_letter_stream(job, _changelogs(specs))  # first: a changelog named as it blames the changelog
    _check_changelogs(job, specs)
    for store, spec in specs.items():
        check_factory(spec)  # a custom engine class: importable, a store, its constructor takes (path, spec)
        _resolve(serdes, spec.key_serde, f"stores.{store}.key.serde", None, True)
        _resolve(serdes, spec.msg_serde, f"stores.{store}.msg.serde", None, False)
    _check_serde_keys(job, serdes)
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
    _check_blob_checkpoints(job, blob_backed_stores(job))
    _check_stream_keys(job, specs)
    _check_metrics_ports(job)
    check_exactly_once_sinks(job)


def check_exactly_once_sinks(job: JobConfig) -> None:
    """Under exactly-once, every sink (an output not marked intermediate) is on the checkpoint system: its
    records and the checkpoint go in one Kafka transaction."""
    from samsa.runtime.coordinator import checkpoint_system  # it imports this module

    if not job.exactly_once:
        return
    system = checkpoint_system(job)
    for ss in job.outputs:
        if not job.intermediate(ss) and ss.system != system:
            raise ConfigError(
                f"task.outputs: {ss} is an exactly-once sink on system {ss.system!r}, but the checkpoints "
                f"are on {system!r}: a sink's records and the checkpoint go in one Kafka transaction, so "
                f"sinks must be on the checkpoint system (task.checkpoint.system), or mark the stream "
                f"systems.{ss.system}.streams.{ss.stream}.samza.intermediate=true"
            )


def blob_backed_stores(job: JobConfig, specs: Mapping[str, StoreSpec] | None = None) -> list[str]:
    """The stores whose backups go to the blob store (`stores.<s>.backup.factories` naming it)."""
    specs = store_specs(job.config) if specs is None else specs
    return [s for s, spec in specs.items() if BLOBSTORE in store_backends(job.config, spec).backup]


def job_streams(job: JobConfig, changelogs: Mapping[str, SystemStream]) -> dict[SystemStream, str]:
    """Every stream the job reads or writes (inputs, outputs, `changelogs`, its internal topics), with what
    it is to the job, for messages."""
    roles = _streams_but_dead_letters(job, changelogs)
    for stream in _dead_letter_streams(job):
        roles.setdefault(stream, "the dead-letter stream")
    return roles


def _streams_but_dead_letters(
    job: JobConfig, changelogs: Mapping[str, SystemStream]
) -> dict[SystemStream, str]:
    from samsa.runtime.coordinator import checkpoint_system, coordinator_topic  # it imports this module

    roles = {stream: f"the adjunct input of store {store}" for store, stream in job.adjunct_inputs.items()}
    for stream in job.broadcast_streams:
        roles.setdefault(stream, "a broadcast input")
    for stream in job.inputs:
        roles.setdefault(stream, "an input")
    for stream in job.outputs:
        roles.setdefault(stream, "an output")
    for store, stream in changelogs.items():
        roles.setdefault(stream, f"the changelog of store {store}")
    system = checkpoint_system(job)
    roles.setdefault(SystemStream(system, checkpoint_topic(job.name, job.id)), "the checkpoint topic")
    roles.setdefault(SystemStream(system, coordinator_topic(job)), "the coordinator topic")
    return roles


def _dead_letter_streams(job: JobConfig) -> list[SystemStream]:
    """The dead-letter stream of each input system, under the dlq policy (one for all when configured)."""
    if job.deserialization_policy != "dlq":
        return []
    return sorted({job.dlq_stream(s.system) for s in job.inputs}, key=str)


def _check_dead_letter_stream(job: JobConfig, changelogs: Mapping[str, SystemStream]) -> None:
    """The dead-letter stream is a topic of its own: one the job reads would take each bad record back in,
    again and again; a changelog or internal topic would be corrupted by raw records. Naming it without the
    dlq policy does nothing: a warning."""
    configured = job.config.value(_DLQ_KEY)
    if configured and job.deserialization_policy != "dlq":
        _warn_once(
            job,
            _DLQ_KEY,
            f"{_DLQ_KEY}={configured} is set, but task.deserialization.error.policy="
            f"{job.deserialization_policy}: no record is sent there; set "
            "task.deserialization.error.policy=dlq to use it, or remove the key",
        )
    others = _streams_but_dead_letters(job, changelogs)
    for stream in _dead_letter_streams(job):
        role = others.get(stream)
        if role is None or role == "an output":
            continue  # an output may collect the bad records too: the job never reads it back
        harm = "be read again and sent there again, without end" if "input" in role else "corrupt it"
        if configured:
            problem = f"{_DLQ_KEY} names {stream}"
            fix = f"or remove the key for the default, samsa-dlq-{job.job_key} on each input's system"
        else:
            problem, fix = f"the default dead-letter stream {stream}", f"e.g. {stream}-dead-letters"
        raise ConfigError(
            f"{problem}, which is {role} of the job; every bad record sent there would {harm}; set "
            f"{_DLQ_KEY} to a topic of its own ({fix})"
        )


def _warn_once(job: JobConfig, key: str, message: str) -> None:
    """Logs a warning about `key` once per job: a supervisor prepares the job again on a partition change."""
    warned = _WARNED.setdefault(job, set())
    if key not in warned:
        warned.add(key)
        log.warning("%s", message)


def _changelogs(specs: Mapping[str, StoreSpec]) -> dict[str, SystemStream]:
    return {
        s: parse_stream(spec.changelog, f"stores.{s}.changelog")
        for s, spec in specs.items()
        if spec.changelog
    }


def _check_changelogs(job: JobConfig, specs: Mapping[str, StoreSpec]) -> None:
    """A changelog is a topic of the store's own: never one the job reads or writes otherwise (checking or
    creating it as a changelog would advise compacting, or deleting, the job's data), nor another store's."""
    logs = _changelogs(specs)
    check_unique_changelogs(logs)
    others = job_streams(job, {})
    for store, stream in sorted(logs.items()):
        role = others.get(stream)
        if role is not None:
            raise ConfigError(
                f"stores.{store}.changelog names {stream}, which is {role} of the job; a changelog needs a "
                f"topic of its own (e.g. {stream.system}.{job.job_key}-{store}-changelog)"
            )


def _check_stream_keys(job: JobConfig, specs: Mapping[str, StoreSpec]) -> None:
    """A `systems.<sys>.streams.<stream>.*` key must name one of the job's streams: an error for settings
    of how a stream is consumed. Others may name a stream the task sends to without task.outputs (as in
    Samza; the README's word count does): a warning, which names the stream meant when one is close."""
    streams = job_streams(job, _changelogs(specs))
    for key in sorted(job.config):
        found = job.config.registry.lookup(key)
        if found is None or not found[0].pattern.startswith(_STREAM_KEY):
            continue
        stream = SystemStream(found[1][0], found[1][1])
        if stream in streams or not job.config[key]:
            continue  # a blank value unsets the key (a --config override that drops a job.yaml's key)
        setting = found[0].pattern[len(_STREAM_KEY) :]
        listed = ", ".join(f"{s} ({role})" for s, role in streams.items())
        # Stream names of its system only: compared with the system prefix, `kafka.out` was "close" to
        # `kafka.sin`.
        same_system = [s.stream for s in streams if s.system == stream.system]
        close = difflib.get_close_matches(stream.stream, same_system, n=1)
        hint = f"did you mean {stream.system}.{close[0]}? " if close else ""
        problem = f"{key}: stream {stream} is none of the job's streams ({listed}); {hint}"
        if setting in _CONSUMPTION_SETTINGS or (setting == "samza.intermediate" and job.exactly_once):
            raise ConfigError(problem + "fix the stream name or remove the key")
        _warn_once(
            job,
            key,
            problem + "it applies only if the task sends to that stream (list the stream in task.outputs to "
            "say it does)",
        )


def _check_serde_keys(job: JobConfig, serdes: SerdeRegistry) -> None:
    """Every serde name the config gives resolves, also for a stream the task sends to without listing it
    in task.outputs: found at the first send, a typo would stop the job hours into its run."""
    for key in sorted(job.config):
        name = job.config[key].strip()
        found = job.config.registry.lookup(key)
        if not name or found is None or found[0].pattern not in _SERDE_KEYS:
            continue  # blank: the system's serde (or the default) applies
        if found[0].pattern.startswith(_STREAM_KEY):
            stream = found[1][1]
            _resolve(serdes, name, key, stream, found[0].pattern.endswith(".key.serde"))
        elif name not in serdes.names:
            # A system's serde, resolved for each of its streams above; here only the name is checked (a
            # schema registry's subject needs a topic).
            _resolve(serdes, name, key, None, False)


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


def _check_metrics_ports(job: JobConfig) -> None:
    """Container N serves metrics on port + N: the last one must still be a port."""
    port = job.prometheus_port
    if port and port + job.container_count - 1 > _MAX_PORT:
        raise ConfigError(
            f"metrics.prometheus.port={port}: container N serves on port + N, and with "
            f"job.container.count={job.container_count} the last would be {port + job.container_count - 1}, "
            f"past {_MAX_PORT}; choose a port at most {_MAX_PORT - job.container_count + 1}, or 0 for a free "
            "port per container"
        )


def _resolve(serdes: SerdeRegistry, name: str, key: str, topic: str | None, is_key: bool) -> None:
    try:
        serdes.get(name, topic, is_key=is_key)
    except SamsaError as e:
        raise ConfigError(f"{key}={name}: {e}") from e
