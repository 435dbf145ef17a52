"""The Spark driver with fewer task slots than containers (a supported setup: "the others wait for a slot"):
a container whose task gets a slot only once the job stops is refused by the control server ("job
stopping") and never runs; that is no failure, neither at a stop nor at a restart with a new job model."""

from __future__ import annotations

import logging

import pytest
from background import Background, wait_for
from topic_growth import grow

from samsa.deploy.spark import Spark
from samsa.deploy.spark_supervisor import SparkSupervisor, spark_conf
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig

MONITOR_KEY = "job.coordinator.monitor-partition-change.frequency.ms"


def test_a_restart_on_a_partition_change_with_fewer_slots_than_containers_is_no_failure(
    broker_bootstrap, job_config, topics, caplog: pytest.LogCaptureFixture
):
    inp, out = topics(2), topics(1)
    config = job_config(
        f"kafka.{inp}",
        out,
        **{"job.container.count": "2", "task.commit.ms": "500", MONITOR_KEY: "500"},
    )
    job = JobConfig(Config(config))
    spark = Spark("samsa-test-one-slot", "local[1,1]", spark_conf(job))  # one slot, two containers
    try:
        supervisor = SparkSupervisor(job, spark=spark)
        with caplog.at_level(logging.INFO, "samsa.deploy"):
            run = Background(supervisor.run)
            try:
                wait_for(
                    lambda: (
                        supervisor.control is not None
                        and any(r.state == "running" for r in supervisor.control.reports().values())
                    ),
                    60,
                    "one running container",
                )
                grow(broker_bootstrap, inp, 3)
                # The reports are dropped at the restart: one running now is the new model's.
                wait_for(
                    lambda: (
                        not run.thread.is_alive()
                        or (
                            "restarting the job with a new job model" in caplog.text
                            and any(r.state == "running" for r in supervisor.control.reports().values())
                        )
                    ),
                    120,
                    "a container of the new model running, or the driver's end",
                )
                assert run.thread.is_alive(), "the driver ended instead of restarting the job"
            finally:
                supervisor.stop()
                run.join(90)
        assert "failed while stopping" not in caplog.text
        assert run.error is None and run.result == 0
    finally:
        spark.stop()


def test_a_stop_with_a_container_waiting_for_a_slot_is_no_failure(
    broker_bootstrap, job_config, topics, caplog
):
    """Same setup, a plain stop (SIGTERM's): the container waiting for a slot is refused, not failed."""
    import time

    inp, out = topics(2), topics(1)
    job = JobConfig(Config(job_config(f"kafka.{inp}", out, **{"job.container.count": "2"})))
    spark = Spark("samsa-test-one-slot-b", "local[1,1]", spark_conf(job))
    try:
        supervisor = SparkSupervisor(job, spark=spark)
        with caplog.at_level(logging.INFO, "samsa.deploy"):
            run = Background(supervisor.run)
            wait_for(
                lambda: (
                    supervisor.control is not None
                    and any(r.state == "running" for r in supervisor.control.reports().values())
                ),
                60,
                "one running container",
            )
            time.sleep(1)
            supervisor.stop()
            run.join(90)
        assert "failed while stopping" not in caplog.text
        assert run.error is None and run.result == 0
    finally:
        spark.stop()
