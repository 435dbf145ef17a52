"""A failure of the user's task code is told with their traceback and the notes on the error."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from bare_task_instances import bare_task_instance
from fake_input import FakeConsumer, StringDecode

from samsa import StreamTask
from samsa.cli import main
from samsa.runtime.exceptions import UserCodeError
from samsa.runtime.run_loop import PartitionBuffer, RunLoop
from samsa.runtime.task import IncomingMessageEnvelope
from samsa.runtime.task_instance import TaskInstance
from samsa.runtime.user_errors import explain
from samsa.stores.memory import InMemoryStore
from samsa.stores.serialized import SerializedStore
from samsa.streams import SystemStreamPartition


def _lookup(table: dict[str, int], key: str) -> int:
    return table[key]  # the user's helper: its frame belongs in the traceback


class LookupTask(StreamTask):
    def process(self, envelope, collector, coordinator) -> None:  # type: ignore[no-untyped-def]
        _lookup({}, envelope.value)


class StoreReadingTask(StreamTask):
    def __init__(self) -> None:
        engine = InMemoryStore("sums")
        engine.put(b"k", b"not json")  # written with another serde than the store now reads with
        self.sums: Any = SerializedStore(engine, _Utf8(), _Json())

    def process(self, envelope, collector, coordinator) -> None:  # type: ignore[no-untyped-def]
        self.sums.get("k")


class _Utf8:
    def to_bytes(self, obj: str) -> bytes:
        return obj.encode()

    def from_bytes(self, data: bytes) -> str:
        return data.decode()


class _Json:
    def to_bytes(self, obj: Any) -> bytes:
        return json.dumps(obj).encode()

    def from_bytes(self, data: bytes) -> Any:
        return json.loads(data)


class WindowTask(StreamTask):
    def window(self, collector, coordinator) -> None:  # type: ignore[no-untyped-def]
        raise ValueError("window broke")


def _instance(task: StreamTask) -> TaskInstance:
    ssp = SystemStreamPartition("kafka", "amounts", 0)
    ti = bare_task_instance(task, ssp)
    ti.offsets[ssp] = 0
    return ti


def _process(task: StreamTask, values: list[bytes]) -> UserCodeError:
    ti = _instance(task)
    ssp = next(iter(ti.offsets))
    consumer = FakeConsumer(ssp, values)
    buf = PartitionBuffer(ssp, ti, consumer, ("string", StringDecode()), ("string", StringDecode()))  # type: ignore[arg-type]
    loop = RunLoop(
        [(consumer, {("amounts", 0): buf})],  # type: ignore[list-item]
        [ti],
        lambda *a, **k: None,
        lambda *a: None,
        end_offsets={ssp: len(values)},
    )
    with pytest.raises(UserCodeError) as failed:
        loop.run()
    return failed.value


def test_a_failing_process_is_told_with_the_users_frames_and_not_the_run_loops() -> None:
    error = _process(LookupTask(), [b"missing"])
    assert "process() failed on amounts#0@0: KeyError('missing')" in str(error)
    told = explain(error)
    assert told.startswith(str(error))
    assert __file__ in told
    assert "in process" in told and "_lookup({}, envelope.value)" in told
    assert "in _lookup" in told and "return table[key]" in told
    assert told.rstrip().endswith("KeyError: 'missing'")
    assert "run_loop.py" not in told
    assert "run_loop.py" in explain(error, full=True)  # --log-level DEBUG: every frame


def test_the_notes_a_store_adds_reach_the_message_and_the_traceback() -> None:
    error = _process(StoreReadingTask(), [b"x"])
    assert "in store 'sums': get('k')" in str(error)
    told = explain(error)
    assert 'self.sums.get("k")' in told and "in store 'sums': get('k')" in told.split(str(error), 1)[1]


def test_init_and_window_failures_are_user_code_errors_with_their_traceback() -> None:
    class InitTask(StreamTask):
        def init(self, context: Any) -> None:
            context.store("nosuch")

    class Context:
        def store(self, name: str) -> Any:
            raise LookupError(name)

    ti = _instance(InitTask())
    ti.context = Context()  # type: ignore[assignment]
    with pytest.raises(UserCodeError, match=r"init\(\) failed: LookupError\('nosuch'\)") as init:
        ti.init()
    assert 'context.store("nosuch")' in explain(init.value)
    with pytest.raises(UserCodeError, match=r"window\(\) failed") as window:
        _instance(WindowTask()).window()
    assert 'raise ValueError("window broke")' in explain(window.value)


def test_a_failing_close_is_told_with_its_traceback_as_process_is() -> None:
    class CloseTask(StreamTask):
        def close(self) -> None:
            raise ValueError("close broke")

    with pytest.raises(UserCodeError, match=r"close\(\) failed: ValueError\('close broke'\)") as close:
        _instance(CloseTask()).close()
    told = explain(close.value)
    assert 'raise ValueError("close broke")' in told and told.rstrip().endswith("ValueError: close broke")
    assert "user_errors.py" in explain(close.value, full=True)  # --log-level DEBUG: every frame, Samsa's too


def test_an_error_of_samsa_alone_is_told_by_its_message_and_notes() -> None:
    error = ValueError("plain")
    assert explain(error) == "plain"
    error.add_note("in store 'sums': flush()")
    assert explain(error) == "plain\nin store 'sums': flush()"


def test_the_cli_logs_the_users_traceback(tmp_path, caplog, monkeypatch) -> None:
    def fail(args: Any) -> int:
        try:
            _lookup({}, "missing")
        except KeyError as e:
            raise UserCodeError(
                "task Partition 0: process() failed on amounts#0@0: KeyError('missing')"
            ) from e
        return 0

    monkeypatch.setattr("samsa.cli._cmd_config_keys", fail)
    with caplog.at_level(logging.INFO):
        assert main(["config", "keys"]) == 2
    assert "return table[key]" in caplog.text and "KeyError: 'missing'" in caplog.text


def test_the_envelope_has_samzas_message_name_for_its_value() -> None:
    envelope = IncomingMessageEnvelope("kafka", "amounts", 0, 7, "k", {"amount": 3})
    assert envelope.message is envelope.value
    with pytest.raises(AttributeError):
        envelope.message = 1  # type: ignore[misc]
