"""A record the job cannot take under the `fail` bad-message policy stops the job: every restart would meet
it again, so the supervisor does not restart the container with backoff. A transient failure still is."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from adjunct_jobs import enrich_job
from confluent_kafka import KafkaError, KafkaException

from samsa.deploy.local import LocalSupervisor, _Child
from samsa.deploy.restarts import BAD_RECORD_EXIT, NO_RESTART, RestartBudget, unmendable_exit
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.exceptions import MessageDeserializationError, TaskError, UserCodeError
from samsa.serde.exceptions import SchemaRegistryError


def test_a_bad_cdc_record_under_the_fail_policy_stops_the_job_without_restarts(
    job_config: Any, topics: Any, produce: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    good = json.dumps({"before": None, "after": {"id": 1, "name": "c1"}, "op": "c", "ts_ms": 1})
    produce(customers, [(json.dumps({"id": 1}), good), (json.dumps({"id": 2}), "{not json")])
    produce(orders, [("1", "o1")])
    # Two restarts at most: the old behaviour (restarting with backoff) ends within seconds too.
    config = enrich_job(job_config, orders, customers, out, **{"deploy.local.max.restarts": "2"})
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", "--until-caught-up", str(job_file)],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = run.stdout + run.stderr
    assert run.returncode == 1, text
    assert "restarting in" not in text, "the container was restarted"
    assert text.count(f"topic {customers} partition 0 offset 1") == 1, text
    assert "stopped on an input record it cannot take" in text
    assert "Set task.deserialization.error.policy to skip or dlq" in text
    assert time.monotonic() - started < 60


def test_the_local_supervisor_ends_the_job_on_a_bad_record_exit(caplog: Any) -> None:
    job = JobConfig(
        Config(
            {
                "job.name": "bad",
                "task.class": "samsa.runtime.task:StreamTask",
                "task.inputs": "kafka.in",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "localhost:9092",
            }
        )
    )
    supervisor = LocalSupervisor(job, [])
    child = _Child("0", RestartBudget(10), process=_Exited(BAD_RECORD_EXIT))  # type: ignore[arg-type]
    supervisor._watch(child, 100.0)
    assert child.done and child.rc == BAD_RECORD_EXIT and child.restart_at is None
    assert supervisor.failed and supervisor._stopping and not supervisor.config_error
    assert "set task.deserialization.error.policy to skip or dlq" in caplog.text.lower()
    assert "restarting" not in caplog.text


def test_only_a_bad_record_failure_is_classified_so_not_a_transient_one() -> None:
    bad = MessageDeserializationError("topic t partition 0 offset 5 (system kafka): cannot deserialize")
    assert unmendable_exit(bad) == BAD_RECORD_EXIT
    # As a container reports it from deep inside a commit or a task: the cause chain counts.
    try:
        raise TaskError("task Partition 0 failed") from bad
    except TaskError as wrapped:
        assert unmendable_exit(wrapped) == BAD_RECORD_EXIT
    # The Spark driver looks the reported status up: it must know it.
    assert BAD_RECORD_EXIT in NO_RESTART
    # A schema registry that is down is not a bad record: the container re-raises it as it is...
    outage = SchemaRegistryError("schema registry http://registry:8081 unreachable")
    with pytest.raises(SchemaRegistryError) as raised:
        Container.on_bad_message(None, None, None, "message", outage)  # type: ignore[arg-type]
    assert raised.value is outage
    # ...and neither it nor a broker error nor a failing process() ends the job without restarts.
    assert unmendable_exit(outage) is None
    assert unmendable_exit(KafkaException(KafkaError(KafkaError._TRANSPORT))) is None
    assert unmendable_exit(UserCodeError("task Partition 0: process() failed")) is None


class _Exited:
    def __init__(self, rc: int) -> None:
        self.rc = rc

    def poll(self) -> int:
        return self.rc
