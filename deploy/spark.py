"""Samsa's Spark layer: the only code that imports pyspark (sessions, long-running container tasks, batch)."""

from __future__ import annotations

import bisect
import contextlib
import functools
import importlib
import json
import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.deploy.exceptions import BootstrapError, SparkError, SparkJvmLostError, SparkMissingError
from samsa.runtime.config.job import JobConfig

if TYPE_CHECKING:
    from samsa.deploy.bootstrap import BootstrapPlan, PartitionResult

log = logging.getLogger(__name__)

try:  # an optional extra: the local deployment and every other module work without it
    from py4j.protocol import Py4JError, Py4JJavaError  # type: ignore[import-untyped]
    from pyspark import SparkConf, SparkContext, TaskContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.rdd import RDD
    from pyspark.serializers import CPickleSerializer
    from pyspark.sql import SparkSession

    _IMPORT_ERROR: ImportError | None = None
except ImportError as e:  # pragma: no cover - exercised only where the extra is absent
    _IMPORT_ERROR = e

# Spark's JVM log level unless the job asks for more (deploy.spark.conf.spark.log.level): its INFO/WARN lines
# would bury the containers' own log.
QUIET_LOG_LEVEL = "ERROR"
# The same for the lines logged before the level can be set, on the driver's and the executors' JVMs.
QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
# How long a failed call through the gateway waits for the JVM's exit to show (the socket closes first).
_JVM_EXIT_WAIT_S = 5.0


def require_pyspark() -> None:
    """Raises a clear error when the `spark` extra is not installed."""
    if _IMPORT_ERROR is not None:
        raise SparkMissingError(
            f"running on Spark needs pyspark, which is not installed ({_IMPORT_ERROR}); install it with "
            "`pip install -e '.[spark]'` from Samsa's checkout (Java 17 must be on the PATH), or run with "
            "job.deploy=local"
        )


def default_master(containers: int, max_failures: int = 1) -> str:
    """`local[<containers>,<maxFailures>]`: one slot per container on this machine. Local mode ignores
    `spark.task.maxFailures`; only the master's second number sets Spark's attempts per task, so the job's
    `spark.task.maxFailures` goes there (default 1, no Spark retry: the driver restarts containers itself)."""
    return f"local[{containers},{max_failures}]"


def spark_conf(job: JobConfig) -> dict[str, str]:
    """Spark settings of the job: Samsa's defaults, then `deploy.spark.conf.*` (the user wins)."""
    quiet = f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J}"
    conf = {
        # The driver restarts containers itself (backoff, budget); Spark retrying a task would bypass both.
        "spark.task.maxFailures": "1",
        "spark.ui.showConsoleProgress": "false",
    }
    if "spark.log.level" not in job.spark_conf:
        conf["spark.driver.extraJavaOptions"] = quiet
        conf["spark.executor.extraJavaOptions"] = quiet
    return {**conf, **job.spark_conf}


@dataclass(frozen=True)
class TaskPlace:
    """Where a Spark task attempt ran: its executor and host, and the preferred-location string naming it."""

    executor_id: str
    host: str

    @property
    def location(self) -> str:
        # Spark's ExecutorCacheTaskLocation syntax: a preference for one executor, not only its host.
        return f"executor_{self.host}_{self.executor_id}"


@dataclass(frozen=True)
class AttemptInfo:
    """The running task attempt, as seen from inside it."""

    stage_id: int
    task_attempt_id: int
    attempt_number: int


def current_attempt() -> AttemptInfo | None:
    """The Spark task attempt this code runs in (None outside a Spark task)."""
    if _IMPORT_ERROR is not None:
        return None
    context = TaskContext.get()
    if context is None:
        return None
    return AttemptInfo(context.stageId(), context.taskAttemptId(), context.attemptNumber())


def probe(_: object = None) -> AttemptInfo | None:
    """A task body reporting its attempt: run with `Spark.run_task` to see where a preference places it."""
    return current_attempt()


class Spark:
    """One SparkContext for Samsa's driver: long-running single-task jobs, placement lookups, batch jobs."""

    def __init__(
        self,
        app_name: str,
        master: str,
        conf: Mapping[str, str] | None = None,
        python: str | None = None,
    ) -> None:
        require_pyspark()
        # The executors' Python must be the driver's (its venv has samsa installed) unless the user says.
        os.environ.setdefault("PYSPARK_PYTHON", python or sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1" if master.startswith("local") else "")
        if not os.environ["SPARK_LOCAL_IP"]:
            del os.environ["SPARK_LOCAL_IP"]
        settings = {"spark.ui.showConsoleProgress": "false", **(conf or {})}
        spark_conf = SparkConf().setMaster(master).setAppName(app_name)
        for key, value in settings.items():
            spark_conf = spark_conf.set(key, str(value))
        self.master = master
        logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per closed gateway connection
        # py4j logs each failed call of a lost JVM (with its traceback) on the root logger, not its own.
        logging.getLogger().addFilter(_drop_py4j_records)
        started = time.monotonic()
        try:
            self._sc = _context(spark_conf)
        except Exception as e:
            raise SparkError(f"cannot start Spark with master {master!r}: {e}") from e
        self._quiet_accumulator_server()
        self._sc.setLogLevel(settings.get("spark.log.level", QUIET_LOG_LEVEL))
        log.info("Spark context up (master %s) in %.1f s", master, time.monotonic() - started)

    @property
    def context(self) -> Any:
        return self._sc

    def sql(self) -> Any:
        """The SparkSession over this context (for the batch jobs that read tables)."""
        return SparkSession(self._sc)

    def executor_count(self) -> int:
        """Executors registered now (local mode has one, the driver)."""
        return int(self._sc._jsc.sc().getExecutorIds().size()) or 1

    def slots(self) -> int:
        """Tasks Spark runs at once now (its default parallelism: the cores of the registered executors)."""
        return int(self._sc.defaultParallelism)

    def await_executors(self, count: int, timeout_s: float = 120.0) -> None:
        """Waits until `count` executors registered (a cluster master starts them after the context)."""
        if self.master.startswith("local["):
            return
        deadline = time.monotonic() + timeout_s
        while self.executor_count() < count:
            if time.monotonic() > deadline:
                raise SparkError(
                    f"only {self.executor_count()} of {count} Spark executors registered within "
                    f"{timeout_s:.0f} s (master {self.master}); check the cluster's workers"
                )
            time.sleep(0.2)

    def warm_up(self, workers: int, warm_s3: bool = False) -> None:
        """Starts `workers` Python workers with the container runtime imported (and boto3's S3 models
        parsed, `warm_s3`): Spark reuses idle workers, so the containers' tasks start at once instead of
        forking and importing first (a second or so), and make their S3 client in ~10 ms."""
        load = functools.partial(_import_container_runtime, warm_s3)
        try:
            self._sc.setJobGroup("samsa-warm-up", "start Python workers for Samsa's containers")
            self._sc.parallelize(range(workers), workers).foreach(load)
        except Exception as e:
            raise self._lost_jvm(e) or SparkError(
                f"Spark cannot run Python tasks: {_spark_failure(e)}"
            ) from e

    # -- long-running single-task jobs -------------------------------------------------------------
    def run_task(
        self,
        group: str,
        description: str,
        func: Callable[[Any], Any],
        payload: Any,
        preferred: Sequence[str] = (),
    ) -> Any:
        """Runs `func(payload)` as the one task of a new Spark job under job group `group` and returns its
        result; blocks until it ends, raising SparkError when the task (or its executor) failed, and
        SparkJvmLostError when Spark's JVM is gone (every task with it)."""

        def run(items: Iterable[Any]) -> Iterator[Any]:
            for item in items:
                yield func(item)

        try:
            self._sc.setJobGroup(group, description, interruptOnCancel=True)
            results = self._one_element(payload, preferred).mapPartitions(run).collect()
        except Exception as e:
            raise self._lost_jvm(e) or SparkError(_spark_failure(e)) from e
        return results[0] if results else None

    def _one_element(self, payload: Any, preferred: Sequence[str]) -> Any:
        if not preferred:
            return self._sc.parallelize([payload], 1)
        # PySpark has no public way to give an RDD element a preferred location; SparkContext.makeRDD
        # (Scala) has, so the element goes in pickled and Python reads it back with the same serializer.
        jvm: Any = self._sc._jvm
        convert = jvm.scala.jdk.javaapi.CollectionConverters
        locations = jvm.java.util.ArrayList()
        for location in preferred:
            locations.add(location)
        element = jvm.scala.Tuple2(bytearray(pickle.dumps(payload)), convert.asScala(locations).toSeq())
        elements = jvm.java.util.ArrayList()
        elements.add(element)
        tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
        java_rdd = self._sc._jsc.sc().makeRDD(convert.asScala(elements).toSeq(), tag).toJavaRDD()
        return RDD(java_rdd, self._sc, CPickleSerializer())

    def cancel(self, group: str) -> None:
        """Cancels the group's jobs: Spark kills their Python workers (no `finally` runs). Nothing to
        cancel when the JVM is gone."""
        try:
            self._sc.cancelJobGroup(group)
        except Exception as e:
            if self._lost_jvm(e) is None:
                raise

    def place_of(self, stage_id: int, task_attempt_id: int) -> TaskPlace | None:
        """The executor a task attempt ran on, from the driver's status store (None when not known yet)."""
        with contextlib.suppress(Exception):  # the status store is Spark-internal: best effort
            tasks = self._sc._jsc.sc().statusStore().taskList(stage_id, 0, 100).iterator()
            while tasks.hasNext():
                task = tasks.next()
                if int(task.taskId()) == task_attempt_id:
                    return TaskPlace(str(task.executorId()), str(task.host()))
        return None

    def stop(self) -> None:
        """Stops the SparkContext (its JVM exits with this process); a lost JVM has nothing to stop."""
        try:
            self._sc.stop()
        except Exception as e:
            if self._lost_jvm(e) is None:
                raise
            log.debug("Spark's JVM was gone when its context was stopped: %s", e)

    def _lost_jvm(self, error: BaseException) -> SparkJvmLostError | None:
        """A SparkJvmLostError when `error` came of Spark's JVM having exited, else None (a job's failure)."""
        if isinstance(error, SparkJvmLostError):
            return error
        if isinstance(error, Py4JJavaError) or not isinstance(error, Py4JError | ConnectionError):
            return None  # an exception thrown in the JVM, which still runs, or no gateway call at all
        process = getattr(SparkContext._gateway, "proc", None)
        if process is None:  # a gateway made elsewhere: its connection failing is all there is to go on
            return SparkJvmLostError(
                f"Spark's JVM cannot be reached ({type(error).__name__}: {error}); the containers are "
                "gone; start the job again"
            )
        with contextlib.suppress(Exception):  # the socket closes before the exit shows
            process.wait(_JVM_EXIT_WAIT_S)
        status = process.poll()
        if status is None:
            return None
        how = f"killed by {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
        return SparkJvmLostError(
            f"Spark's JVM (pid {process.pid}) exited unexpectedly ({how}: killed, or out of memory?); "
            "the containers are gone; start the job again"
        )

    def _quiet_accumulator_server(self) -> None:
        """No traceback on stderr from pyspark's accumulator server when the JVM's connection drops (a
        lost JVM is reported once, by the driver)."""
        server = getattr(self._sc, "_accumulatorServer", None)
        if server is not None:
            server.handle_error = _accumulator_error


def _context(conf: SparkConf) -> SparkContext:
    """The process's SparkContext; a new one's JVM starts in a session of its own.

    pyspark starts the JVM in the driver's process group, ignoring only SIGINT: a SIGTERM to the group
    (`kill -- -PGID`, a terminal's hangup) would run the JVM's shutdown hook, which stops the SparkContext
    and kills every container before the driver's graceful stop. The JVM still exits with the driver: it
    exits when its stdin, a pipe from the driver, closes. (pyspark's Python workers have a process group
    of their own already.)
    """
    active = SparkContext._active_spark_context
    if active is not None:
        return active
    new_session = {"start_new_session": True}
    gateway = SparkContext._gateway or launch_gateway(conf, popen_kwargs=new_session)  # type: ignore[no-untyped-call]
    return SparkContext(conf=conf, gateway=gateway)


def _drop_py4j_records(record: logging.LogRecord) -> bool:
    """False for py4j's records on the root logger (a traceback per failed call of a lost JVM)."""
    return not (record.name == "root" and f"{os.sep}py4j{os.sep}" in record.pathname)


def _accumulator_error(request: object, client_address: object) -> None:
    log.debug("pyspark's accumulator server lost its connection from %s", client_address)


def _import_container_runtime(warm_s3: bool, _: object) -> None:
    import samsa.deploy.spark_task  # noqa: F401  (imported for its import cost, paid here once per worker)

    if warm_s3:
        from samsa.stores.blobstore.s3 import warm_models

        warm_models()


def _spark_failure(e: Exception) -> str:
    """The useful part of a Py4J/Spark job failure: its first lines, without the JVM stack."""
    text = str(e)
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("at ")]
    return "\n".join(lines[:12]) or type(e).__name__


# -- batch: state bootstrap ------------------------------------------------------------------------------
# How often the driver looks for partitions that completed, for the progress lines.
_PROGRESS_POLL_S = 0.2


def batch_spark(job: JobConfig, app_name: str) -> Spark:
    """A Spark for a batch job of `job`: `batch_master(job)` and the `deploy.spark.conf.*` keys."""
    conf = {**spark_conf(job), "spark.task.maxFailures": str(batch_attempts(job))}
    return Spark(app_name, batch_master(job), conf)


def batch_attempts(job: JobConfig) -> int:
    """Spark's attempts per batch task: the job's `spark.task.maxFailures`, else 4 (Spark's own default).
    Spark may retry a batch task; the containers' no-retry default is for long-running ones."""
    return job.spark_max_failures if "spark.task.maxFailures" in job.spark_conf else 4


def batch_master(job: JobConfig) -> str:
    """`deploy.spark.master`, else `local[*,<attempts>]`: every core of this machine, and the attempts in
    the master, the only place local mode reads them (it ignores `spark.task.maxFailures`)."""
    return job.spark_master or f"local[*,{batch_attempts(job)}]"


def run_bootstrap(
    spark: Spark, plan: BootstrapPlan, on_done: Callable[[PartitionResult], None]
) -> list[PartitionResult]:
    """The batch job of a state bootstrap: read the dataset, serialize and place each row as the inputs'
    producers would (`plan.partitioner`'s hash of the serialized key), sort each task partition by key and
    have `write_partition` write it; `on_done` is called as each partition completes.

    With pyarrow, rows reach Python as Arrow batches (columns, not pickled rows) and the shuffle and sort
    run in the JVM on the serialized bytes; without it, on RDDs of Python rows (slower, same result).
    """
    import threading

    from samsa.deploy.bootstrap import PartitionResult, read_done

    frame = _read_dataset(spark, plan)
    columns = list(frame.columns)
    if plan.key_column not in columns:
        raise BootstrapError(
            f"{plan.source}: no key column {plan.key_column!r} (columns: {', '.join(columns)})"
        )
    missing = [c for c in plan.value_columns if c not in columns]
    if missing:
        raise BootstrapError(
            f"{plan.source}: no column(s) {', '.join(missing)} (columns: {', '.join(columns)})"
        )
    values = list(plan.value_columns) or [c for c in columns if c != plan.key_column]
    plan = plan.with_columns(values, single=len(plan.value_columns) == 1)
    frame = frame.select(*[f"`{c}`" for c in (plan.key_column, *values)])
    cores = spark.context.defaultParallelism
    if frame.rdd.getNumPartitions() < cores:  # one file reads as one partition: spread the Python work
        frame = frame.repartition(cores)
    job = _arrow_job(frame, plan) if _arrow() is not None else _rdd_job(frame, plan)
    outcome: dict[str, Any] = {}

    def collect() -> None:
        try:
            outcome["results"] = job()
        except Exception as e:
            outcome["error"] = e

    spark.context.setJobGroup(f"bootstrap-{plan.store}", f"samsa state bootstrap of store {plan.store}")
    worker = threading.Thread(target=collect, name="bootstrap-job", daemon=True)
    worker.start()
    seen: set[int] = set()
    while worker.is_alive():
        worker.join(_PROGRESS_POLL_S)
        for result in read_done(plan, seen):
            on_done(result)
    if "error" in outcome:
        raise _bootstrap_failure(outcome["error"])
    written = {r.partition: r for r in outcome["results"]}
    results = [written.get(p) or PartitionResult(p, 0, 0, 0.0, None, 0) for p in range(plan.partitions)]
    for result in results:
        if result.partition not in seen:
            on_done(result)
    return results


def _rdd_job(frame: Any, plan: BootstrapPlan) -> Callable[[], list[PartitionResult]]:
    """Rows as Python objects: encoded, placed and sorted by PySpark (one Spark partition a task)."""
    from samsa.deploy.bootstrap import key_partitioner, row_encoder, write_partition

    def encode(rows: Iterable[Any]) -> Iterator[tuple[bytes, bytes]]:
        return map(row_encoder(plan), rows)

    def write(index: int, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[PartitionResult]:
        yield write_partition(plan, index, entries)

    placed = frame.rdd.mapPartitions(encode).repartitionAndSortWithinPartitions(
        plan.partitions, key_partitioner(plan.partitions, plan.partitioner)
    )
    return lambda: list(placed.mapPartitionsWithIndex(write).collect())


def _arrow_job(frame: Any, plan: BootstrapPlan) -> Callable[[], list[PartitionResult]]:
    """Arrow batches: Python encodes each batch's columns and computes the keys' partitions; the JVM
    shuffles (slot, key, value) rows by slot and sorts them by (slot, key), bytewise as RocksDB; Python
    writes each task partition's sorted rows into its SST file."""
    from samsa.deploy.bootstrap import PartitionResult

    slots = _slots(plan.partitions)
    placed = (
        _map_in_arrow(frame, _arrow_encoder(plan, slots), "slot int, key binary, value binary")
        .repartition(plan.partitions, "slot")
        .sortWithinPartitions("slot", "key")
    )
    written = _map_in_arrow(placed, _arrow_writer(plan, slots), "result string")
    return lambda: [PartitionResult(**json.loads(row[0])) for row in written.collect()]


def _arrow_encoder(plan: BootstrapPlan, slots: list[int]) -> Callable[[Iterable[Any]], Iterator[Any]]:
    def encode(batches: Iterable[Any]) -> Iterator[Any]:
        from samsa.deploy.bootstrap import column_encoders, row_encoder
        from samsa.deploy.key_placement import batch_placer

        pa = _arrow()
        encoders = column_encoders(plan)
        partitions_for = batch_placer(plan.partitioner)
        for batch in batches:
            key_column, value_columns = batch.column(0), batch.columns[1:]
            try:
                keys = _binary(pa, key_column, encoders.key_raw)
                if keys is None:
                    keys = pa.array(encoders.key(key_column.to_pylist()), pa.binary())
                values = _binary(pa, value_columns[0], encoders.value_raw)
                if values is None:
                    values = pa.array(encoders.value([c.to_pylist() for c in value_columns]), pa.binary())
            except Exception:
                rows = zip(*(c.to_pylist() for c in batch.columns), strict=True)
                for _ in map(row_encoder(plan), rows):  # raises the first bad row's BootstrapError
                    pass
                raise
            placed = [slots[p] for p in partitions_for(keys.to_pylist(), plan.partitions)]
            yield pa.RecordBatch.from_arrays(
                [pa.array(placed, pa.int32()), keys, values], names=["slot", "key", "value"]
            )

    return encode


def _arrow_writer(plan: BootstrapPlan, slots: list[int]) -> Callable[[Iterable[Any]], Iterator[Any]]:
    def write(batches: Iterable[Any]) -> Iterator[Any]:
        from samsa.deploy.bootstrap import write_partitions

        pa = _arrow()
        partition_of = {slot: p for p, slot in enumerate(slots)}

        def chunks() -> Iterator[tuple[int, list[bytes], list[bytes]]]:
            for batch in batches:
                if not batch.num_rows:
                    continue
                placed = batch.column(0).to_pylist()  # ascending: the rows are sorted by slot
                keys, values = batch.column(1).to_pylist(), batch.column(2).to_pylist()
                start = 0
                while start < len(placed):
                    end = bisect.bisect_right(placed, placed[start], start)
                    yield partition_of[placed[start]], keys[start:end], values[start:end]
                    start = end

        texts = [json.dumps(asdict(r)) for r in write_partitions(plan, chunks())]
        yield pa.RecordBatch.from_arrays([pa.array(texts, pa.string())], names=["result"])

    return write


def _binary(pa: Any, column: Any, raw: str | None) -> Any:
    """The column's own buffers as the serde's bytes (see `ColumnEncoders`), or None."""
    if raw is None or column.null_count:
        return None
    kind = column.type
    if raw == "utf8" and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return column.cast(pa.binary())
    if raw == "bytes" and (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        return column.cast(pa.binary())
    return None


def _arrow() -> Any:
    """pyarrow, or None where it is not installed."""
    try:
        return importlib.import_module("pyarrow")
    except ImportError:
        return None


def _map_in_arrow(frame: Any, func: Callable[[Iterable[Any]], Iterator[Any]], schema: str) -> Any:
    """`frame.mapInArrow(func, schema)`; pyspark asks for pandas there though Arrow batches need only
    pyarrow, so without pandas the same plan is built from its parts."""
    try:
        return frame.mapInArrow(func, schema)
    except ImportError:
        from pyspark.sql import DataFrame
        from pyspark.sql.udf import _create_udf
        from pyspark.util import PythonEvalType

        udf = _create_udf(func, returnType=schema, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
        column = udf(*[frame[c] for c in frame.columns])
        return DataFrame(frame._jdf.mapInArrow(column._jc, False, None), frame.sparkSession)


def _slots(partitions: int) -> list[int]:
    """For each task partition, an int that Spark's hash partitioning (Murmur3 of the int, seed 42, modulo
    the partition count) sends to the Spark partition of that number: one task partition a Spark task.
    Only the balance depends on it; the writer splits its rows by slot whatever it receives."""
    slots: dict[int, int] = {}
    candidate = 0
    while len(slots) < partitions and candidate < 1000 * partitions:
        slots.setdefault(_murmur3_int(candidate) % partitions, candidate)
        candidate += 1
    return [slots.get(p, -1 - p) for p in range(partitions)]


def _murmur3_int(value: int) -> int:
    """Spark's `Murmur3_x86_32.hashInt(value, 42)`, as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k = (rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593) & mask
    h = (rotl(42 ^ k, 13) * 5 + 0xE6546B64) & mask
    h ^= 4
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def _read_dataset(spark: Spark, plan: BootstrapPlan) -> Any:
    reader = spark.sql().read.format(plan.format)
    if plan.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        return reader.load(plan.source)
    except Exception as e:
        raise BootstrapError(f"cannot read {plan.source} as {plan.format}: {_spark_failure(e)}") from e


def _bootstrap_failure(e: Exception) -> Exception:
    """A bad row's BootstrapError, as raised on the executor; else the Spark failure."""
    text = str(e)
    marker = "BootstrapError: "
    at = text.find(marker)
    if at >= 0:
        return BootstrapError(text[at + len(marker) :].splitlines()[0])
    return SparkError(f"the state bootstrap's Spark job failed: {_spark_failure(e)}")
