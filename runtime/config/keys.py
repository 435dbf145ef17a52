"""Every job-config key Samsa knows, written as Samza writes them (see CONFIG.md)."""

import re
from collections.abc import Callable, Mapping

from samsa.runtime.config.registry import Key, KeyRegistry, OwnKeys

_DURABLE = "durable state arrives with changelogs and state backends"

_CHECKPOINT_TOPIC = "__samsa_checkpoint_ver_1_for_<job.name>_<job.id>"

#: Samza's key: what a store without a checkpointed changelog position does with what its changelog holds.
RETAIN_EXISTING_STATE = "task.transactional.state.retain.existing.state"

_TRANSACTIONAL = (
    "Samsa's checkpoints and restores are always transactional (a restore brings each store back to its "
    "checkpointed state: docs/state.md, Restore); remove the key or set it to true"
)

KEYS = [
    # Job and tasks
    Key(
        "job.name",
        "str",
        "Name of the job; with job.id it names internal topics and state dirs: ASCII letters, digits, "
        "'.', '_' and '-'.",
    ),
    Key(
        "job.id",
        "str",
        "Instance id of the job, to run copies of one job: ASCII letters, digits, '_' or '.' (no '-').",
        default="1",
    ),
    Key("task.class", "class", "The StreamTask class, as module:Class or module.Class on PYTHONPATH."),
    Key("task.inputs", "list", "Comma list of <system>.<stream> the tasks consume."),
    Key(
        "task.broadcast.inputs",
        "list",
        "<system>.<stream>#<p> or #[<a>-<b>]: partitions every task gets (to process, or an adjunct store).",
    ),
    Key(
        "task.outputs",
        "list",
        "Comma list of <system>.<stream> the task may send to; checked to exist at start.",
    ),
    Key("job.container.count", "int", "How many containers run the job's tasks.", default="1", minimum=1),
    Key(
        "task.commit.ms",
        "int",
        "How often each task commits (flush outputs and stores, checkpoint offsets); -1 for manual only. "
        "A task with nothing new since its last commit skips it.",
        default="60000",
        minimum=1,
        allow_off=True,
    ),
    Key(
        "task.window.ms",
        "int",
        "How often StreamTask.window runs; -1 turns it off.",
        default="-1",
        minimum=1,
        allow_off=True,
    ),
    Key(
        "task.commit.max.delay.ms",
        "int",
        "How long a commit may be skipped while the previous async upload runs (0: never skipped, it waits).",
        default="60000",
        minimum=0,
    ),
    Key(
        "task.commit.timeout.ms",
        "int",
        "How long a commit may wait for the previous one's async phase (upload, checkpoint, cleanup), and a "
        "waited commit (start-up, requested, final) for its own, before the container fails.",
        default="1800000",
        minimum=1,
    ),
    Key(
        "task.deserialization.error.policy",
        "enum",
        "What an undeserializable input message does: fail the task, skip it (counted), or send it to "
        "the dead-letter topic.",
        default="fail",
        choices=("fail", "skip", "dlq"),
    ),
    Key(
        "task.deserialization.dlq.stream",
        "str",
        "Dead-letter stream for the dlq policy, on the failing input's system "
        "(default samsa-dlq-<job.name>-<job.id>).",
    ),
    Key(
        "task.checkpoint.system",
        "str",
        "System holding the checkpoint and coordinator topics (Samza's key); required when the inputs are on "
        "more than one system, else their system.",
    ),
    Key(
        "task.checkpoint.segment.bytes",
        "int",
        f"segment.bytes of {_CHECKPOINT_TOPIC} when Samsa creates it (Samza's default): compaction never "
        "touches the active segment, so a smaller one keeps what every start reads small.",
        default="26214400",
        minimum=1024,
    ),
    Key(
        "task.checkpoint.replication.factor",
        "int",
        f"Replication factor of {_CHECKPOINT_TOPIC} when Samsa creates it (-1: the broker's default).",
        default="-1",
        minimum=1,
        maximum=32767,
        minus_one="for the broker's default",
    ),
    Key(
        "task.consumer.batch.size",
        "int",
        "How many messages the chooser takes from one partition before moving to the next.",
        default="1",
        minimum=1,
    ),
    Key(
        "task.shutdown.ms",
        "int",
        "How long a container may take to stop gracefully (finish, flush, commit) before it is killed.",
        default="30000",
        minimum=1,
    ),
    Key(
        "task.process.warn.ms",
        "int",
        "Samsa's own: how long one task's process() may run before the container logs a warning naming the "
        "task, the partition, the offset and the loop thread's stack (again every as long while it lasts); "
        "-1 turns it off.",
        default="60000",
        minimum=1,
        allow_off=True,
    ),
    Key(
        "job.processing.guarantee",
        "enum",
        "at_least_once, or exactly_once.",
        default="at_least_once",
        choices=("at_least_once", "exactly_once"),
    ),
    Key(
        "task.eos.buffer.max.bytes",
        "int",
        "On-disk buffer bound per task: beyond it the partitions running ahead are paused.",
        default="1073741824",
        minimum=1,
    ),
    Key(
        "task.eos.barrier.timeout.ms",
        "int",
        "How long a missing marker waits before it is reported (log line and metric).",
        default="60000",
        minimum=1,
    ),
    Key(
        "job.coordinator.monitor-partition-change.frequency.ms",
        "int",
        "How often the supervisor compares the inputs' partition counts with the job model's; on a change "
        "the job restarts with a new model (a job with durable stores stops instead). -1 turns it off.",
        default="60000",
        minimum=1,
        allow_off=True,
    ),
    Key(
        "job.coordinator.monitor-partition-change",
        "bool",
        "Samza's switch of the watch above: false turns it off (as -1 does); on by default in Samsa, where "
        "Samza's is off.",
        default="true",
    ),
    Key("job.logged.store.base.dir", "path", "Directory of stores with a backup.", default="./state"),
    Key("job.non-logged.store.base.dir", "path", "Directory of stores without a backup.", default="./state"),
    Key(
        "job.config.rewriters",
        "list",
        "Config rewriters run, in order, on the loaded job config (the file and --config): Samza's "
        "environment rewriter only (job.config.rewriter.<name>.class).",
    ),
    Key(
        "job.config.rewriter.<name>.class",
        "str",
        "org.apache.samza.config.EnvironmentConfigRewriter, the only rewriter: each SAMZA_<KEY> environment "
        "variable sets <key> (lower-cased, _ as .) over the config's value; for secrets.",
    ),
    Key(
        "job.deploy",
        "enum",
        "Where containers run (samsa run --deploy overrides).",
        default="local",
        choices=("local", "spark"),
    ),
    Key(
        "deploy.local.max.restarts",
        "int",
        "Container restarts the local supervisor allows per 10 minutes before it gives up.",
        default="10",
        minimum=0,
    ),
    Key(
        "deploy.local.fork.server",
        "bool",
        "true: the local supervisor forks containers (and their restarts) from a process that loaded the "
        "container runtime once, boto3's S3 models too for S3-backed jobs; false: each starts a fresh "
        "interpreter.",
        default="true",
    ),
    Key(
        "deploy.spark.master",
        "str",
        "Spark master URL; by default local[<containers>,<maxFailures>]: a slot per container on this "
        "machine, maxFailures being deploy.spark.conf.spark.task.maxFailures when set, else 1.",
    ),
    Key(
        "deploy.spark.conf.*",
        "passthrough",
        "Passed to Spark as <key> (e.g. deploy.spark.conf.spark.log.level).",
    ),
    Key(
        "deploy.spark.max.restarts",
        "int",
        "Container restarts the Spark driver allows per 10 minutes before it fails the job.",
        default="10",
        minimum=0,
    ),
    Key(
        "deploy.spark.heartbeat.timeout.ms",
        "int",
        "A container that has not heard the driver for this long stops itself.",
        default="30000",
        minimum=1000,
    ),
    Key(
        "metrics.prometheus.port",
        "int",
        "Serve Prometheus metrics on this port (per container: port + N); 0: each container binds a free "
        "port of its own and logs it.",
        minimum=0,
        maximum=65535,
    ),
    # Systems and streams
    Key(
        "systems.<sys>.samza.factory",
        "class",
        "The system's kind: kafka or inmemory.",
        choices=("kafka", "inmemory"),
    ),
    Key(
        "systems.<sys>.bootstrap.servers",
        "str",
        "Kafka host:port list of the system; for an inmemory system an inmemory:// URL "
        "(default inmemory://<sys>).",
    ),
    Key("systems.<sys>.consumer.*", "passthrough", "Passed to librdkafka's consumer as is."),
    Key("systems.<sys>.producer.*", "passthrough", "Passed to librdkafka's producer as is."),
    Key("systems.<sys>.samza.key.serde", "str", "Key serde of the system's streams.", default="bytes"),
    Key("systems.<sys>.samza.msg.serde", "str", "Message serde of the system's streams.", default="bytes"),
    Key(
        "systems.<sys>.samza.offset.default",
        "enum",
        "Where a partition without a checkpoint starts.",
        default="upcoming",
        choices=("oldest", "upcoming"),
    ),
    Key("systems.<sys>.streams.<stream>.samza.key.serde", "str", "Key serde of this stream."),
    Key("systems.<sys>.streams.<stream>.samza.msg.serde", "str", "Message serde of this stream."),
    Key(
        "systems.<sys>.streams.<stream>.samza.bootstrap",
        "bool",
        "Read this stream to the high watermark seen at start before other inputs.",
        default="false",
    ),
    Key(
        "systems.<sys>.streams.<stream>.samza.reset.offset",
        "bool",
        "Ignore this stream's checkpointed offset at start.",
        default="false",
    ),
    Key(
        "systems.<sys>.streams.<stream>.samza.offset.default",
        "enum",
        "Where a partition of this stream without a checkpoint starts.",
        choices=("oldest", "upcoming"),
    ),
    Key(
        "systems.<sys>.streams.<stream>.samza.intermediate",
        "bool",
        "true: the stream links two exactly-once Samsa jobs (markers, no broker transactions); set it in "
        "both jobs (refused in an at-least-once job).",
        default="false",
    ),
    Key(
        "serializers.registry.<name>.class",
        "class",
        "A serde factory path, or a built-in serde name.",
        choices=("bytes", "string", "json", "integer", "long", "avro"),
    ),
    # Stores
    Key(
        "stores.<s>.factory",
        "class",
        "The store engine: rocksdb, inmemory, or a module:Class path.",
        choices=("rocksdb", "inmemory"),
    ),
    Key("stores.<s>.key.serde", "str", "Key serde of the store.", default="bytes"),
    Key("stores.<s>.msg.serde", "str", "Value serde of the store.", default="bytes"),
    Key(
        "stores.<s>.object.cache.size",
        "int",
        "Deserialized objects cached per task store (Samza's CachedStore); 0 turns the cache off.",
        default="1000",
        minimum=0,
    ),
    Key(
        "stores.<s>.write.batch.size",
        "int",
        "Dirty cached entries written to the engine in one batch (at most object.cache.size).",
        default="500",
        minimum=1,
    ),
    Key(
        "stores.<s>.changelog",
        "str",
        "<system>.<stream> the store's writes are logged to (compacted, one partition per task); blank: "
        "none.",
    ),
    Key(
        "stores.<s>.changelog.replication.factor",
        "int",
        "Replication factor of a changelog topic Samsa creates (-1: the broker's default).",
        default="-1",
        minimum=1,
        maximum=32767,  # Kafka's replication factor is a 16-bit signed int
        minus_one="for the broker's default",
    ),
    Key(
        "stores.<s>.changelog.delete.retention.ms",
        "int",
        "Tombstone retention of the changelog; local state older than this is not reused at restore.",
        default="86400000",
        minimum=0,
    ),
    Key(
        "stores.<s>.changelog.min.compaction.lag.ms",
        "int",
        "Changelog min.compaction.lag.ms; a checkpoint older than 0.9 of it restores without trimming.",
        default="14400000",
        minimum=0,
    ),
    Key(
        "stores.<s>.changelog.kafka.*",
        "passthrough",
        "Topic config a changelog Samsa creates gets (Samza's), e.g. stores.<s>.changelog.kafka."
        "max.message.bytes for store values over 1 MB; cleanup.policy stays compact.",
    ),
    Key(
        RETAIN_EXISTING_STATE,
        "bool",
        "A store without a checkpointed changelog position: true keeps what its changelog holds, false "
        "starts it empty (undoing what the changelog holds). Unset: a job that never started refuses a "
        "changelog holding data; a store new to a job that ran keeps it.",
    ),
    Key(
        "task.transactional.state.checkpoint.enabled",
        "bool",
        "Samza's switch of transactional checkpoints: always on in Samsa (only true is accepted).",
        default="true",
        refused_values={"false": _TRANSACTIONAL},
    ),
    Key(
        "task.transactional.state.restore.enabled",
        "bool",
        "Samza's switch of transactional restore: always on in Samsa (only true is accepted).",
        default="true",
        refused_values={"false": _TRANSACTIONAL},
    ),
    Key(
        "stores.backup.factories",
        "list",
        "Backup factories of every store: changelog, blobstore (default: changelog where one is set).",
    ),
    Key("stores.restore.factories", "list", "Restore factories of every store, in priority order."),
    Key("stores.<s>.backup.factories", "list", "Backup factories of the store (overrides the job's)."),
    Key("stores.<s>.restore.factories", "list", "Restore factories of the store, in priority order."),
    Key("task.backup.factories", "list", "Alias of stores.backup.factories (the seed's name)."),
    Key("task.restore.factories", "list", "Alias of stores.restore.factories (the seed's name)."),
    Key(
        "stores.restore.parallelism",
        "int",
        "How many stores of a container restore at once.",
        default="4",
        minimum=1,
    ),
    Key(
        "task.checkpoint.write.versions",
        "list",
        "Checkpoint versions written at each commit (1, 2).",
        default="1,2",
    ),
    Key(
        "task.checkpoint.read.versions",
        "list",
        "Checkpoint versions read at start, in priority order.",
        default="2,1",
    ),
    Key(
        "blobstore.local.dir",
        "path",
        "Embedded blob store directory (default: <job.logged.store.base.dir>/blobstore).",
    ),
    Key("blobstore.s3.bucket", "str", "S3 bucket of the blob store; setting it selects S3."),
    Key("blobstore.s3.prefix", "str", "S3 key prefix of the job's blobs (default: the bucket's root)."),
    Key("blobstore.s3.endpoint.url", "str", "S3 endpoint URL (S3-compatible stores, tests)."),
    Key("blobstore.s3.region", "str", "S3 region (default: boto3's configuration chain)."),
    Key(
        "blobstore.chunk.size",
        "int",
        "Files larger than this (bytes) are stored as several blobs.",
        default=str(64 * 1024 * 1024),
        minimum=1024,
    ),
    Key(
        "blobstore.upload.parallelism",
        "int",
        "Blob uploads in flight per container.",
        default="8",
        minimum=1,
    ),
    Key(
        "blobstore.download.parallelism",
        "int",
        "Blob downloads in flight per container while restoring.",
        default="8",
        minimum=1,
    ),
    Key(
        "blobstore.ttl.days",
        "int",
        "Days before a blob of a commit that never completed expires.",
        default="30",
        minimum=1,
    ),
    Key(
        "blobstore.retry.max.duration.ms",
        "int",
        "How long a failing blob request is retried (throttling, 5xx, timeouts) before the commit fails.",
        default="900000",
        minimum=0,
    ),
    # Adjunct stores
    Key(
        "stores.<s>.adstore.input",
        "str",
        "<system>.<stream> feeding the read-only adjunct store; its messages go to the store, not process.",
    ),
    Key(
        "stores.<s>.adstore.key.value.extractor.factory",
        "str",
        "debezium (built in) or module:factory of a key/value extractor (default: envelope key and value).",
    ),
    Key(
        "stores.<s>.adstore.versioned",
        "bool",
        "A bounded dataset: a message with header samsa.end.of.dataset seals the version read so far; "
        "reads see the last sealed version.",
        default="false",
    ),
    Key(
        "stores.adstore.manager.factory",
        "class",
        "builtin, or module:Class of an adjunct manager factory (samsa.adjunct.manager.AdjunctManagerFactory)"
        " that writes adjunct streams into their stores.",
        default="builtin",
        choices=("builtin",),
    ),
    Key(
        "stores.<s>.adstore.max.staleness.ms",
        "int",
        "A persistent adjunct store whose offsets file is older than this is rebuilt at start.",
        default="86400000",
        minimum=0,
    ),
]

_PER_STORE_MEMORY = "use stores.<s>.rocksdb.{0} or job.container.rocksdb.{1}"

#: Samza's stream-id keys (`streams.<id>.samza.bootstrap`, ...), refused with the key Samsa takes instead.
STREAM_ID_KEYS = "streams.*"
_STREAM_ID_GENERAL = (
    "Samsa names a stream by its system and topic, not by a stream id: write its settings as "
    "systems.<sys>.streams.<stream>.samza.<setting> (`samsa config keys` lists them), the stream being "
    "<sys>.<stream> in task.inputs or task.outputs"
)
# The keys whose values name streams of the job, as <system>.<stream> (a broadcast one with #<partitions>).
_STREAM_LISTS = ("task.inputs", "task.outputs", "task.broadcast.inputs")
_STREAM_VALUED = re.compile(r"stores\.[^.]+\.(changelog|adstore\.input)")


def _named_streams(config: Mapping[str, str]) -> set[tuple[str, str]]:
    """The (system, stream) pairs the raw config names in task.inputs, task.outputs, task.broadcast.inputs,
    changelogs and adjunct inputs; malformed items are left to the checks that name them."""
    items = [item for key in _STREAM_LISTS for item in config.get(key, "").split(",")]
    items += [value for key, value in config.items() if _STREAM_VALUED.fullmatch(key)]
    found = set()
    for item in items:
        system, _, stream = item.strip().partition("#")[0].partition(".")
        if system and stream:
            found.add((system, stream))
    return found


def stream_id_advice(key: str, config: Mapping[str, str]) -> str:
    """What to write instead of Samza's `streams.<id>.<setting>`: the exact `systems.<sys>.streams.<stream>.`
    key when the id (or its `samza.physical.name` and `samza.system`) names one stream of the job."""
    body = key[len("streams.") :]
    stream_id, sep, setting = body.partition(".samza.")
    if not sep:
        return _STREAM_ID_GENERAL
    physical = config.get(f"streams.{stream_id}.samza.physical.name", "").strip() or stream_id
    system = config.get(f"streams.{stream_id}.samza.system", "").strip()
    matches = {s for s in _named_streams(config) if s[1] == physical and (not system or s[0] == system)}
    if not matches:
        return f"{_STREAM_ID_GENERAL} (no stream of the job is named {physical!r})"
    if len(matches) > 1:
        on = ", ".join(f"{s}.{t}" for s, t in sorted(matches))
        return f"{_STREAM_ID_GENERAL} ({physical!r} names streams on several systems: {on})"
    ((system, stream),) = matches
    if setting in ("system", "physical.name"):
        return (
            f"Samsa names a stream by <system>.<stream> in task.inputs (and task.outputs), here "
            f"{system}.{stream}, not by a stream id"
        )
    head = "Samsa names a stream by its system and topic, not by a stream id"
    if setting == "broadcast":
        return f"{head}: list {system}.{stream}#[<first>-<last partition>] in task.broadcast.inputs instead"
    instead = f"systems.{system}.streams.{stream}.samza.{setting}"
    if any(k.regex.fullmatch(instead) for k in KEYS):
        return f"{head}: write {instead} instead (stream {system}.{stream} of the job)"
    for pattern, why in SAMZA_UNSUPPORTED.items():
        if Key(pattern, "str", why).regex.fullmatch(instead):
            return f"{head}, and {instead} is not supported either: {why}"
    return (
        f"{head}, and Samsa has no per-stream setting samza.{setting} (`samsa config keys` lists those of "
        "systems.<sys>.streams.<stream>.samza.*)"
    )


# Unsupported keys whose advice depends on the job: the exact key to write instead.
_ADVICE: dict[str, Callable[[str, Mapping[str, str]], str]] = {STREAM_ID_KEYS: stream_id_advice}

# Well-known Samza keys Samsa does not implement: rejected naming what to do instead, never guessed at
# as a typo of some other key.
SAMZA_UNSUPPORTED = {
    "job.factory.class": "containers are started by job.deploy (local or spark)",
    "job.coordinator.system": "the coordinator topic is on task.checkpoint.system",
    "job.coordinator.monitor-input-regex-frequency.ms": "inputs matched by a regex are not supported: list "
    "each input as <system>.<stream> in task.inputs",
    "job.coordinator.replication.factor": "the coordinator topic is created with the broker's "
    "default.replication.factor (the checkpoint topic with task.checkpoint.replication.factor)",
    "job.default.system": "every stream names its system: <system>.<stream> in task.inputs, task.outputs and "
    "stores.<s>.changelog, OutgoingMessage(system, stream, ...) in the task; the checkpoint and coordinator "
    "topics are on task.checkpoint.system (required when the inputs are on more than one system)",
    "job.changelog.system": "name the system in each stores.<s>.changelog (<system>.<stream>)",
    "job.systemstreampartition.grouper.factory": "tasks are one per partition number (GroupByPartition)",
    "task.name.grouper.factory": "tasks are dealt round-robin to job.container.count containers",
    "job.container.thread.pool.size": "a container processes its tasks on its run loop's thread",
    "task.checkpoint.factory": f"checkpoints are kept in the compacted topic {_CHECKPOINT_TOPIC} on "
    "task.checkpoint.system",
    "task.chooser.class": "inputs are read round-robin, streams with samza.bootstrap=true first",
    "task.drop.deserialization.errors": "set task.deserialization.error.policy=skip (or dlq)",
    "task.ignored.exceptions": "an exception from process() or window() fails the container; catch the ones "
    "to ignore inside process() (an input that does not deserialize: task.deserialization.error.policy=skip "
    "or dlq)",
    "task.drop.serialization.errors": "an output that does not serialize raises from collector.send(); catch "
    "the error there to drop the message",
    "task.drop.producer.errors": "a send the broker refuses fails the container, which restarts from its "
    "last commit; librdkafka retries first (systems.<sys>.producer.message.timeout.ms)",
    "task.max.concurrency": "a task processes one message at a time (StreamTask)",
    "task.callback.timeout.ms": "a task processes one message at a time (StreamTask)",
    "task.opts": "containers are Python processes",
    "task.java.home": "containers are Python processes",
    "metrics.reporters": "Samsa serves Prometheus metrics: set metrics.prometheus.port",
    "metrics.reporter.<name>.class": "Samsa serves Prometheus metrics: set metrics.prometheus.port",
    "metrics.reporter.<name>.stream": "Samsa serves Prometheus metrics: set metrics.prometheus.port",
    # Outside Samsa's prefixes, yet only ever Samza's (its YARN deployment: yarn.package.path,
    # yarn.container.count, ...): a port would otherwise keep them as the task's own.
    "yarn.*": "Samsa does not run on YARN: containers are started by job.deploy (local or spark), "
    "job.container.count sets how many, and no package is uploaded",
    "systems.<sys>.samza.fetch.threshold": "a container holds at most two fetch batches; bound librdkafka's "
    "prefetch with systems.<sys>.consumer.queued.max.messages.kbytes",
    "systems.<sys>.samza.fetch.threshold.bytes": "a container holds at most two fetch batches; bound "
    "librdkafka's prefetch with systems.<sys>.consumer.queued.max.messages.kbytes",
    "systems.<sys>.consumer.zookeeper.connect": "Kafka clients find the cluster by "
    "systems.<sys>.bootstrap.servers",
    "systems.<sys>.default.stream.samza.offset.default": "set systems.<sys>.samza.offset.default",
    "systems.<sys>.default.stream.replication.factor": "Samsa creates no input or output topics, only its "
    "own: set stores.<s>.changelog.replication.factor and task.checkpoint.replication.factor",
    "systems.<sys>.streams.<stream>.samza.priority": "inputs are read round-robin; "
    "samza.bootstrap=true reads a stream before the others",
    "stores.<s>.rocksdb.ttl.ms": "RocksDB's TTL is not exposed; delete expired keys in the task "
    "(e.g. in window())",
    "stores.<s>.container.cache.size.bytes": _PER_STORE_MEMORY.format(
        "block.cache.size.bytes", "block.cache.size.bytes"
    ),
    "stores.<s>.container.write.buffer.size.bytes": _PER_STORE_MEMORY.format(
        "write.buffer.size.bytes", "write.buffer.total.bytes"
    ),
    "stores.<s>.side.inputs": "feed a read-only store from a stream with stores.<s>.adstore.input",
    "stores.<s>.side.inputs.processor.factory": "feed a read-only store from a stream with "
    "stores.<s>.adstore.input and stores.<s>.adstore.key.value.extractor.factory",
    # Samza's stream-id form: outside Samsa's prefixes, it would otherwise be kept as the task's own key
    # and silently do nothing (a bootstrap not read first, an offset default not applied).
    STREAM_ID_KEYS: _STREAM_ID_GENERAL,
}

# A key under one of these prefixes that the registry does not know is a mistake, not a user's own key.
GOVERNED_PREFIXES = (
    "job.",
    "task.",
    "systems.",
    "stores.",
    "serializers.",
    "metrics.",
    "deploy.",
    "blobstore.",
)

# The sub-namespaces of a store's keys (`stores.<s>.<namespace>.*`) that are Samsa's (and Samza's), under any
# store engine: a custom engine's own keys go elsewhere under `stores.<s>.`. The other dotted store keys
# (`key.serde`, `msg.serde`, `object.cache.size`, `write.batch.size`) are names, not namespaces.
STORE_NAMESPACES = ("adstore", "backup", "changelog", "container", "restore", "rocksdb", "side")


def build_registry(extra: list[Key] | None = None, own_keys: list[OwnKeys] | None = None) -> KeyRegistry:
    """The registry of all keys, plus keys contributed by packages (serde options, ...) and the namespaces
    of custom components' own keys."""
    unsupported = [
        Key(k, "str", why, unsupported=why, advice=_ADVICE.get(k)) for k, why in SAMZA_UNSUPPORTED.items()
    ]
    return KeyRegistry([*KEYS, *(extra or []), *unsupported], GOVERNED_PREFIXES, own_keys or [])
