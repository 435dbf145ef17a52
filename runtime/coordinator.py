"""The job coordinator: checks topics, builds the job model and publishes it for every container."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from samsa.checkpoint.compacted_log import LatestRecord, read_latest
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.checkpoint.starts import ContainerStart
from samsa.checkpoint.versions import checkpoint_versions
from samsa.kafka import KafkaAdmin, KafkaConfigError, KafkaConsumer, KafkaProducer, KafkaSystemError
from samsa.kafka.config import java_settings, without_secrets
from samsa.runtime.config.job import JobConfig, job_id_clash
from samsa.runtime.exceptions import ConfigError, TopicsOfAnotherJobError
from samsa.runtime.job_model import JobIdentity, JobModel, build_job_model, grouped_counts
from samsa.runtime.validation import check_job
from samsa.streams import SystemStream

log = logging.getLogger(__name__)

_MODEL_KEY = b"job-model"


def coordinator_topic(job: JobConfig) -> str:
    """The compacted topic holding the job model: `__samsa_coordinator_<name>_<id>`."""
    return f"__samsa_coordinator_{job.name.replace('_', '-')}_{job.id.replace('_', '-')}"


def client_config(job: JobConfig, system: str, role: str = "consumer") -> dict[str, Any]:
    """librdkafka settings of a system: bootstrap servers plus its `consumer.*` or `producer.*` keys."""
    settings = job.systems[system]
    if not settings.kafka_clients:
        raise ConfigError(f"systems.{system}.samza.factory={settings.factory} cannot host Kafka clients")
    passthrough = settings.consumer if role == "consumer" else settings.producer
    return {"bootstrap.servers": settings.bootstrap_servers, **passthrough}


def checkpoint_system(job: JobConfig) -> str:
    """System of the checkpoint and coordinator topics: `task.checkpoint.system`, else the inputs' one."""
    return job.checkpoint_system


def checkpoint_manager(
    job: JobConfig,
    producer: KafkaProducer | None = None,
    read_versions: list[int] | None = None,
    epoch: int | None = None,
) -> KafkaCheckpointManager:
    system = checkpoint_system(job)
    if read_versions is None:
        read_versions = checkpoint_versions(job.config)[1]
    return KafkaCheckpointManager(
        checkpoint_topic(job.name, job.id),
        client_config(job, system),
        producer,
        read_versions=read_versions,
        epoch=epoch,
        starts_topic=coordinator_topic(job),
        topic_config={"segment.bytes": str(job.config.value("task.checkpoint.segment.bytes"))},
        replication_factor=job.config.value("task.checkpoint.replication.factor"),
    )


def check_broadcast_stores(job: JobConfig, counts: Mapping[SystemStream, int]) -> None:
    """A stream feeding an adjunct store is broadcast whole or not at all: its store is either one per
    container (broadcast) or one per task (grouped), never both."""
    for store, stream in job.adjunct_inputs.items():
        listed = sorted(p.partition for p in job.broadcast if p.system_stream == stream)
        count = counts.get(stream, 0)
        if listed and len(listed) != count:
            missing = sorted(set(range(count)) - set(listed))
            raise ConfigError(
                f"task.broadcast.inputs lists partitions {listed} of {stream}, which has {count} "
                f"(partitions {missing} are not listed); the stream feeds adjunct store {store!r}, which is "
                f"either broadcast (one store per container: list every partition, {stream}#[0-{count - 1}]) "
                f"or partitioned (one store per task: leave {stream} out of task.broadcast.inputs)"
            )


def warn_broadcast_in_inputs(job: JobConfig) -> None:
    """Warns once when task.inputs lists a stream of task.broadcast.inputs: taken (Samza does), but the
    listing is redundant, and CONFIG.md says a broadcast stream is not also listed there."""
    if not job.broadcast_in_inputs:
        return
    streams = ", ".join(str(ss) for ss in job.broadcast_in_inputs)
    log.warning(
        "job %s: task.inputs lists %s, which task.broadcast.inputs broadcasts; the task.inputs listing is "
        "redundant (a broadcast stream goes to every task, listed in task.inputs or not, and its partitions "
        "not broadcast are grouped into tasks either way): remove %s from task.inputs",
        job.job_key,
        streams,
        streams,
    )


def warn_not_copartitioned(job: JobConfig, counts: Mapping[SystemStream, int]) -> None:
    """Warns when the job keeps keyed state (a store other than an adjunct one) and its task.inputs grouped
    into tasks have different partition counts: a key's records then reach different tasks. Not refused:
    Samza's grouping by partition takes such inputs (a 1-partition control stream, say)."""
    from samsa.stores.factory import store_specs  # the stores build on the runtime's config

    stores = sorted(set(store_specs(job.config)) - set(job.adjunct_inputs))
    adjunct = set(job.adjunct_inputs.values())
    read = {ss: n for ss, n in counts.items() if ss not in adjunct}
    inputs = grouped_counts(read, job.broadcast)
    if not stores or len(set(inputs.values())) < 2:
        return
    listed = ", ".join(f"{ss} has {n}" for ss, n in sorted(inputs.items(), key=lambda i: (-i[1], str(i[0]))))
    log.warning(
        "job %s keeps keyed state (store%s %s) but its inputs are not co-partitioned: %s partitions. Tasks "
        "group input partitions by number, so a key's records in streams of different partition counts "
        "reach different tasks, and keyed state is only consistent when the inputs are co-partitioned (one "
        "partition count, keys partitioned alike): repartition the inputs to one partition count, or, for "
        "a stream the state is not keyed by (a control stream), list it in task.broadcast.inputs",
        job.job_key,
        "s" if len(stores) > 1 else "",
        ", ".join(stores),
        listed,
    )


def _rejected(
    system: str, role: str, given: Mapping[str, Any], error: KafkaConfigError, job: JobConfig
) -> ConfigError:
    """librdkafka's refusal of a system's client settings, naming the user's keys at fault."""
    prefix = f"systems.{system}.{role}."
    reason = without_secrets(error.reason, given)
    rejects = f"librdkafka rejects it ({reason})"
    java = java_settings(given, reason)
    if java and (error.setting is None or error.setting in java):
        # Samza's own Java client settings (security ones mostly): name each with librdkafka's equivalent.
        each = "; ".join(f"{prefix}{key}: {advice}" for key, advice in java.items())
        return ConfigError(
            f"{each} (librdkafka rejects {'it' if len(java) == 1 else 'them'}: {reason}); see "
            'docs/running.md "Secured clusters"'
        )
    if error.setting:
        return ConfigError(f"{prefix}{error.setting}: {rejects}; fix or remove it")
    # librdkafka names the settings of a conflict in backquotes; the user set some of them, Samsa others.
    named = [s for s in dict.fromkeys(re.findall(r"`([a-z][a-z0-9._]*)(?:=[^`]*)?`", reason)) if s in given]
    keys = ", ".join(prefix + s for s in named) or f"{prefix}*"
    if role == "producer" and job.exactly_once and "enable.idempotence" in error.reason:
        return ConfigError(
            f"{keys}: {rejects}; job.processing.guarantee=exactly_once writes the outputs in Kafka "
            "transactions, which need an idempotent producer with acks=all: remove it"
        )
    if role == "producer" and "`enable.idempotence`" in error.reason and "enable.idempotence" not in given:
        fix = "remove it (acks=all)" if named == ["acks"] else "remove it or set it as idempotence needs"
        return ConfigError(
            f"{keys}: {rejects}; Samsa turns enable.idempotence on for its producers, so that a send "
            f"retried after a lost acknowledgement is neither written twice nor reordered: {fix}, or set "
            f"{prefix}enable.idempotence=false to accept duplicates and reordering on retries"
        )
    return ConfigError(f"{keys}: {rejects}; fix or remove it")


class JobCoordinator:
    """Validates the job's topics and keeps one job model for all containers."""

    def __init__(self, job: JobConfig) -> None:
        self.job = job
        self._system = checkpoint_system(job)
        self._topic = coordinator_topic(job)
        #: The exact job.name and job.id, which the topic names blur ('_' as '-'): stamped on the job model.
        self.identity = JobIdentity(job.name, job.id)

    def partition_counts(self) -> dict[SystemStream, int]:
        """Partition count of every input; a missing input or output topic fails naming it."""
        counts: dict[SystemStream, int] = {}
        by_system: dict[str, list[SystemStream]] = {}
        for ss in (*self.job.inputs, *self.job.outputs):
            by_system.setdefault(ss.system, []).append(ss)
        for system, streams in by_system.items():
            admin = KafkaAdmin(client_config(self.job, system))
            try:
                found = admin.require_topics([s.stream for s in streams])
            finally:
                admin.close()
            counts.update({s: found[s.stream] for s in streams if s in self.job.inputs})
        return counts

    def topic_exists(self) -> bool:
        """Whether the coordinator topic exists (the job, or one named alike, has started)."""
        admin = KafkaAdmin(client_config(self.job, self._system))
        try:
            return bool(admin.partition_counts([self._topic]).get(self._topic))
        finally:
            admin.close()

    def check_not_elsewhere(self) -> None:
        """Refuses a start that finds no coordinator topic on the checkpoint system while another system of
        the job holds it: the job ran with its checkpoints there, and would start over from
        samza.offset.default here (older Samsa took the first input's system, so dropping or reordering
        inputs moved it)."""
        systems = self.job.systems
        # Every system a key names, one per cluster (a system dropped from task.inputs may still be defined):
        # the job's own cluster is where the topic was just not found.
        clusters = {systems[name].bootstrap_servers: name for name in sorted(systems, reverse=True)}
        clusters.pop(systems[self._system].bootstrap_servers, None)
        for system in sorted(clusters.values()):
            try:
                with KafkaAdmin(client_config(self.job, system)) as admin:
                    found = bool(admin.partition_counts([self._topic]).get(self._topic))
            except KafkaSystemError as e:
                # A cluster the job no longer uses may be gone (or its client settings stale): the check
                # is a safeguard, not a start requirement.
                log.warning("could not look for %s on system %s: %s", self._topic, system, e)
                continue
            if found:
                checkpoints = checkpoint_topic(self.job.name, self.job.id)
                raise ConfigError(
                    f"task.checkpoint.system: job {self.job.job_key} has no coordinator topic {self._topic} "
                    f"on system {self._system}, where its checkpoints are looked for, but system {system} "
                    f"holds it: the job ran with its checkpoint and coordinator topics there (its first "
                    f"input's system before task.inputs changed, or task.checkpoint.system={system}); set "
                    f"task.checkpoint.system={system} to keep its checkpoints; or, if another deployment of "
                    f"the job runs there, give this one another job.id to run beside it; or delete topics "
                    f"{self._topic} and {checkpoints} on system {system} to start the job over"
                )

    def _refuse_other_job(self, owner: JobIdentity, topic: str) -> None:
        if owner != self.identity:
            topics = f"{self._topic} and {checkpoint_topic(self.job.name, self.job.id)}"
            raise TopicsOfAnotherJobError(str(self.identity), str(owner), topic, topics)

    def check_checkpoint_owner(self) -> None:
        """Refuses a job whose checkpoint topic names another job (one named alike: `_` vs `-`); for a
        start that finds no job model: its coordinator topic was deleted, or the job never ran."""
        manager = checkpoint_manager(self.job)
        owner = manager.read_owner()
        if owner is not None:
            self._refuse_other_job(JobIdentity(*owner), manager.topic)

    def warn_underscore_name(self) -> None:
        """Warns a new job whose job.name holds a `_`: its topics are named as a `-` job's. Not refused:
        many jobs are named so, and the job model names its job, which refuses the second of two."""
        if "_" not in self.job.name:
            return
        log.warning(
            "job.name=%r contains '_': its coordinator and checkpoint topics (%s, %s) are named with '-' for "
            "each '_', so job.name=%r with job.id=%r would get the same ones (the job that starts second is "
            "refused them); a job.name without '_' keeps the topic names telling jobs apart",
            self.job.name,
            self._topic,
            checkpoint_topic(self.job.name, self.job.id),
            self.job.name.replace("_", "-"),
            self.job.id,
        )

    def check_job_id(self, exists: bool | None = None) -> None:
        """Refuses a new job whose `job.id` holds a `-` (`job_id_clash`); a job that already has its
        coordinator topic keeps its id, with a warning: a new id would start it over (no checkpoints, no
        state), and the tools that read its checkpoints (`samsa eos retire`) need the old one. `exists`:
        whether the coordinator topic exists, when already known."""
        clash = job_id_clash(self.job.name, self.job.id)
        if clash is None:
            return
        if exists is None:
            exists = self.topic_exists()
        if exists:
            log.warning(
                "%s; job %s has run before, so it keeps its job.id (another would start it over: new "
                "checkpoints, state and transactional ids): make sure no job is named %s with job.id %s",
                clash,
                self.job.job_key,
                f"{self.job.name}-{self.job.id.rpartition('-')[0]}",
                self.job.id.rpartition("-")[2],
            )
            return
        raise ConfigError(
            f"{clash}; this job has not run yet: use '_' or '.' instead, e.g. "
            f"job.id={self.job.id.replace('-', '_')}"
        )

    def create_resources(self) -> None:
        """The checkpoint and coordinator topics, and the dead-letter topics when the dlq policy is on."""
        checkpoint_manager(self.job).create_resources()
        admin = KafkaAdmin(client_config(self.job, self._system))
        try:
            admin.ensure_topic(self._topic, 1, {"cleanup.policy": "compact"})
        finally:
            admin.close()
        if self.job.deserialization_policy == "dlq":
            for system in {s.system for s in self.job.inputs}:
                dlq = self.job.dlq_stream(system)
                admin = KafkaAdmin(client_config(self.job, dlq.system))
                try:
                    admin.ensure_topic(dlq.stream, 1)
                finally:
                    admin.close()

    def read_model(self) -> JobModel | None:
        """The published job model, or None when none was published yet; a model another job published
        (its job.name or job.id differs by `_` vs `-`, which the topic name blurs) is refused."""
        # The model is never written in a transaction; the containers' start records beside it are: a
        # start killed inside one must not hold up every reader until its transaction times out.
        config = {**client_config(self.job, self._system), "isolation.level": "read_uncommitted"}
        records = read_latest(config, self._topic)
        for record in records:
            if record.key == _MODEL_KEY and record.value is not None:
                model = JobModel.from_json(record.value)
                owner = model.job or self._started_job(records)  # an older Samsa's model names no job
                if owner is not None:
                    self._refuse_other_job(owner, self._topic)
                return model
        return None

    def _started_job(self, records: list[LatestRecord]) -> JobIdentity | None:
        """The job the containers' start records name (`<job.name>-<job.id>`), when it is not this one."""
        for record in records:
            start = ContainerStart.decode(record.value) if record.value is not None else None
            if start is not None and start.job != self.job.job_key:
                # A job sharing the topic has a name and id as long as this one's: the key splits alike.
                name = start.job[: len(self.job.name)]
                return JobIdentity(name, start.job[len(name) + 1 :])
        return None

    def publish(self, model: JobModel) -> None:
        """The job model on the coordinator topic; with the job it names, that job's on the checkpoint topic
        too (read when the coordinator topic is gone)."""
        # One keyed record on a compacted topic: a duplicate is harmless, and skipping the idempotent
        # producer's id handshake saves half a second of every start.
        config = {**client_config(self.job, self._system, "producer"), "enable.idempotence": False}
        producer = KafkaProducer(config)
        try:
            if model.job is not None:
                checkpoint_manager(self.job).write_owner(producer, model.job.name, model.job.id)
            producer.send(self._topic, model.to_json(), key=_MODEL_KEY, partition=0)
            producer.flush()
        finally:
            producer.close()

    def check_client_settings(self) -> None:
        """Builds each system's consumer and producer once, so a bad librdkafka key fails naming its key."""
        for name, settings in self.job.systems.items():
            if not settings.kafka_clients:
                continue
            for role, client in (("consumer", KafkaConsumer), ("producer", KafkaProducer)):
                config = client_config(self.job, name, role)
                if role == "producer" and self.job.exactly_once:
                    # Exactly-once tasks write in transactions with the system's producer settings.
                    config = {**config, "transactional.id": "samsa-config-check"}
                try:
                    client(config).close()
                except KafkaConfigError as e:
                    raise _rejected(name, role, client_config(self.job, name, role), e, self.job) from e

    def prepare(self) -> JobModel:
        """Creates resources and returns the current job model, publishing a new one if the inputs changed."""
        check_job(self.job)
        self.check_client_settings()
        # Inputs and outputs first: a start failing on a missing topic leaves no internal topics behind.
        counts = self.partition_counts()
        check_broadcast_stores(self.job, counts)
        warn_broadcast_in_inputs(self.job)
        # Before anything is created or written: topics holding another job's model or checkpoints (a job
        # named alike) are refused.
        ran = self.topic_exists()
        if not ran:
            self.check_not_elsewhere()
        stored = self.read_model() if ran else None
        if stored is None:
            self.check_checkpoint_owner()
        if not ran:
            self.warn_underscore_name()
        self.check_job_id(ran)
        self.create_resources()
        built = build_job_model(counts, self.job.container_count, self.job.broadcast)
        model = replace(built, job=self.identity)
        warn_not_copartitioned(self.job, counts)
        # state and state_placement build on this module's client settings
        from samsa.runtime.state import changelog_partitions, create_changelogs
        from samsa.runtime.state_placement import check_state_placement

        if stored is not None and stored != model:
            # Before the changelogs are checked (a grown task count would fail there, naming only the
            # changelog's size) and before the old model's containers are fenced: a refused start touches
            # nothing. A job without durable stores goes on with the new model.
            check_state_placement(self.job, stored, model)
        grouped = {str(ss): n for ss, n in grouped_counts(counts, self.job.broadcast).items()}
        create_changelogs(self.job, changelog_partitions(model), grouped)
        # Before any container restores or reads: a job whose checkpoints are gone would count its inputs
        # twice on top of its restored state.
        # A job that never started would take over what its changelogs already hold (another job's state)
        # and count its inputs again on top of it.
        from samsa.runtime.inherited_state import check_inherited_state  # they build on this module
        from samsa.runtime.lost_checkpoints import check_checkpoints_kept

        manager = checkpoint_manager(self.job)
        if check_checkpoints_kept(self.job, manager, changelog_partitions(model)):
            check_inherited_state(self.job, manager, changelog_partitions(model))
        # The whole model, not just its fingerprint: a model stored by an older Samsa may group the same
        # inputs otherwise (it left every partition of a broadcast stream out of the tasks).
        if stored != model:
            if stored is not None:
                from samsa.runtime.takeover import fence_replaced  # it builds on this module

                # Containers of the old model may still run (an outside orchestrator starts each one
                # with `--container-id`): those whose tasks moved stop before the new model is published,
                # so no new owner restores them first, and a takeover cut short is redone by the next start.
                fence_replaced(self.job, stored, model)
            log.info("publishing job model %s to %s", model.fingerprint, self._topic)
            self.publish(model)
        elif stored is not None and stored.job is None:
            # An older Samsa's model: the same one again, now naming its job (no container is fenced).
            log.info("stamping job model %s on %s with %s", model.fingerprint, self._topic, self.identity)
            self.publish(model)
        return model
