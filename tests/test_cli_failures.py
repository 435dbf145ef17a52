"""The `samsa` command fails with a message, not a traceback: a broken task module or job file, a closed
pipe."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.cli import main
from samsa.deploy.restarts import CONFIG_ERROR_EXIT
from samsa.runtime.classpath import load_object
from samsa.runtime.exceptions import ConfigError, UserCodeError
from samsa.runtime.task_instance import new_task
from samsa.runtime.user_errors import explain


@pytest.fixture(autouse=True)
def _default_signal_handlers() -> Iterator[None]:
    # `samsa run` installs its stop handlers in this process: put pytest's back.
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    name = f"broken_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _job(tmp_path: Path, task_class: str, **extra: str) -> Path:
    job = tmp_path / "job.yaml"
    config = {
        **extra,
        "job.name": "broken",
        "task.class": task_class,
        "task.inputs": "kafka.amounts",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "127.0.0.1:1",  # never reached: the task fails to load first
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "job.non-logged.store.base.dir": str(tmp_path / "state"),
    }
    job.write_text(json.dumps(config))
    return job


def test_a_task_module_with_a_syntax_error_names_its_file_and_line(tmp_path, monkeypatch) -> None:
    name = _module(tmp_path, monkeypatch, "class T:\n    def process(self)\n        pass\n")
    with pytest.raises(ConfigError) as failed:
        load_object(f"{name}:T", "task.class")
    message = str(failed.value)
    assert f"task.class='{name}:T'" in message
    assert f"{tmp_path / name}.py:2: SyntaxError" in message


def test_a_task_module_failing_at_import_names_the_line(tmp_path, monkeypatch) -> None:
    name = _module(tmp_path, monkeypatch, "import os\n\nVALUE = undefined_name\n")
    with pytest.raises(ConfigError, match=rf"{name}\.py:3: NameError\("):
        load_object(f"{name}.T", "task.class")


def test_run_of_a_broken_task_module_is_an_error_message(tmp_path, monkeypatch, caplog, capsys) -> None:
    name = _module(tmp_path, monkeypatch, "def broken(:\n")
    job = _job(tmp_path, f"{name}:T")
    assert main(["run", str(job)]) == 2
    assert "SyntaxError" in caplog.text and f"{name}.py:1" in caplog.text
    assert "Traceback" not in caplog.text + capsys.readouterr().err
    # A single container stopped by a config error exits with the status its supervisor does not restart.
    assert main(["run", "--container-id", "0", str(job)]) == CONFIG_ERROR_EXIT


def test_a_task_constructor_needing_arguments_is_a_config_error(tmp_path, monkeypatch, caplog) -> None:
    source = "from samsa import StreamTask\n\nclass NeedsArgs(StreamTask):\n    def __init__(self, x): ...\n"
    name = _module(tmp_path, monkeypatch, source)
    job = _job(tmp_path, f"{name}:NeedsArgs")
    assert main(["run", str(job)]) == 2
    assert f"task.class='{name}:NeedsArgs': NeedsArgs(x) cannot be called without arguments" in caplog.text
    assert f"{tmp_path / name}.py:4" in caplog.text and "Traceback" not in caplog.text
    # A restart cannot mend it: a single container exits with the status its supervisor does not restart.
    assert main(["run", "--container-id", "0", str(job)]) == CONFIG_ERROR_EXIT


def test_a_task_constructor_that_raises_is_the_users_code_failing_with_its_traceback(
    tmp_path, monkeypatch
) -> None:
    source = (
        "from samsa import StreamTask\n\nclass Raises(StreamTask):\n"
        "    def __init__(self):\n        raise ValueError('no settings file')\n\n"
        "    def process(self, envelope, collector, coordinator): ...\n"
    )
    name = _module(tmp_path, monkeypatch, source)
    task_class = load_object(f"{name}:Raises", "task.class")
    with pytest.raises(UserCodeError) as failed:
        new_task(task_class, f"{name}:Raises")
    told = explain(failed.value)
    assert told.startswith(f"task.class='{name}:Raises': Raises() failed: ValueError('no settings file')")
    assert f'File "{tmp_path / name}.py", line 5, in __init__' in told and "Traceback" in told


def test_a_bad_container_rocksdb_key_fails_the_start_naming_it(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent / "support"))
    key = "job.container.rocksdb.block.cache.size.bytes"
    job = _job(tmp_path, "samsa_test_tasks:EchoTask", **{key: "-5"})
    assert main(["run", str(job)]) == 2
    assert f"{key}: must be >= 1, got -5" in caplog.text
    assert "started container" not in caplog.text


def test_a_job_file_that_is_not_utf8_is_named(tmp_path, caplog) -> None:
    job = tmp_path / "job.yaml"
    job.write_bytes("job.name: caf\u00e9\n".encode("latin-1"))
    assert main(["checkpoint", "show", str(job)]) == 2
    assert f"job config file {job} is not UTF-8 text (byte 13" in caplog.text


def test_output_into_a_closed_pipe_ends_without_a_traceback(tmp_path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone, as after `| head -1`
    try:
        done = subprocess.run(
            [sys.executable, "-m", "samsa.cli", "config", "keys"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 1
