"""A local job whose container 0 is started again on another host: the supervisor's copy is fenced, and
the supervisor ends the job instead of restarting it (which would fence the other copy in turn)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from background import Background, wait_for

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.deploy.restarts import FENCED_EXIT
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container, pid_dir
from samsa.runtime.coordinator import JobCoordinator, client_config


def test_a_supervised_container_fenced_from_another_host_ends_the_job(
    job_config, topics, produce, tmp_path: Path, subprocess_env
):
    inp, out = topics(2), topics(1)
    config = job_config(f"kafka.{inp}", out, **{"task.commit.ms": "100"})
    produce(inp, [(str(i), str(i)) for i in range(50)])
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    here = JobConfig(Config(config))
    log_path = tmp_path / "supervisor.log"
    with log_path.open("w") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli", "run", str(job_file)],
            env=subprocess_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        newer = None
        try:
            wait_for(lambda: (pid_dir(here) / "container-0.pid").exists(), 60, "the supervised container")
            manager = KafkaCheckpointManager(
                checkpoint_topic(here.name, here.id), client_config(here, "kafka")
            )
            wait_for(lambda: manager.read_last() != {}, 60, "its first checkpoint")

            elsewhere = {**config, "job.logged.store.base.dir": str(tmp_path / "host-b")}
            elsewhere["job.non-logged.store.base.dir"] = elsewhere["job.logged.store.base.dir"]
            other = JobConfig(Config(elsewhere))
            newer = Container(other, JobCoordinator(other).read_model().container("0"))  # type: ignore[union-attr]
            run_newer = Background(newer.run)
            assert supervisor.wait(timeout=60) == 1
        finally:
            if supervisor.poll() is None:
                supervisor.kill()
            if newer is not None:
                newer.stop()
    run_newer.join(30)
    assert run_newer.error is None, repr(run_newer.error)
    text = log_path.read_text()
    assert "[container-0] " in text
    assert f"is fenced: a newer start of it took over (epoch {newer.epoch} on host" in text
    assert f"container 0 of job {here.job_key} was fenced by a newer start of it" in text
    assert f"exited with {FENCED_EXIT}; restarting" not in text
    assert "started container 0" in text and text.count("started container 0") == 1
