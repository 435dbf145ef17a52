"""`samsa run` refuses a system on an in-process in-memory broker, which no container process would share."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from samsa.cli import main
from samsa.deploy.restarts import CONFIG_ERROR_EXIT


def _job(tmp_path: Path, **extra: str) -> Path:
    job = tmp_path / "job.yaml"
    config = {
        "job.name": "im",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.words",
        "systems.kafka.samza.factory": "inmemory",
        **extra,
    }
    job.write_text(json.dumps(config))
    return job


@pytest.fixture
def supervisor(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A local supervisor that starts nothing: the containers it was given."""
    started: list[str] = []

    class Supervisor:
        def __init__(self, job: Any, container_args: list[str]) -> None:
            started.append(job.name)

        def stop(self) -> None: ...

        def run(self) -> int:
            return 0

    monkeypatch.setattr("samsa.deploy.local.LocalSupervisor", Supervisor)
    monkeypatch.setattr("samsa.deploy.local.install_stop_handlers", lambda stop: None)
    return started


@pytest.fixture(autouse=True)
def _keep_root_level() -> Any:
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({}, "systems.kafka.samza.factory=inmemory (its bootstrap.servers defaults to inmemory://kafka)"),
        (
            {"systems.kafka.bootstrap.servers": "inmemory://shared"},
            "systems.kafka.bootstrap.servers=inmemory://shared",
        ),
    ],
)
@pytest.mark.parametrize(("mode", "status"), [([], 2), (["--container-id", "0"], CONFIG_ERROR_EXIT)])
def test_an_in_process_in_memory_system_is_refused_naming_the_key_and_the_file_backed_form(
    tmp_path: Path,
    supervisor: list[str],
    caplog: pytest.LogCaptureFixture,
    extra: dict[str, str],
    key: str,
    mode: list[str],
    status: int,
) -> None:
    assert main(["run", str(_job(tmp_path, **extra)), *mode]) == status
    assert supervisor == []
    assert key in caplog.text
    assert "inmemory:///ABS/DIR" in caplog.text
    assert "kafka-topics" not in caplog.text


def test_a_file_backed_in_memory_system_is_run(tmp_path: Path, supervisor: list[str]) -> None:
    shared = tmp_path / "broker"
    job = _job(tmp_path, **{"systems.kafka.bootstrap.servers": f"inmemory://{shared}"})
    assert main(["run", str(job)]) == 0
    assert supervisor == ["im"]
