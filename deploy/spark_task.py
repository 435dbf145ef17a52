"""A container as the one long-running task of a Spark job: runs where Spark placed it, under the driver."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from samsa.deploy.control import ControlClient
from samsa.deploy.restarts import unmendable_exit
from samsa.deploy.spark import current_attempt
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.job_model import JobModel
from samsa.runtime.state import early_s3_client

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContainerLaunch:
    """What the driver ships to the task (pickled into the Spark job): enough to run one container."""

    container_id: str
    config: dict[str, str]
    model_json: bytes
    control_address: tuple[str, int]
    secret: str
    until_caught_up: bool = False
    log_level: int = logging.INFO
    #: Extra import paths of the driver (where the job's task class lives), for executors of this host.
    sys_path: list[str] = field(default_factory=list)
    heartbeat_interval_s: float = 0.25


@dataclass(frozen=True)
class ContainerOutcome:
    """What the task returns to the driver when the container ended without an error."""

    container_id: str
    epoch: int
    caught_up: bool
    #: It stopped because it heard nothing from the driver for deploy.spark.heartbeat.timeout.ms: a driver
    #: that runs on (it was stalled, or cut off from this executor) starts it again.
    lost_driver: bool = False


def run_container(launch: ContainerLaunch) -> ContainerOutcome:
    """Runs the container until the driver says STOP, the driver is lost, or it is caught up; raises (and
    so fails the Spark task) when the container fails."""
    for path in launch.sys_path:
        if path not in sys.path:
            sys.path.append(path)
    _log_to_stderr(launch.container_id, launch.log_level)
    # Ctrl-C in the driver's terminal reaches this worker too; the driver stops containers itself, in order.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    job = JobConfig(Config(launch.config))
    attempt = current_attempt()
    info: dict[str, Any] = {}
    if attempt is not None:
        info = {
            "stage_id": attempt.stage_id,
            "task_attempt_id": attempt.task_attempt_id,
            "attempt": attempt.attempt_number,
        }
    client = ControlClient(
        launch.control_address,
        launch.secret,
        launch.container_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        info=info,
        interval_s=launch.heartbeat_interval_s,
        timeout_s=job.heartbeat_timeout_ms / 1000,
    )
    # Made while the driver is reached and the container starts: off the restore's path (see Container).
    s3_client = early_s3_client(job)
    lost = threading.Event()
    try:
        epoch = client.connect(timeout_s=job.heartbeat_timeout_ms / 1000)
        model = JobModel.from_json(launch.model_json).container(launch.container_id)
        container = Container(
            job, model, until_caught_up=launch.until_caught_up, epoch=epoch, s3_client=s3_client
        )

        def on_stop(reason: str) -> None:
            if reason == "fenced":
                log.error(
                    "container %s epoch %d: a newer start exists; stopping without a commit", model.id, epoch
                )
                container.fence("the driver started this container again (newer epoch)")
            elif reason == "lost":
                lost.set()
                log.error(
                    "container %s: no word from the driver for %d ms (deploy.spark.heartbeat.timeout.ms); "
                    "stopping so that no orphan keeps consuming",
                    model.id,
                    job.heartbeat_timeout_ms,
                )
                container.stop()
            else:
                log.info("container %s: the driver asked it to stop", model.id)
                container.stop()

        client.start(container.status, on_stop)
        log.info("container %s started as epoch %d (Spark attempt %s)", model.id, epoch, info or "-")
        caught_up = container.run()
    except BaseException as e:
        client.close("failed", f"{type(e).__name__}: {e}", unmendable_exit(e))
        raise
    finally:
        if s3_client is not None:
            s3_client.discard()  # nothing once the container's restore took it
        if main:
            signal.signal(signal.SIGINT, previous)
    client.close("stopped")
    return ContainerOutcome(launch.container_id, epoch, caught_up, lost.is_set())


def _log_to_stderr(container_id: str, level: int) -> None:
    """The worker's stderr is the executor's log (the driver's console in local mode): prefix each line."""
    root = logging.getLogger()
    marker = "samsa-container-handler"
    for handler in list(root.handlers):
        if getattr(handler, "name", None) == marker:
            root.removeHandler(handler)  # a reused Python worker ran another container before
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(marker)
    handler.setFormatter(
        logging.Formatter(f"[container-{container_id}] %(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    root.setLevel(level)
