"""The Spark deployment's driver: coordinator, one Spark job per container, restarts and clean stops."""

from __future__ import annotations

import logging
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from samsa.deploy.control import ControlServer, new_secret
from samsa.deploy.exceptions import SparkError, SparkJvmLostError
from samsa.deploy.local import unless_stopped
from samsa.deploy.partition_watch import PartitionWatch, restarts_on_change
from samsa.deploy.restarts import CONFIG_ERROR_EXIT, NO_RESTART, RESTART_WINDOW_S, RestartBudget
from samsa.deploy.spark import Spark, TaskPlace, default_master, spark_conf
from samsa.deploy.spark_task import ContainerLaunch, ContainerOutcome, run_container
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.job_model import JobModel
from samsa.runtime.partition_monitor import Changes
from samsa.runtime.state import uses_s3

log = logging.getLogger(__name__)

# Beyond task.shutdown.ms, how long the driver waits for Spark to report the stopped tasks' jobs as ended.
_JOB_END_SLACK_S = 10.0


@dataclass
class _Slot:
    """One container under the driver: its restart budget, where it last ran, how it ended."""

    container_id: str
    budget: RestartBudget
    place: TaskPlace | None = None
    starts: int = 0
    outcome: ContainerOutcome | None = None
    error: str | None = None
    thread: threading.Thread | None = field(default=None, repr=False)


def driver_host(conf: dict[str, str], master: str) -> str:
    """The address executors reach the driver's control server at (where Spark itself reaches it)."""
    if "spark.driver.host" in conf:
        return conf["spark.driver.host"]
    if master.startswith("local"):
        return "127.0.0.1"
    return socket.gethostbyname(socket.gethostname())


class SparkSupervisor:
    """Runs every container of a job as a long-running Spark task and restarts failed ones."""

    def __init__(
        self,
        job: JobConfig,
        until_caught_up: bool = False,
        spark: Spark | None = None,
        log_level: int = logging.INFO,
        install_stop: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        """`install_stop(stop)` wires the signals once the SparkContext exists (see `run`)."""
        self.job = job
        self._install_stop = install_stop
        self.until_caught_up = until_caught_up
        self._spark = spark
        self._log_level = log_level
        # `_stopping` ends the running job model's containers (a stop, a failure, a partition count
        # change); `_stop_requested` is a stop of the job, which a restart with a new job model must not undo.
        self._stopping = False
        self._stop_requested = False
        self._halt = threading.Event()
        self._secret = new_secret()
        self._slots: list[_Slot] = []
        self.control: ControlServer | None = None
        self.failed = False
        #: A container stopped on a configuration error: exit status 2, as under the local supervisor.
        self.config_error = False
        #: Spark's JVM exited under the job (every container went with it): reported once, by `run`.
        self.jvm_lost: SparkJvmLostError | None = None
        self.model: JobModel | None = None

    def stop(self) -> None:
        """Graceful stop of every container (signal-handler safe: only sets flags the driver loop reads)."""
        self._stop_requested = True
        self._stopping = True

    @property
    def slots(self) -> list[_Slot]:
        return list(self._slots)

    def run(self) -> int:
        """Runs until every container ended or a stop; returns an exit code (1: a container failed, or an
        input's partition count changed under a job with durable stores). On such a change a job without
        them is restarted with a new job model, on the same SparkContext and control server."""
        self.model = model = JobCoordinator(self.job).prepare()
        if self._stop_requested:
            log.info("job %s stopped before Spark started: no container was started", self.job.job_key)
            return 0
        master = self.job.spark_master or default_master(len(model.containers), self.job.spark_max_failures)
        conf = spark_conf(self.job)
        owned = self._spark is None
        spark = self._spark or Spark(f"samsa-{self.job.job_key}", master, conf)
        if self._install_stop is not None:
            # A new SparkContext puts in pyspark's own SIGINT handler, which cancels every Spark job and
            # raises KeyboardInterrupt: Samsa's go back in after it, so Ctrl-C stops as SIGTERM does.
            self._install_stop(self.stop)
        self.control = control = ControlServer(self._secret, host=driver_host(conf, master))
        control.start()
        try:
            # A stop during Spark's start (seconds) is acted on before each further step of it.
            if not self._stop_requested:
                spark.await_executors(1)
            if not self._stop_requested:
                spark.warm_up(min(len(model.containers), spark.slots()), uses_s3(self.job))
            if self._stop_requested:
                log.info("job %s stopped while Spark started: no container was started", self.job.job_key)
            while not self._stop_requested:
                changes = self._run_model(spark, model, master)
                if not changes or self._stop_requested or self.failed:
                    break
                if not restarts_on_change(self.job, changes):
                    self.failed = True
                    break
                next_model = self._next_model(control)
                if next_model is None:
                    break
                self.model = model = next_model
        finally:
            # Whatever ends the driver (an error too): no container is started or restarted any more.
            self._stopping = True
            self._halt.set()
            control.close()
            if owned:
                spark.stop()
        if self.jvm_lost is not None:
            log.error("job %s: %s", self.job.job_key, self.jvm_lost)
            return 1
        return 2 if self.config_error else 1 if self.failed else 0

    def _next_model(self, control: ControlServer) -> JobModel | None:
        """The new job model to restart with (published as at any start), its containers welcome on the
        control server again; None when the job was stopped meanwhile."""
        # Cleared before the stop request is read: a stop arriving after this still ends the next model.
        self._stopping = False
        self._halt.clear()
        if self._stop_requested:
            return None
        log.info("preparing job %s: checking its topics, publishing its job model", self.job.job_key)
        model = unless_stopped(JobCoordinator(self.job).prepare, lambda: self._stopping)
        if model is not None:
            control.resume()
        return model

    def _run_model(self, spark: Spark, model: JobModel, master: str) -> Changes:
        """Runs the model's containers until all ended, a stop, or an input's partition count differs from
        the model's: then the containers are stopped and the changed streams returned."""
        assert self.control is not None
        if spark.slots() < len(model.containers):
            log.warning(
                "Spark offers %d task slot(s) for %d containers: the others wait for a slot; give the "
                "cluster more cores or set deploy.spark.master",
                spark.slots(),
                len(model.containers),
            )
        # Each container of a new job model asks again for the executor it last ran on, as at a restart.
        places = {s.container_id: s.place for s in self._slots}
        self._slots = [
            _Slot(c.id, RestartBudget(self.job.spark_max_restarts), place=places.get(c.id))
            for c in model.containers
        ]
        for slot in self._slots:
            slot.thread = threading.Thread(
                target=self._supervise,
                args=(spark, slot),
                name=f"container-{slot.container_id}",
                daemon=True,
            )
            slot.thread.start()
        log.info(
            "job %s on Spark (%s): %d container(s), control channel %s:%d",
            self.job.job_key,
            master,
            len(self._slots),
            *self.control.address,
        )
        changes: Changes = {}
        with PartitionWatch(self.job, model) as watch:
            while not self._stopping and any(s.thread and s.thread.is_alive() for s in self._slots):
                changes = watch.changed()
                if changes:
                    break
                time.sleep(0.1)
        self._stop_all(spark)
        return changes

    def _launch(self, slot: _Slot) -> ContainerLaunch:
        assert self.control is not None and self.model is not None
        return ContainerLaunch(
            container_id=slot.container_id,
            config=dict(self.job.config.items()),
            model_json=self.model.to_json(),
            control_address=self.control.address,
            secret=self._secret,
            until_caught_up=self.until_caught_up,
            log_level=self._log_level,
            sys_path=[p for p in sys.path if p],
        )

    def _group(self, slot: _Slot) -> str:
        return f"samsa-{self.job.job_key}-container-{slot.container_id}"

    def _supervise(self, spark: Spark, slot: _Slot) -> None:
        """A driver thread: submits the container's Spark job, and again after a failure, until it ends."""
        while not self._stopping:
            preferred = [slot.place.location] if slot.place else []
            slot.starts += 1
            try:
                slot.outcome = spark.run_task(
                    self._group(slot),
                    f"Samsa container {slot.container_id} of job {self.job.job_key}",
                    run_container,
                    self._launch(slot),
                    preferred,
                )
                self._note_place(spark, slot)
                if not slot.outcome.lost_driver or self._stopping:
                    log.info("container %s ended (epoch %d)", slot.container_id, slot.outcome.epoch)
                    return
                # It stopped for want of word from this driver (stalled past the heartbeat timeout, or cut
                # off from its executor), not because it was done: it is started again, as after a failure.
                slot.error = (
                    f"it stopped after no word from the driver for {self.job.heartbeat_timeout_ms} ms "
                    "(deploy.spark.heartbeat.timeout.ms): the driver was stalled or cut off from its executor"
                )
            except SparkJvmLostError as e:
                # Every container went with the JVM, and nothing can be started through its gateway again.
                self.jvm_lost = self.jvm_lost or e
                self.failed = True
                self._stopping = True
                return
            except SparkError as e:
                self._note_place(spark, slot)
                slot.error = self._last_error(slot, e)
                unmendable = self._unmendable(slot)
                if unmendable is not None and not self._stopping:
                    # A restart would meet the same cause again (and a fenced one would fence the newer
                    # copy in turn): the job stops, as under the local supervisor.
                    log.error(
                        "container %s of job %s %s. Its error: %s",
                        slot.container_id,
                        self.job.job_key,
                        NO_RESTART[unmendable],
                        slot.error,
                    )
                    self.failed = True
                    self.config_error = self.config_error or unmendable == CONFIG_ERROR_EXIT
                    self._stopping = True
                    return
                if self._stopping:
                    assert self.control is not None
                    if self.control.refused_while_stopping(slot.container_id):
                        # Its task got a slot only once the job was stopping (fewer slots than containers):
                        # it never ran, so nothing was lost.
                        log.info("container %s not started: the job was stopping", slot.container_id)
                        return
                    # A failure while stopping may have cost the final commit: the job did not end cleanly.
                    log.error("container %s failed while stopping: %s", slot.container_id, slot.error)
                    self.failed = True
                    return
            delay = slot.budget.next_delay(time.monotonic())
            if delay is None:
                log.error(
                    "container %s failed %d times in %d s (deploy.spark.max.restarts=%d); stopping the job. "
                    "Its last error: %s",
                    slot.container_id,
                    slot.budget.recent(time.monotonic()) + 1,
                    int(RESTART_WINDOW_S),
                    self.job.spark_max_restarts,
                    slot.error,
                )
                self.failed = True
                self._stopping = True
                return
            log.warning(
                "container %s failed (%s); restarting it in %.1f s%s",
                slot.container_id,
                slot.error,
                delay,
                f" on {slot.place.location}" if slot.place else "",
            )
            self._halt.wait(delay)

    def _last_error(self, slot: _Slot, error: SparkError) -> str:
        """The container's own last words when it sent them (an exception), else Spark's (a crash)."""
        assert self.control is not None
        report = self.control.reports().get(slot.container_id)
        if report is not None and report.state == "failed" and report.detail:
            return report.detail
        return spark_reason(str(error)) or type(error).__name__

    def _unmendable(self, slot: _Slot) -> int | None:
        """The exit status its last attempt reported for a failure that a restart cannot mend, if any."""
        assert self.control is not None
        report = self.control.reports().get(slot.container_id)
        if report is None or report.state != "failed":
            return None
        return report.exit_status

    def _note_place(self, spark: Spark, slot: _Slot) -> None:
        """Remembers the executor the container's last attempt ran on, to ask for it at the next start."""
        assert self.control is not None
        report = self.control.reports().get(slot.container_id)
        if report is None or "task_attempt_id" not in report.info:
            return
        place = spark.place_of(int(report.info["stage_id"]), int(report.info["task_attempt_id"]))
        if place is not None and place != slot.place:
            log.info("container %s ran on executor %s (%s)", slot.container_id, place.executor_id, place.host)
            slot.place = place

    def _stop_all(self, spark: Spark) -> None:
        """STOP to every container, then waits (bounded) for their jobs to end; cancels the stragglers."""
        assert self.control is not None
        self._stopping = True
        self._halt.set()
        self.control.request_stop()
        deadline = time.monotonic() + self.job.shutdown_ms / 1000 + _JOB_END_SLACK_S
        for slot in self._slots:
            if slot.thread is not None:
                slot.thread.join(max(0.0, deadline - time.monotonic()))
        for slot in self._slots:
            if slot.thread is not None and slot.thread.is_alive():
                log.error(
                    "container %s did not stop within task.shutdown.ms=%d; cancelling its Spark job",
                    slot.container_id,
                    self.job.shutdown_ms,
                )
                spark.cancel(self._group(slot))
                self.failed = True
        for slot in self._slots:
            if slot.thread is not None:
                slot.thread.join(_JOB_END_SLACK_S)


# The Py4J wrapper line every failed Spark job's error starts with; the reason is on the lines after it.
_PY4J_CALL = re.compile(r"^An error occurred while calling \S+$")
_SPARK_EXCEPTION = re.compile(r"^:?\s*(?:org\.apache\.spark\.)?SparkException:\s*")
_REASON_CHARS = 400


def spark_reason(text: str) -> str:
    """The useful line of a Spark job's failure (`Job aborted due to stage failure: ... Lost executor ...`),
    not Py4J's wrapper line; shortened."""
    lines = [
        line.strip() for line in text.splitlines() if line.strip() and not _PY4J_CALL.match(line.strip())
    ]
    if not lines:
        return ""
    reason = _SPARK_EXCEPTION.sub("", lines[0].lstrip(": "))
    return reason if len(reason) <= _REASON_CHARS else reason[: _REASON_CHARS - 3] + "..."


def run_spark(
    job: JobConfig, until_caught_up: bool, install_stop: Callable[[Callable[[], None]], None]
) -> int:
    """`samsa run --deploy spark`: the driver in this process; `install_stop(stop)` wires the signals."""
    level = logging.getLogger().level or logging.INFO
    supervisor = SparkSupervisor(job, until_caught_up, log_level=level, install_stop=install_stop)
    install_stop(supervisor.stop)  # and again once Spark runs (pyspark replaces the SIGINT handler)
    try:
        return supervisor.run()
    except SparkError as e:
        log.error("%s", e)
        return 1
