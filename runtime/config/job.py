"""The job's settings read from a validated Config, with cross-key checks done once at start."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from samsa.runtime.config.config import Config
from samsa.runtime.exceptions import ConfigError
from samsa.streams import SystemStream, SystemStreamPartition

# Samza job files name the factory class; these are the same systems under their short names.
_SAMZA_SYSTEM_FACTORIES = {
    "org.apache.samza.system.kafka.KafkaSystemFactory": "kafka",
    "org.apache.samza.system.inmemory.InMemorySystemFactory": "inmemory",
}


def parse_stream(text: str, key: str) -> SystemStream:
    """Parses `<system>.<stream>` (the stream may contain dots), naming `key` when malformed."""
    system, sep, stream = text.strip().partition(".")
    if not sep or not system or not stream:
        raise ConfigError(f"{key}: {text!r} is not <system>.<stream>, e.g. kafka.words")
    return SystemStream(system, stream)


def job_id_clash(name: str, value: str) -> str | None:
    """Why a `job.id` holding a `-` may give this job another job's names (None when it holds none):
    `<job.name>-<job.id>` must name one job only. `JobCoordinator.prepare` refuses it for a new job."""
    if "-" not in value:
        return None
    head, _, tail = value.rpartition("-")
    return (
        f"job.id={value!r} contains '-': the job's transactional ids, state and lock dirs, dead-letter "
        "topic and blob keys are named <job.name>-<job.id>, so another job could get the same names "
        f"and fence or lock this one out (job.name={name} with job.id={value} and job.name={name}-{head} "
        f"with job.id={tail} are both {name}-{value})"
    )


# The master URLs Spark 4 takes (SparkContext.createTaskScheduler, its cluster managers; Mesos is gone).
_SPARK_MASTER = re.compile(
    r"local|local\[(\d+|\*)\]|local\[(\d+|\*)\s*,\s*\d+\]"
    r"|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]|spark://.+|k8s://.+|yarn"
)


def _spark_master(value: str | None) -> str | None:
    """`deploy.spark.master` when Spark takes its form: checked before the job starts, as Spark would
    refuse it only after the job model is published, in a Java stack trace."""
    if not value or _SPARK_MASTER.fullmatch(value):
        return value
    raise ConfigError(
        f"deploy.spark.master={value!r} is not a Spark master URL: use local, local[N], local[*], "
        "local[N,maxFailures], local-cluster[N,cores,memoryMB], spark://host:port[,host:port], yarn or "
        "k8s://https://host:port (or leave it unset: local[<containers>,<maxFailures>])"
    )


# What Kafka allows in a topic name: Samsa's internal topics are named after job.name and job.id, and its
# state and lock dirs too (a '/' or '..' would put them outside the state dir).
_NAME_CHARS = re.compile(r"[A-Za-z0-9._-]+")
_MAX_TOPIC_LENGTH = 249


def check_job_identity(name: str, job_id: str) -> None:
    """Refuses a `job.name` or `job.id` that would make an illegal topic name or path: only ASCII letters,
    digits, '.', '_' and '-', and every topic named after them at most 249 characters (Kafka's limit)."""
    for key, value in (("job.name", name), ("job.id", job_id)):
        if not _NAME_CHARS.fullmatch(value):
            raise ConfigError(
                f"{key}={value!r} may hold only ASCII letters, digits, '.', '_' and '-' (and must not be "
                "empty): the job's topics, state and lock dirs are named after it"
            )
    # Imported here: it loads the Kafka client, which `samsa config keys` does without.
    from samsa.checkpoint.kafka_manager import checkpoint_topic

    # The longest topic named after the job (the coordinator's and dead-letter topic's prefixes are shorter).
    topic = checkpoint_topic(name, job_id)
    excess = len(topic) - _MAX_TOPIC_LENGTH
    if excess > 0:
        raise ConfigError(
            f"job.name ({len(name)} characters) with job.id ({len(job_id)}) names topic {topic[:40]}... "
            f"{len(topic)} characters long, past Kafka's limit of {_MAX_TOPIC_LENGTH} characters for a "
            f"topic name; shorten them to at most {len(name) + len(job_id) - excess} characters together"
        )


@dataclass(frozen=True)
class SystemSettings:
    """One `systems.<sys>.*` block."""

    name: str
    factory: str
    bootstrap_servers: str
    consumer: dict[str, str]
    producer: dict[str, str]

    @property
    def kafka_clients(self) -> bool:
        """Whether samsa.kafka's clients serve the system (Kafka, and the in-memory system behind them)."""
        return self.factory in ("kafka", "inmemory")


@dataclass(frozen=True)
class StreamSettings:
    """Per-stream settings, with the system's values filled in where the stream sets none."""

    stream: SystemStream
    key_serde: str
    msg_serde: str
    bootstrap: bool
    reset_offset: bool
    offset_default: str  # "oldest" | "upcoming"


_DEFAULT_SERDE = "bytes"
_INTERMEDIATE_KEY = "systems.<sys>.streams.<stream>.samza.intermediate"
_BROADCAST_PARTS = re.compile(r"\[(\d+)-(\d+)\]|(\d+)")


class JobConfig:
    """Typed, cross-checked view of the job config used by the coordinator and containers."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.name: str = config.required("job.name")
        self.id: str = config.value("job.id")
        self.task_class: str = config.required("task.class")
        listed = [parse_stream(s, "task.inputs") for s in config.required("task.inputs")]
        #: `task.inputs` as listed (`inputs` adds the adjunct and broadcast streams after them).
        self.task_inputs = listed
        self.inputs = list(listed)
        #: Store -> the stream feeding it (`stores.<s>.adstore.input`); its partitions are inputs too.
        self.adjunct_inputs = self._adjunct_inputs()
        self.inputs += list(self.adjunct_inputs.values())
        #: `task.broadcast.inputs`: partitions every task gets, kept out of the grouping into tasks: an
        #: adjunct store's (into one container-level store) or any other input's (to every task's process).
        self.broadcast = self._broadcast()
        #: Broadcast streams task.inputs lists too: redundant (the stream is an input either way; the job
        #: start warns), taken as Samza takes them.
        self.broadcast_in_inputs = sorted({p.system_stream for p in self.broadcast} & set(listed), key=str)
        self.outputs = [parse_stream(s, "task.outputs") for s in config.value("task.outputs") or []]
        self.container_count: int = config.value("job.container.count")
        self.commit_ms: int = config.value("task.commit.ms")
        self.window_ms: int = config.value("task.window.ms")
        self.deserialization_policy: str = config.value("task.deserialization.error.policy")
        self.batch_size: int = config.value("task.consumer.batch.size")
        self.shutdown_ms: int = config.value("task.shutdown.ms")
        self.logged_store_dir = Path(config.value("job.logged.store.base.dir"))
        self.non_logged_store_dir = Path(config.value("job.non-logged.store.base.dir"))
        self.prometheus_port: int | None = config.value("metrics.prometheus.port")
        self.deploy: str = config.value("job.deploy")
        self.max_restarts: int = config.value("deploy.local.max.restarts")
        self.local_fork_server: bool = config.value("deploy.local.fork.server")
        self.spark_max_restarts: int = config.value("deploy.spark.max.restarts")
        self.spark_master: str | None = _spark_master(config.value("deploy.spark.master"))
        self.spark_conf: dict[str, str] = config.subset("deploy.spark.conf.")
        #: Spark's attempts per container task: the job's `spark.task.maxFailures`, else 1 (no Spark retry:
        #: the driver restarts containers itself, with backoff and a restart budget).
        self.spark_max_failures = self._spark_max_failures()
        self.heartbeat_timeout_ms: int = config.value("deploy.spark.heartbeat.timeout.ms")
        #: `job.processing.guarantee=exactly_once`: barrier markers, aligned versions, sink transactions.
        self.exactly_once = config.value("job.processing.guarantee") == "exactly_once"
        self.eos_buffer_max_bytes: int = config.value("task.eos.buffer.max.bytes")
        self.eos_barrier_timeout_ms: int = config.value("task.eos.barrier.timeout.ms")
        self._check()

    def _spark_max_failures(self) -> int:
        raw = self.spark_conf.get("spark.task.maxFailures", "1")
        try:
            value = int(raw.strip())
        except ValueError:
            value = 0
        if value < 1:
            raise ConfigError(
                f"deploy.spark.conf.spark.task.maxFailures={raw!r} must be a whole number of at least 1 "
                "(attempts of a container's Spark task; default 1: the driver restarts containers itself)"
            )
        return value

    def _adjunct_inputs(self) -> dict[str, SystemStream]:
        found: dict[str, SystemStream] = {}
        suffix = ".adstore.input"
        for key in sorted(self.config):
            if not (key.startswith("stores.") and key.endswith(suffix)):
                continue
            store = key[len("stores.") : -len(suffix)]
            if not self.config[key].strip():
                continue  # blank means unset, as in Samza
            stream = parse_stream(self.config[key], key)
            if stream in self.inputs:
                raise ConfigError(
                    f"{key}={stream}: the stream is also in task.inputs; an adjunct stream's messages go "
                    "to its store, never to process() - remove it from task.inputs"
                )
            if self.config.get(f"stores.{store}.changelog", "").strip():
                raise ConfigError(
                    f"stores.{store}.changelog: store {store!r} is an adjunct store (stores.{store}.adstore."
                    "input), rebuilt from its stream; it cannot also have a changelog - remove one of them"
                )
            other = next((s for s, taken in found.items() if taken == stream), None)
            if other is not None:
                raise ConfigError(
                    f"{key}={stream}: stream already feeds store {other!r} (stores.{other}.adstore.input); "
                    "one stream feeds one adjunct store"
                )
            found[store] = stream
        return found

    def _broadcast(self) -> tuple[SystemStreamPartition, ...]:
        key = "task.broadcast.inputs"
        found: list[SystemStreamPartition] = []
        for item in self.config.value(key) or []:
            stream_text, sep, parts = item.partition("#")
            stream = parse_stream(stream_text, key)
            match = _BROADCAST_PARTS.fullmatch(parts) if sep else None
            if match is None:
                raise ConfigError(
                    f"{key}: {item!r} is not <system>.<stream>#<partition> or <system>.<stream>#[<a>-<b>]"
                )
            low = int(match.group(1) or match.group(3))
            high = int(match.group(2) or match.group(3))
            if high < low:
                raise ConfigError(f"{key}: {item!r} has an empty partition range")
            if stream not in self.inputs:
                # As Samza: a broadcast stream is an input of every task, listed in task.inputs or not.
                self.inputs.append(stream)
            found += [SystemStreamPartition(stream.system, stream.stream, p) for p in range(low, high + 1)]
        if len(set(found)) != len(found):
            raise ConfigError(f"{key} lists a partition twice")
        return tuple(found)

    @property
    def broadcast_streams(self) -> set[SystemStream]:
        return {ssp.system_stream for ssp in self.broadcast}

    @property
    def job_key(self) -> str:
        """`<job.name>-<job.id>`: names the job's internal topics and state dirs."""
        return f"{self.name}-{self.id}"

    def dlq_stream(self, system: str) -> SystemStream:
        """The dead-letter stream for an input on `system`."""
        configured = self.config.value("task.deserialization.dlq.stream")
        if configured:
            return parse_stream(configured, "task.deserialization.dlq.stream")
        return SystemStream(system, f"samsa-dlq-{self.job_key}")

    def _system_users(self) -> dict[str, str]:
        """System -> the first `key=value` naming it, over every key whose value names a system."""
        users: dict[str, str] = {}

        def use(system: str, key: str, value: str) -> None:
            users.setdefault(system, f"{key}={value}")

        for key in ("task.inputs", "task.outputs", "task.broadcast.inputs"):
            for item in self.config.value(key) or []:
                use(item.strip().partition(".")[0], key, item)
        for store, stream in self.adjunct_inputs.items():
            use(stream.system, f"stores.{store}.adstore.input", str(stream))
        for key in sorted(self.config):
            if re.fullmatch(r"stores\.[^.]+\.changelog", key) and self.config[key].strip():
                use(parse_stream(self.config[key], key).system, key, self.config[key])
        dlq_key = "task.deserialization.dlq.stream"
        dlq = self.config.value(dlq_key)
        if dlq:
            use(parse_stream(dlq, dlq_key).system, dlq_key, dlq)
        checkpoint = self.config.value("task.checkpoint.system")
        if checkpoint:
            use(checkpoint, "task.checkpoint.system", checkpoint)
        return users

    @cached_property
    def systems(self) -> dict[str, SystemSettings]:
        """Every system a key names (inputs, outputs, changelogs, checkpoint...) with its client settings."""
        users = self._system_users()
        names = set(users)
        names |= {k.split(".")[1] for k in self.config if k.startswith("systems.") and k.count(".") >= 2}
        out = {}
        for name in sorted(names):
            prefix = f"systems.{name}."
            factory = self.config.value(f"{prefix}samza.factory")
            if factory is None:
                used_by = f" (by {users[name]})" if name in users else ""
                raise ConfigError(
                    f"{prefix}samza.factory is required: system {name!r} is used but not defined{used_by}; "
                    f"define systems.{name}.samza.factory (kafka or inmemory) or name a defined system"
                )
            factory = _SAMZA_SYSTEM_FACTORIES.get(factory, factory)
            if factory not in ("kafka", "inmemory"):
                raise ConfigError(f"{prefix}samza.factory={factory} is not supported; use kafka or inmemory")
            bootstrap = self.config.value(f"{prefix}bootstrap.servers") or ""
            consumer = self.config.subset(f"{prefix}consumer.")
            producer = self.config.subset(f"{prefix}producer.")
            if not bootstrap:
                bootstrap = consumer.get("bootstrap.servers") or producer.get("bootstrap.servers") or ""
            if factory == "kafka" and not bootstrap:
                raise ConfigError(f"{prefix}bootstrap.servers is required for Kafka system {name!r}")
            if factory == "inmemory":
                bootstrap = bootstrap or f"inmemory://{name}"
                if not bootstrap.startswith("inmemory:"):
                    raise ConfigError(
                        f"{prefix}bootstrap.servers={bootstrap}: in-memory system {name!r} takes "
                        "inmemory://NAME (this process) or inmemory:///ABS/DIR (shared by processes), or none"
                    )
            out[name] = SystemSettings(name, factory, bootstrap, consumer, producer)
        return out

    def stream(self, stream: SystemStream) -> StreamSettings:
        """Settings of one stream, falling back to its system's."""
        sys_prefix = f"systems.{stream.system}."
        prefix = f"{sys_prefix}streams.{stream.stream}.samza."
        value = self.config.value
        return StreamSettings(
            stream=stream,
            # A blank value is unset, as in Samza: the system's serde, else the default.
            key_serde=value(f"{prefix}key.serde") or value(f"{sys_prefix}samza.key.serde") or _DEFAULT_SERDE,
            msg_serde=value(f"{prefix}msg.serde") or value(f"{sys_prefix}samza.msg.serde") or _DEFAULT_SERDE,
            bootstrap=bool(value(f"{prefix}bootstrap")),
            reset_offset=bool(value(f"{prefix}reset.offset")),
            offset_default=value(f"{prefix}offset.default") or value(f"{sys_prefix}samza.offset.default"),
        )

    def intermediate(self, stream: SystemStream) -> bool:
        """`samza.intermediate=true`: the stream links two exactly-once Samsa jobs."""
        return bool(self.config.value(f"systems.{stream.system}.streams.{stream.stream}.samza.intermediate"))

    def _check_intermediate_needs_exactly_once(self) -> None:
        # The flag only means something to an exactly-once job: an at-least-once one would write such a
        # stream without the exactly-once header and markers, and its exactly-once downstream would fail on
        # the first record, far from the cause.
        if self.exactly_once:
            return
        for key in sorted(self.config):
            found = self.config.registry.lookup(key)
            if found is None or found[0].pattern != _INTERMEDIATE_KEY or not self.config.value(key):
                continue
            raise ConfigError(
                f"{key}=true: an intermediate stream links two exactly-once Samsa jobs (its records carry "
                "the exactly-once header, its partitions the version markers), but this job is at-least-once "
                "(job.processing.guarantee); set job.processing.guarantee=exactly_once, or remove the key"
            )

    def _check_exactly_once(self) -> None:
        self._check_intermediate_needs_exactly_once()
        if not self.exactly_once:
            return
        if not self.outputs:
            raise ConfigError(
                "job.processing.guarantee=exactly_once needs task.outputs: list every <system>.<stream> the "
                "task sends to (markers go to every partition of the intermediate ones, the others are "
                "written in transactions)"
            )
        if self.commit_ms <= 0:
            raise ConfigError(
                f"task.commit.ms={self.commit_ms}: job.processing.guarantee=exactly_once needs a positive "
                "commit interval: source tasks cut their versions on its multiples of the clock (a version "
                "is the last such multiple, in milliseconds), so without one nothing is committed or sent "
                "downstream until the job stops; set task.commit.ms to a positive number of milliseconds "
                "(default 60000)"
            )
        broadcast = sorted(
            {str(p.system_stream) for p in self.broadcast} - {str(s) for s in self.adjunct_inputs.values()}
        )
        if broadcast:
            raise ConfigError(
                f"task.broadcast.inputs: {', '.join(broadcast)} is broadcast to process(), which "
                "job.processing.guarantee=exactly_once does not support (every task would align on it); "
                "feed it to an adjunct store (stores.<s>.adstore.input) or make it a regular input"
            )
        for ss in (*self.inputs, *self.outputs):
            if self.intermediate(ss) and not self.systems[ss.system].kafka_clients:
                raise ConfigError(
                    f"systems.{ss.system}.streams.{ss.stream}.samza.intermediate=true: system {ss.system!r} "
                    "is not a Kafka (or in-memory) system; intermediate streams carry Kafka record headers"
                )

    def _check(self) -> None:
        check_job_identity(self.name, self.id)
        if len(set(self.inputs)) != len(self.inputs):
            raise ConfigError("task.inputs lists a stream twice; list each <system>.<stream> once")
        _ = self.systems  # every system a key names is defined (raises naming the key otherwise)
        self.checkpoint_system: str = self._checkpoint_system()
        self._check_exactly_once()

    def _checkpoint_system(self) -> str:
        """`task.checkpoint.system`, the system of the checkpoint and coordinator topics; unset, the first
        input's, refused when task.inputs span clusters (Samza fails without it or job.default.system)."""
        configured: str | None = self.config.value("task.checkpoint.system")
        if configured:
            return configured
        # Why no default across clusters: the first input's system, the default of older Samsa (kept where
        # it is safe), moved the topics with the order of task.inputs, and a job that found none there
        # started over from samza.offset.default. Systems naming one cluster keep the topics where they are
        # in any order; adjunct and broadcast streams come after task.inputs, never first.
        systems = self.systems
        on: dict[str, list[str]] = {}
        for stream in self.task_inputs:
            on.setdefault(stream.system, []).append(str(stream))
        if len({systems[name].bootstrap_servers for name in on}) == 1:
            return self.inputs[0].system
        listed = "; ".join(f"{system}: {', '.join(streams)}" for system, streams in on.items())
        first = self.inputs[0].system
        raise ConfigError(
            f"task.checkpoint.system is required: task.inputs lists streams of {len(on)} clusters "
            f"({listed}), and the job's checkpoint and coordinator topics must stay on one whatever the "
            f"order of task.inputs; set task.checkpoint.system to one of {', '.join(on)}. A job that already "
            "ran kept them on its first input's system (the default of older Samsa), and task.inputs as "
            f"listed now starts on system {first!r}: set task.checkpoint.system={first} to keep its "
            "checkpoints (the system of the first stream of task.inputs as it last ran, if it was reordered "
            "since)"
        )
