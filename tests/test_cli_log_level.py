"""`--log-level`: one of DEBUG, INFO, WARNING (or WARN), ERROR in any case, before or after the subcommand."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from samsa.cli import _parser, main


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["config", "keys"], "INFO"),
        (["--log-level", "debug", "config", "keys"], "DEBUG"),
        (["config", "keys", "--log-level", "Warning"], "WARNING"),
        (["config", "--log-level", "error", "keys"], "ERROR"),
        (["run", "--log-level", "DEBUG", "job.yaml"], "DEBUG"),
        (["--log-level", "ERROR", "checkpoint", "show", "job.yaml"], "ERROR"),
        (["--log-level", "ERROR", "run", "--log-level", "debug", "job.yaml"], "DEBUG"),  # the last one wins
        # log4j's spelling, as a Samza user writes it.
        (["--log-level", "WARN", "config", "keys"], "WARNING"),
        (["run", "--log-level", "warn", "job.yaml"], "WARNING"),
    ],
)
def test_the_log_level_is_taken_before_or_after_the_subcommand(argv: list[str], level: str) -> None:
    assert _parser().parse_args(argv).log_level == level


@pytest.mark.parametrize(
    "argv", [["--log-level", "VERBOSE", "config", "keys"], ["config", "keys", "--log-level", "5"]]
)
def test_an_unknown_log_level_is_refused_naming_the_choices(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --log-level: invalid choice" in err and "'DEBUG', 'INFO', 'WARNING', 'ERROR'" in err


def test_the_help_names_warn_as_a_spelling_of_warning(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "WARNING (or WARN)" in " ".join(capsys.readouterr().out.split())


def test_the_local_supervisor_passes_the_log_level_to_its_containers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        json.dumps(
            {
                "job.name": "levels",
                "task.class": "samsa.runtime.task:StreamTask",
                "task.inputs": "kafka.words",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "127.0.0.1:1",
            }
        )
    )
    passed: list[str] = []

    class Supervisor:
        def __init__(self, job: Any, container_args: list[str]) -> None:
            passed.extend(container_args)

        def stop(self) -> None: ...

        def run(self) -> int:
            return 0

    monkeypatch.setattr("samsa.deploy.local.LocalSupervisor", Supervisor)
    monkeypatch.setattr("samsa.deploy.local.install_stop_handlers", lambda stop: None)
    root = logging.getLogger()
    level = root.level
    try:
        assert main(["run", str(job), "--log-level", "debug"]) == 0
    finally:
        root.setLevel(level)
    assert "--log-level=DEBUG" in passed
