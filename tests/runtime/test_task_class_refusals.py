"""A task class Samsa cannot run is refused at start, naming the class and the method: an async or generator
method (its code would never run), no process(), a method that cannot take the arguments Samsa passes."""

from __future__ import annotations

import json
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa import StreamTask
from samsa.cli import main
from samsa.deploy.restarts import CONFIG_ERROR_EXIT
from samsa.runtime.exceptions import ConfigError, UserCodeError
from samsa.runtime.task_instance import check_constructor, new_task
from samsa.testing import TestRunner


@pytest.fixture(autouse=True)
def _default_signal_handlers() -> Iterator[None]:
    # `samsa run` installs its stop handlers in this process: put pytest's back.
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class AsyncProcess(StreamTask):
    async def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(envelope)


class AsyncGenProcess(StreamTask):
    async def process(self, envelope: Any, collector: Any, coordinator: Any) -> Any:
        yield envelope


class GenProcess(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> Any:
        yield envelope


class Plain(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...


class AsyncInit(Plain):
    async def init(self, context: Any) -> None: ...


class AsyncWindow(Plain):
    async def window(self, collector: Any, coordinator: Any) -> None: ...


class AsyncClose(Plain):
    async def close(self) -> None: ...


@pytest.mark.parametrize(
    ("task_class", "method", "kind"),
    [
        (AsyncProcess, "process", "a coroutine function (async def)"),
        (AsyncGenProcess, "process", "an async generator"),
        (GenProcess, "process", "a generator function (it yields)"),
        (AsyncInit, "init", "a coroutine function (async def)"),
        (AsyncWindow, "window", "a coroutine function (async def)"),
        (AsyncClose, "close", "a coroutine function (async def)"),
    ],
)
def test_an_async_or_generator_method_is_refused_naming_the_class_and_method(
    task_class: type[StreamTask], method: str, kind: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        new_task(task_class, f"jobs:{task_class.__name__}")
    message = str(refused.value)
    assert message.startswith(
        f"task.class='jobs:{task_class.__name__}': {task_class.__name__}.{method}() is {kind}"
    )
    assert f"{__file__}:" in message  # where it is defined
    assert f"Samsa runs {method}() synchronously and has no async tasks: write it as a plain `def`" in message


def test_an_async_process_is_refused_at_the_start_of_a_test_run_before_any_message() -> None:
    refused = pytest.raises(ConfigError, match=r"AsyncProcess\.process\(\) is a coroutine function")
    with refused, TestRunner.of(AsyncProcess) as runner:
        runner.add_input("in", ["a", "b"]).run(timeout=10)


def test_a_class_without_process_is_refused_with_the_spelling_it_comes_near() -> None:
    class Typo(StreamTask):
        def proces(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...

    with pytest.raises(ConfigError) as refused:
        check_constructor(Typo, "jobs:Typo")
    message = str(refused.value)
    assert message.startswith(
        "task.class='jobs:Typo': Typo does not implement process(self, envelope, collector, coordinator) "
        "(Typo.proces looks like it: rename it process)"
    )

    class ProcessAsync(StreamTask):  # Samza's AsyncStreamTask.processAsync, ported by name
        def processAsync(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...

    with pytest.raises(ConfigError, match=r"ProcessAsync\.processAsync looks like it: rename it process"):
        check_constructor(ProcessAsync, "jobs:ProcessAsync")

    class Nothing(StreamTask):
        def handle(self, envelope: Any) -> None: ...

    with pytest.raises(
        ConfigError, match=r"Nothing does not implement process\(.*\); Samsa calls it"
    ) as bare:
        check_constructor(Nothing, "jobs:Nothing")
    assert "looks like" not in str(bare.value)


def test_a_method_that_cannot_take_samsas_arguments_is_refused() -> None:
    class OldInit(Plain):  # Samza 0.x InitableTask.init(Config, TaskContext)
        def init(self, config: Any, context: Any) -> None: ...

    with pytest.raises(ConfigError) as refused:
        check_constructor(OldInit, "jobs:OldInit")
    message = str(refused.value)
    assert "OldInit.init(self, config, context) cannot take the arguments Samsa passes" in message
    assert "Samsa calls init(context)" in message and "read the config from context.config" in message

    class ShortProcess(StreamTask):
        def process(self, envelope: Any) -> None: ...

    with pytest.raises(ConfigError, match=r"Samsa calls process\(envelope, collector, coordinator\)"):
        check_constructor(ShortProcess, "jobs:ShortProcess")


def test_plain_methods_in_any_form_samsa_can_call_pass() -> None:
    class Forms(StreamTask):
        @staticmethod
        def process(envelope: Any, collector: Any, coordinator: Any) -> None: ...

        @classmethod
        def window(cls, *args: Any) -> None: ...

        def init(self, context: Any, extra: int = 0) -> None: ...

    class Inherited(Forms):
        pass

    for task_class in (Plain, Forms, Inherited, StreamTask):  # StreamTask: the placeholder of checks only
        check_constructor(task_class, "jobs:T")


# -- at run time: a lambda or partial of an async function passes the check at start ------------------
class LambdaAsync(StreamTask):
    async def _work(self, envelope: Any, collector: Any, coordinator: Any) -> None: ...

    process = lambda self, envelope, collector, coordinator: self._work(envelope, collector, coordinator)  # type: ignore[assignment] # noqa: E731


def test_a_process_returning_a_coroutine_fails_the_task_and_checkpoints_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine ... was never awaited" on top of the error
        with TestRunner.of(LambdaAsync) as runner, pytest.raises(UserCodeError) as failed:
            runner.add_input("in", ["a", "b"]).run(timeout=10)
    message = str(failed.value)
    assert message.startswith("task Partition 0: process() on in#0@0 returned coroutine")
    assert "its code never ran. Samsa runs process() synchronously and has no async tasks" in message


def _ticks(collector: Any, coordinator: Any) -> Iterator[int]:
    yield 1


class LambdaWindow(Plain):
    window = lambda self, collector, coordinator: _ticks(collector, coordinator)  # type: ignore[assignment] # noqa: E731


def test_a_window_returning_a_generator_fails_the_task() -> None:
    runner = TestRunner.of(LambdaWindow).with_config({"task.window.ms": "1"})
    with runner, pytest.raises(UserCodeError, match=r"task Partition 0: window\(\) returned generator"):
        runner.add_input("in", ["a"]).advance_time(1, timeout=10)


def test_samsa_run_of_an_async_task_exits_as_a_configuration_error(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    (tmp_path / "async_task_module.py").write_text(
        "from samsa import StreamTask\n\nclass T(StreamTask):\n"
        "    async def process(self, envelope, collector, coordinator):\n        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    job = tmp_path / "job.yaml"
    job.write_text(
        json.dumps(
            {
                "job.name": "async-task",
                "task.class": "async_task_module:T",
                "task.inputs": "kafka.in",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "127.0.0.1:1",  # never reached: refused first
                "job.logged.store.base.dir": str(tmp_path / "state"),
                "job.non-logged.store.base.dir": str(tmp_path / "state"),
            }
        )
    )
    refused = "task.class='async_task_module:T': T.process() is a coroutine function (async def)"
    assert main(["run", str(job)]) == 2
    assert refused in caplog.text
    caplog.clear()
    assert main(["run", "--container-id", "0", str(job)]) == CONFIG_ERROR_EXIT
    assert refused in caplog.text
