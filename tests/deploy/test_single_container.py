"""`samsa run --container-id N`: one container for an outside orchestrator, each with its own tasks."""

from __future__ import annotations

import json
import signal

from samsa.cli import main


def test_each_container_id_runs_only_its_tasks(job_config, topics, produce, read_topic, tmp_path):
    inp, out = topics(4), topics(1)
    for p in range(4):
        produce(inp, [(None, f"{p}-{i}") for i in range(5)], partition=p)
    config = job_config(f"kafka.{inp}", out, **{"job.container.count": 2})
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    try:
        assert main(["run", "--container-id", "1", "--until-caught-up", str(job_file)]) == 0
        partitions = {int(r[2].split(b":")[0]) for r in read_topic(out)}
        assert partitions == {1, 3}, "container 1 runs Partition 1 and Partition 3 only"
        assert main(["run", "--container-id", "0", "--until-caught-up", str(job_file)]) == 0
        assert len(read_topic(out)) == 20
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_an_unknown_container_id_is_named(job_config, topics, tmp_path, caplog):
    config = job_config(f"kafka.{topics(2)}", "unused", **{"job.container.count": 2})
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    assert main(["run", "--container-id", "7", str(job_file)]) == 2
    assert "container '7' is not in the job model" in caplog.text
