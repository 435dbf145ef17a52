"""A new job model takes tasks over from the containers of the old one, wherever they run: a start that
moves tasks (e.g. `samsa run --container-id 0` with a smaller `job.container.count`, from an outside
orchestrator) fences the containers that ran them; a start refused as already running changes nothing."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import systems_fixtures
from background import Background, wait_for

from samsa.checkpoint.exceptions import CheckpointFencedError
from samsa.cli import main
from samsa.deploy.restarts import ALREADY_RUNNING_EXIT, CONFIG_ERROR_EXIT
from samsa.kafka.inmemory import is_in_process
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.job_model import build_job_model
from samsa.runtime.takeover import fence_replaced, moved_containers

# Every test here runs on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin


@pytest.fixture(autouse=True)
def _default_signal_handlers() -> Iterator[None]:
    # `samsa run` installs its stop handlers in this process: put pytest's back.
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_start_moving_tasks_fences_the_old_models_container_that_ran_them(job_config, topics, produce):
    words, out = topics(4), topics(1)
    two = job_config(f"kafka.{words}", out, **{"job.container.count": "2"})
    old = JobConfig(Config(two))
    old_model = JobCoordinator(old).prepare()
    assert [t.name for t in old_model.container("1").tasks] == ["Partition 1", "Partition 3"]
    running = Container(old, old_model.container("1"))
    run = Background(running.run)
    try:
        wait_for(lambda: running.status()[0] == "running", 30, "container 1 of the old model running")
        new = JobConfig(Config({**two, "job.container.count": "1"}))
        started = time.monotonic()
        new_model = JobCoordinator(new).prepare()  # publishes the one-container model: a takeover
        assert moved_containers(old_model, new_model) == ["0", "1"]
        run.join(30)
        assert not run.thread.is_alive(), "the old model's container 1 still runs beside the new model"
        assert time.monotonic() - started < 15
    finally:
        running.stop()
        run.join(30)
    assert isinstance(run.error, CheckpointFencedError), repr(run.error)
    assert "the job model changed" in str(run.error)


def test_a_start_refused_as_already_running_publishes_nothing(job_config, topics, tmp_path: Path):
    words, other, out = topics(2), topics(2), topics(1)
    config = job_config(f"kafka.{words}", out)
    job = JobConfig(Config(config))
    model = JobCoordinator(job).prepare()
    running = Container(job, model.container("0"))
    assert running.start() is not None
    try:
        job_file = tmp_path / "job.yaml"
        job_file.write_text(json.dumps(config))
        status = main(
            [
                "run",
                "--container-id",
                "0",
                "--config",
                f"task.inputs=kafka.{words},kafka.{other}",
                str(job_file),
            ]
        )
        # An in-process in-memory broker is refused by `samsa run` before the lock is looked at (its
        # containers would each get an empty broker of their own): a refusal all the same.
        assert status == (
            CONFIG_ERROR_EXIT
            if is_in_process(config["systems.kafka.bootstrap.servers"])
            else ALREADY_RUNNING_EXIT
        )
        # The running job's model is untouched: its supervisor would restart containers with it.
        assert JobCoordinator(job).read_model() == model
    finally:
        running.crash()


def test_a_container_already_running_its_tasks_of_the_new_model_is_not_fenced(job_config, topics):
    # Two starters of the new model race (an orchestrator starts every container at once): one takeover
    # must not fence the container another start of the new model already runs.
    words, out = topics(4), topics(1)
    two = job_config(f"kafka.{words}", out, **{"job.container.count": "2"})
    old_model = JobCoordinator(JobConfig(Config(two))).prepare()
    new = JobConfig(Config({**two, "job.container.count": "1"}))
    coordinator = JobCoordinator(new)
    new_model = build_job_model(coordinator.partition_counts(), 1, new.broadcast)
    live = Container(new, new_model.container("0"))
    run = Background(live.run)
    try:
        wait_for(lambda: live.status()[0] == "running", 30, "container 0 of the new model running")
        assert fence_replaced(new, old_model, new_model) == ["1"]  # 0 runs its new tasks already
        time.sleep(0.5)
        assert run.thread.is_alive() and run.error is None, repr(run.error)
    finally:
        live.stop()
        run.join(30)
    assert run.error is None, repr(run.error)


def test_listing_broadcast_partitions_in_another_order_changes_no_model(job_config, topics):
    words, ref, out = topics(2), topics(2), topics(1)
    first = job_config(f"kafka.{words}", out, **{"task.broadcast.inputs": f"kafka.{ref}#0,kafka.{ref}#1"})
    model = JobCoordinator(JobConfig(Config(first))).prepare()
    swapped = JobConfig(Config({**first, "task.broadcast.inputs": f"kafka.{ref}#1,kafka.{ref}#0"}))
    started = time.monotonic()
    assert JobCoordinator(swapped).prepare() == model
    assert time.monotonic() - started < 0.9  # no takeover (its wait is a second)
