"""sys.exit() (SystemExit) or KeyboardInterrupt raised by a task's own code is a crash like any other error of
it (restarted, its traceback shown), not the container finishing; a real Ctrl-C still stops gracefully."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bare_task_instances import bare_task_instance

from samsa import StreamTask
from samsa.cli import main
from samsa.deploy.local import install_stop_handlers
from samsa.runtime.exceptions import UserCodeError
from samsa.runtime.task_instance import TaskInstance, new_task
from samsa.runtime.user_errors import explain
from samsa.streams import SystemStreamPartition
from samsa.testing import TestRunner


@pytest.fixture(autouse=True)
def _default_signal_handlers() -> Iterator[None]:
    # `samsa run` (and these tests) install stop handlers in this process: put pytest's back.
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


EXITS = {"left": 0}


class ExitsOnB(StreamTask):
    """Sums the values in store `sums`; the value "b" calls sys.exit(0) (a library doing so) while told to."""

    def init(self, context: Any) -> None:
        self.sums = context.store("sums")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.value == "b" and EXITS["left"] > 0:
            EXITS["left"] -= 1
            sys.exit(0)
        self.sums.put("n", (self.sums.get("n") or 0) + 1)


class Interrupts(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        raise KeyboardInterrupt


def test_sys_exit_in_process_fails_the_task_and_the_message_is_processed_after_a_restart(
    tmp_path: Path,
) -> None:
    EXITS["left"] = 1
    with TestRunner.of(ExitsOnB, state_dir=tmp_path) as runner:
        runner.add_store("sums").add_input("in", ["a", "b", "c"])
        with pytest.raises(UserCodeError) as failed:
            runner.run(timeout=10)
        message = str(failed.value)
        assert message.startswith("task Partition 0: process() failed on in#0@1: SystemExit(0); the message")
        told = explain(failed.value)
        assert __file__ in told and "sys.exit(0)" in told and told.rstrip().endswith("SystemExit: 0")
        assert runner.restart().run(timeout=10).store("sums") == {"n": 3}


def test_a_keyboard_interrupt_raised_by_the_task_under_samsas_signal_handlers_is_its_failure() -> None:
    install_stop_handlers(lambda: None)  # as `samsa run` does: SIGINT stops, raising nothing
    with TestRunner.of(Interrupts) as runner, pytest.raises(UserCodeError) as failed:
        runner.add_input("in", ["a"]).run(timeout=10)
    assert "process() failed on in#0@0: KeyboardInterrupt()" in str(failed.value)


def test_a_keyboard_interrupt_where_ctrl_c_raises_one_still_interrupts() -> None:
    # Python's default SIGINT handler (a test session): it may be a real Ctrl-C, which must not become a
    # failure of the job that the session goes on from.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with TestRunner.of(Interrupts) as runner, pytest.raises(KeyboardInterrupt):
        runner.add_input("in", ["a"]).run(timeout=10)


def _instance(task: StreamTask) -> TaskInstance:
    return bare_task_instance(task, SystemStreamPartition("kafka", "in", 0))


class ExitsEverywhere(StreamTask):
    def init(self, context: Any) -> None:
        sys.exit("init gave up")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...

    def window(self, collector: Any, coordinator: Any) -> None:
        sys.exit(3)

    def close(self) -> None:
        raise SystemExit


@pytest.mark.parametrize(
    ("call", "raised"),
    [
        (TaskInstance.init, "SystemExit('init gave up')"),
        (TaskInstance.window, "SystemExit(3)"),
        (TaskInstance.close, "SystemExit()"),
    ],
    ids=["init", "window", "close"],
)
def test_sys_exit_in_init_window_or_close_is_a_user_code_error_naming_the_method(
    call: Callable[[TaskInstance], None], raised: str
) -> None:
    with pytest.raises(UserCodeError) as failed:
        call(_instance(ExitsEverywhere()))
    assert str(failed.value) == f"task Partition 0: {call.__name__}() failed: {raised}"
    assert __file__ in explain(failed.value)


def test_sys_exit_in_the_constructor_is_a_user_code_error() -> None:
    class Quits(StreamTask):
        def __init__(self) -> None:
            sys.exit(1)

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...

    with pytest.raises(UserCodeError, match=r"task.class='jobs:Quits': .*Quits\(\) failed: SystemExit\(1\)"):
        new_task(Quits, "jobs:Quits")


# -- `samsa run` against the broker ---------------------------------------------------------------------
TASKS = '''
import sys, time
from pathlib import Path
from samsa import StreamTask
from samsa.stores.memory import InMemoryStore

class Exits(StreamTask):
    def process(self, envelope, collector, coordinator):
        if envelope.value == "b":
            sys.exit(0)

class Fails(StreamTask):
    def process(self, envelope, collector, coordinator):
        raise ValueError(f"cannot take {envelope.value}")

class ExitSerde:
    """UTF-8 strings, but a library it calls gives up on "quit" with sys.exit(0) and on "interrupt" with a
    KeyboardInterrupt."""

    def to_bytes(self, value):
        return value.encode()

    def from_bytes(self, data):
        if data == b"quit":
            sys.exit(0)
        if data == b"interrupt":
            raise KeyboardInterrupt
        return data.decode()

class QuitsAtOpen(InMemoryStore):
    """A store engine whose library gives up as the container opens it."""
    def __init__(self, path, spec):
        sys.exit(3)

class Echo(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass

class Slow(StreamTask):
    """Sleeps in process(), so that a SIGINT arrives while the task's code runs."""
    def init(self, context):
        self.marker = Path(context.config["test.marker"])

    def process(self, envelope, collector, coordinator):
        self.marker.touch()
        time.sleep(0.2)
'''


@pytest.fixture
def task_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"exit_tasks_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(TASKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


# -- the job's code outside the task's methods ---------------------------------------------------------
def _serde_runner(task_module: str, serde: str = "ExitSerde") -> TestRunner:
    """A runner of a task whose input's values go through `serde` of the module."""
    return TestRunner.of(f"{task_module}:Echo").with_config(
        {
            "serializers.registry.exits.class": f"{task_module}:{serde}",
            "systems.kafka.streams.in.samza.msg.serde": "exits",
        }
    )


def test_sys_exit_in_a_serde_fails_the_container_naming_where_it_was_called(task_module: str) -> None:
    with _serde_runner(task_module) as runner, pytest.raises(UserCodeError) as failed:
        runner.add_input("in", [(b'"k"', b"a"), (b'"k"', b"quit")], raw=True).run(timeout=10)
    message = str(failed.value)
    assert message.startswith(
        "container 0: the job's code outside its task's methods called sys.exit() (SystemExit(0) in "
        f"from_bytes() at {Path(sys.modules[task_module].__file__ or '')}:"
    ), message
    told = explain(failed.value)
    assert "sys.exit(0)" in told and told.rstrip().endswith("SystemExit: 0")


def test_sys_exit_in_a_store_engine_opened_at_the_start_fails_the_container(task_module: str) -> None:
    store = {"factory": f"{task_module}:QuitsAtOpen", "key.serde": "string", "msg.serde": "string"}
    runner = TestRunner.of(f"{task_module}:Echo").with_config(
        {f"stores.kept.{k}": v for k, v in store.items()}
    )
    with runner, pytest.raises(UserCodeError) as failed:
        runner.add_input("in", ["a"]).run(timeout=10)
    assert "called sys.exit() (SystemExit(3) in __init__() at " in str(failed.value)


def test_a_keyboard_interrupt_of_a_serde_under_samsas_signal_handlers_is_a_failure(task_module: str) -> None:
    install_stop_handlers(lambda: None)  # as `samsa run` does: SIGINT stops, raising nothing
    with _serde_runner(task_module) as runner, pytest.raises(UserCodeError) as failed:
        runner.add_input("in", [(b'"k"', b"interrupt")], raw=True).run(timeout=10)
    assert "outside its task's methods raised KeyboardInterrupt (KeyboardInterrupt() in from_bytes()" in str(
        failed.value
    )


def test_a_keyboard_interrupt_of_a_serde_where_ctrl_c_raises_one_still_interrupts(task_module: str) -> None:
    with _serde_runner(task_module) as runner, pytest.raises(KeyboardInterrupt):
        runner.add_input("in", [(b'"k"', b"interrupt")], raw=True).run(timeout=10)


@pytest.mark.parametrize(
    ("task", "told"), [("Exits", "SystemExit(0)"), ("Fails", "ValueError('cannot take b')")]
)
def test_a_lone_container_whose_process_fails_exits_1_as_a_crash(
    job_config: Any,
    topics: Any,
    produce: Any,
    tmp_path: Path,
    task_module: str,
    caplog: Any,
    task: str,
    told: str,
) -> None:
    words = topics(1)
    produce(words, [("k", "b")])
    config = job_config(f"kafka.{words}", "unused", task=f"{task_module}:{task}")
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    assert main(["run", "--container-id", "0", "--until-caught-up", str(job_file)]) == 1
    assert f"process() failed on {words}#0@0: {told}" in caplog.text
    assert "Traceback" in caplog.text and f"{task_module}.py" in caplog.text
    assert "stopped after its final commit" not in caplog.text


def test_a_lone_container_whose_serde_calls_sys_exit_exits_1_as_a_crash(
    job_config: Any, topics: Any, produce: Any, tmp_path: Path, task_module: str, caplog: Any
) -> None:
    words = topics(1)
    produce(words, [("k", "quit")])
    config = job_config(f"kafka.{words}", "unused", task=f"{task_module}:Echo")
    config["serializers.registry.exits.class"] = f"{task_module}:ExitSerde"
    config[f"systems.kafka.streams.{words}.samza.msg.serde"] = "exits"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    assert main(["run", "--container-id", "0", "--until-caught-up", str(job_file)]) == 1
    assert (
        "container 0: the job's code outside its task's methods called sys.exit() (SystemExit(0)"
        in caplog.text
    )
    assert "Traceback" in caplog.text and f"{task_module}.py" in caplog.text
    assert "stopped after its final commit" not in caplog.text


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("args", [[], ["--container-id", "0"]], ids=["supervisor", "one-container"])
def test_ctrl_c_while_the_task_runs_its_code_still_stops_gracefully(
    job_config: Any,
    topics: Any,
    produce: Any,
    tmp_path: Path,
    task_module: str,
    subprocess_env: dict[str, str],
    args: list[str],
) -> None:
    words = topics(1)
    produce(words, [("k", str(i)) for i in range(200)])
    marker = tmp_path / "processing"
    config = job_config(f"kafka.{words}", "unused", task=f"{task_module}:Slow", test__marker=str(marker))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    env = {**subprocess_env, "PYTHONPATH": os.pathsep.join([str(tmp_path), subprocess_env["PYTHONPATH"]])}
    run = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "run", *args, str(job_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a group of its own, as a terminal's foreground job
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(run.stdout or ()), daemon=True).start()
    try:
        _wait_for(marker.exists, "the task's first process()")
        time.sleep(0.1)  # inside a process() call
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C: the whole group, containers included
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    time.sleep(0.2)  # the last lines
    output = "".join(lines)
    assert run.returncode == 0, output[-3000:]
    assert "received SIGINT; stopping gracefully" in output, output[-3000:]
    assert "stopped after its final commit" in output, output[-3000:]
    assert "failed" not in output and "KeyboardInterrupt" not in output, output[-3000:]
