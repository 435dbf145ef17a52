"""A container task under the driver's control server, outside Spark: stop, lost driver, fenced zombie."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from background import Background, wait_for

from samsa.checkpoint.exceptions import CheckpointFencedError
from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.deploy.control import ControlServer, new_secret
from samsa.deploy.spark_task import ContainerLaunch, run_container
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator, client_config


@pytest.fixture
def driver():
    secret = new_secret()
    server = ControlServer(secret)
    server.start()
    yield server, secret
    server.close()


def _launch(config: dict[str, str], server: ControlServer, secret: str) -> ContainerLaunch:
    model = JobCoordinator(JobConfig(Config(config))).prepare()
    return ContainerLaunch("0", config, model.to_json(), server.address, secret, heartbeat_interval_s=0.05)


def _committed(config: dict[str, str]) -> int:
    job = JobConfig(Config(config))
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    return sum(o for cp in manager.read_last().values() for o in cp.offsets.values())


def _running(server: ControlServer, epoch: int = 1) -> Callable[[], bool]:
    def check() -> bool:
        report = server.reports().get("0")
        return report is not None and report.epoch == epoch and report.state == "running"

    return check


@pytest.fixture
def echo(job_config, topics, produce) -> dict[str, str]:
    inp = topics(2)
    config = job_config(f"kafka.{inp}", topics(1), **{"task.commit.ms": "600000"})
    produce(inp, [(str(i), str(i)) for i in range(50)])
    return config


def test_stop_from_the_driver_ends_the_container_with_a_final_commit(driver, echo):
    server, secret = driver
    task = Background(run_container, _launch(echo, server, secret))
    wait_for(_running(server), 30, "running")
    server.request_stop()
    task.thread.join(30)
    assert task.error is None and task.result is not None
    assert task.result.epoch == 1
    assert server.reports()["0"].state == "stopped"
    assert _committed(echo) == 50


def test_a_container_that_loses_the_driver_stops_itself_and_commits(driver, echo):
    server, secret = driver
    config = {**echo, "deploy.spark.heartbeat.timeout.ms": "1000"}
    task = Background(run_container, _launch(config, server, secret))
    wait_for(_running(server), 30, "running")
    server.close()  # the driver is gone
    task.thread.join(15)
    assert not task.thread.is_alive(), "an orphan container kept running"
    assert task.error is None
    assert _committed(config) == 50


def test_an_older_epoch_is_fenced_by_the_driver_and_stops_without_committing(driver, echo):
    server, secret = driver
    zombie = Background(run_container, _launch(echo, server, secret))
    wait_for(_running(server), 30, "epoch 1 running")
    newer = Background(run_container, _launch(echo, server, secret))
    zombie.thread.join(30)
    assert isinstance(zombie.error, CheckpointFencedError), repr(zombie.error)
    wait_for(_running(server, epoch=2), 30, "epoch 2 running")
    server.request_stop()
    newer.thread.join(30)
    assert newer.error is None and newer.result is not None and newer.result.epoch == 2
    assert _committed(echo) == 50
