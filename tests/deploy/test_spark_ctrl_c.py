"""Ctrl-C on `samsa run --deploy spark` stops as SIGTERM does: STOP to every container, final commits, a
clean exit (pyspark's own SIGINT handler would cancel the Spark jobs and raise KeyboardInterrupt). So does a
SIGTERM to the driver's whole process group (`kill -- -PGID`), which must not reach Spark's JVM: its
shutdown hook would stop the SparkContext and kill the containers before their final commit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from background import wait_for
from count_job import WORDS, count_job

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.deploy.control import ControlServer, new_secret
from samsa.kafka import KafkaConsumer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config


def test_the_control_servers_address_is_still_known_after_it_closed() -> None:
    server = ControlServer(new_secret())
    server.start()
    address = server.address
    server.close()
    assert server.address == address  # a driver thread reading it while the driver stops does not fail


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm-to-group"])
def test_ctrl_c_on_the_spark_driver_stops_every_container_with_a_final_commit(
    signum, job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env, kafka_bootstrap
):
    words, out = topics(2), topics(1)
    config = count_job(job_config, words, out, **{"job.container.count": "2", "task.commit.ms": "60000"})
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    produce(words, [(WORDS[(i * 7) % len(WORDS)], "1") for i in range(200)])
    log_path = tmp_path / "driver.log"
    with log_path.open("w") as log:
        # Its own process group, signalled whole: what a terminal's Ctrl-C does, or `kill -- -PGID`.
        driver = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli", "run", "--deploy", "spark", str(job_file)],
            env=subprocess_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for(lambda: log_path.read_text().count("running tasks") >= 2, 120, "two containers")
            wait_for(lambda: len(read_topic(out)) == 200, 60, "every word counted")
            os.killpg(driver.pid, signum)
            assert driver.wait(timeout=90) == 0
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    text = log_path.read_text()
    assert f"received {signal.Signals(signum).name}; stopping gracefully" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert "restarting it" not in text and "failed while stopping" not in text
    # task.commit.ms is a minute: only the stop's own commit can have checkpointed the inputs' ends.
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    checkpointed = {
        (s.stream, s.partition): o for cp in manager.read_last().values() for s, o in cp.offsets.items()
    }
    with KafkaConsumer({"bootstrap.servers": kafka_bootstrap}) as consumer:
        ends = {(words, p): consumer.watermarks((words, p))[1] for p in range(2)}
    assert checkpointed == ends
