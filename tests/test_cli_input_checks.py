"""`samsa` refuses bad command-line input and job files with a message and exit 2, before it touches the
job: a container id that is no number, a job file it cannot read or that is a directory, a job.name that
would put its lock files outside the state dir."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.cli import main


@pytest.fixture(autouse=True)
def _default_signal_handlers() -> Iterator[None]:
    # `samsa run` may install its stop handlers in this process: put pytest's back.
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _job(path: Path, state: Path, **extra: str) -> Path:
    config = {
        "job.name": "checks",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.checks-in",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "127.0.0.1:1",  # never reached: each case fails before
        "job.logged.store.base.dir": str(state),
        "job.non-logged.store.base.dir": str(state),
        **extra,
    }
    path.write_text(json.dumps(config))
    return path


def test_a_container_id_that_is_no_number_is_refused_before_the_job_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job(tmp_path / "job.yaml", tmp_path / "state")
    with pytest.raises(SystemExit) as exited:
        main(["run", "--container-id", "abc", str(job)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --container-id: 'abc' is not a container id, which is a number" in err
    assert not (tmp_path / "state").exists()  # no lock taken, nothing published


def test_a_directory_as_job_file_is_named_a_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "dirjob.yaml").mkdir()
    assert main(["run", str(tmp_path / "dirjob.yaml")]) == 2
    assert f"job config file {tmp_path / 'dirjob.yaml'} is a directory" in caplog.text
    assert "Traceback" not in caplog.text


def test_a_job_name_escaping_the_state_dir_is_refused_before_any_lock_is_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "a" / "b" / "c" / "state"
    job = _job(tmp_path / "job.yaml", state, **{"job.name": "../../../escaped"})
    assert main(["run", "--until-caught-up", str(job)]) == 2
    assert "job.name='../../../escaped' may hold only ASCII letters, digits, '.', '_' and '-'" in caplog.text
    assert not list(tmp_path.rglob("*.lock")) and not list(tmp_path.rglob("escaped*"))
