"""The local supervisor on the real broker: kill -9 of a container, graceful SIGTERM, log prefixes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from background import wait_for
from container_pids import container_pids

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config
from samsa.streams import SystemStreamPartition


def test_kill_9_of_a_container_is_restarted_and_no_input_is_lost(
    job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env
):
    inp, out = topics(4), topics(1)
    config = job_config(f"kafka.{inp}", out, **{"job.container.count": 2, "task.commit.ms": 500})
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    log = (tmp_path / "supervisor.log").open("w")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "run", str(job_file)],
        env=subprocess_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: len(container_pids(job)) == 2, 60, "two containers")
        produce(inp, [(str(i), str(i)) for i in range(400)])
        wait_for(lambda: len(read_topic(out)) >= 100, 60, "first outputs")
        victim_name, victim = sorted(container_pids(job).items())[0]
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: container_pids(job).get(victim_name, victim) != victim, 60, "the restarted container"
        )
        produce(inp, [(str(i), str(i)) for i in range(400, 600)])
        wait_for(
            lambda: {r[3] for r in read_topic(out)} >= {str(i).encode() for i in range(600)},
            90,
            "every input's output",
        )
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
        log.close()
    text = (tmp_path / "supervisor.log").read_text()
    assert "restarting" in text and "[container-0]" in text and "[container-1]" in text
    # Forked from the fork server, the restarted container too.
    assert text.count(", forked)") == 3, text
    # The graceful stop committed everything processed: every partition's checkpoint is at its end.
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    checkpoints = manager.read_last()
    committed = sum(o for cp in checkpoints.values() for o in cp.offsets.values())
    assert committed == 600
    assert not container_pids(job), "containers removed their pid files"


@pytest.mark.parametrize("fork_server", ["true", "false"])
def test_sigterm_stops_containers_gracefully_with_a_final_commit(
    job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env, fork_server: str
):
    inp, out = topics(1), topics(1)
    produce(inp, [(None, str(i)) for i in range(50)])
    # Only the final commit.
    settings = {"task.commit.ms": -1, "deploy.local.fork.server": fork_server}
    config = job_config(f"kafka.{inp}", out, **settings)
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.properties"
    job_file.write_text("\n".join(f"{k}={v}" for k, v in config.items()))
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "run", str(job_file)],
        env=subprocess_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: len(read_topic(out)) == 50, 60, "all outputs")
        supervisor.send_signal(signal.SIGINT)
        output, _ = supervisor.communicate(timeout=60)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    assert supervisor.returncode == 0, output
    assert "stopping gracefully" in output
    assert (", forked)" if fork_server == "true" else ", fresh interpreter)") in output, output
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    assert manager.read_last()["Partition 0"].offsets == {SystemStreamPartition("kafka", inp, 0): 50}
