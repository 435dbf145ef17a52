"""The run loop with a fake consumer: choosing, flow control, timers, requests, bootstrap, failures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from samsa import RequestScope, StreamTask
from samsa.runtime import run_loop as rl
from samsa.runtime.exceptions import TaskError
from samsa.runtime.job_model import TaskModel
from samsa.runtime.metrics import MetricsRegistry
from samsa.runtime.run_loop import PartitionBuffer, RunLoop
from samsa.runtime.task_instance import TaskInstance
from samsa.streams import SystemStreamPartition


class Msg:
    def __init__(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self._t, self._p, self._o, self._v = topic, partition, offset, value

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes | None:
        return None

    def value(self) -> bytes | None:
        return self._v

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)

    def headers(self) -> None:
        return None


class FakeConsumer:
    """Hands out queued messages of unpaused partitions, `per_fetch` at a time."""

    def __init__(self, data: dict[tuple[str, int], list[bytes]], per_fetch: int = 1000) -> None:
        self.queues = {tp: [Msg(tp[0], tp[1], i, v) for i, v in enumerate(vs)] for tp, vs in data.items()}
        self.paused: set[tuple[str, int]] = set()
        self.pause_calls: list[list[tuple[str, int]]] = []
        self.resume_calls: list[list[tuple[str, int]]] = []
        self.per_fetch = per_fetch

    def consume(self, max_messages: int, timeout: float) -> list[Msg]:
        out: list[Msg] = []
        for tp, q in self.queues.items():
            if tp in self.paused:
                continue
            take = min(len(q), self.per_fetch, max_messages - len(out))
            out += q[:take]
            del q[:take]
        return out

    def pause(self, tps: Iterable[tuple[str, int]]) -> None:
        self.pause_calls.append(list(tps))
        self.paused |= set(self.pause_calls[-1])

    def resume(self, tps: Iterable[tuple[str, int]]) -> None:
        self.resume_calls.append(list(tps))
        self.paused -= set(self.resume_calls[-1])

    def position(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: -1001 for tp in tps}


class _Decode:
    def __init__(self, fn: Any) -> None:
        self.from_bytes = fn


class Storage:
    def flush(self) -> None: ...

    def close(self) -> None: ...


class Recorder(StreamTask):
    def __init__(self, log: list[str], hooks: dict[str, Any] | None = None) -> None:
        self.log = log
        self.hooks = hooks or {}

    def process(self, envelope, collector, coordinator) -> None:  # type: ignore[no-untyped-def]
        self.log.append(f"{envelope.partition}:{envelope.value}")
        hook = self.hooks.get(envelope.value)
        if hook:
            hook(coordinator)

    def window(self, collector, coordinator) -> None:  # type: ignore[no-untyped-def]
        self.log.append("window")


def _loop(
    data: dict[int, list[str]],
    batch_size: int = 1,
    hooks: dict[str, Any] | None = None,
    commit_ms: int = -1,
    window_ms: int = -1,
    bootstrap: frozenset[int] = frozenset(),
    on_bad: Any = None,
    key_from: Any = None,
) -> tuple[RunLoop, list[str], FakeConsumer, TaskInstance]:
    log: list[str] = []
    consumer = FakeConsumer({("t", p): [v.encode() for v in vs] for p, vs in data.items()})
    ssps = tuple(SystemStreamPartition("kafka", "t", p) for p in data)
    ti = TaskInstance(
        TaskModel("Partition 0", ssps),
        Recorder(log, hooks),
        Storage(),
        None,
        None,  # type: ignore[arg-type]
        MetricsRegistry(),
        commit_ms,
        window_ms,
    )
    ti.offsets.update({ssp: 0 for ssp in ssps})
    routes = {
        ("t", ssp.partition): PartitionBuffer(
            ssp,
            ti,
            consumer,
            ("string", _Decode(key_from or bytes.decode)),
            ("string", _Decode(bytes.decode)),  # type: ignore[arg-type]
            bootstrap=ssp.partition in bootstrap,
        )
        for ssp in ssps
    }

    def commit(tasks: Any, requested: bool = False) -> None:
        log.append("commit:" + ",".join(f"{s.partition}={o}" for s, o in sorted(ti.offsets.items())))
        ti.committed(0)

    loop = RunLoop(
        [(consumer, routes)],
        [ti],
        commit,
        on_bad or (lambda *a: None),
        batch_size=batch_size,  # type: ignore[list-item]
        end_offsets={ssp: len(data[ssp.partition]) for ssp in ssps},
        bootstrap_ends={ssp: len(data[ssp.partition]) for ssp in ssps if ssp.partition in bootstrap},
    )
    return loop, log, consumer, ti


def test_round_robin_one_message_per_partition_by_default() -> None:
    loop, log, _, _ = _loop({0: ["a", "b", "c"], 1: ["x", "y"]})
    loop.run()
    assert log == ["0:a", "1:x", "0:b", "1:y", "0:c"]
    assert loop.caught_up


def test_batch_size_sticks_to_a_partition() -> None:
    loop, log, _, _ = _loop({0: ["a", "b", "c"], 1: ["x", "y", "z"]}, batch_size=2)
    loop.run()
    assert log == ["0:a", "0:b", "1:x", "1:y", "0:c", "1:z"]


def test_offsets_are_the_next_to_read_after_each_message() -> None:
    loop, _, _, ti = _loop({0: ["a", "b"], 1: ["x"]})
    loop.run()
    assert {s.partition: o for s, o in ti.offsets.items()} == {0: 2, 1: 1}


def test_a_full_buffer_pauses_its_partition_until_drained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rl, "FETCH_SIZE", 3)
    monkeypatch.setattr(rl, "PAUSE_ABOVE", 2)
    loop, log, consumer, _ = _loop({0: [str(i) for i in range(7)], 1: ["x"]})
    loop.run()
    assert [("t", 0)] in consumer.pause_calls
    assert [("t", 0)] in consumer.resume_calls
    assert [e for e in log if e.startswith("0:")] == [f"0:{i}" for i in range(7)]


def test_commit_requested_in_process_covers_exactly_that_message() -> None:
    loop, log, _, _ = _loop({0: ["a", "b", "c"]}, hooks={"b": lambda c: c.commit()})
    loop.run()
    assert log == ["0:a", "0:b", "commit:0=2", "0:c"]


def test_commit_outranks_window_outranks_process() -> None:
    loop, log, _, ti = _loop({0: ["a", "b"]}, commit_ms=60_000, window_ms=60_000)
    ti.next_commit = ti.next_window = 0.0  # both due before the first message
    loop.run()
    assert log[:3] == ["commit:0=0", "window", "0:a"]


def test_shutdown_of_all_tasks_stops_after_the_message() -> None:
    loop, log, _, _ = _loop(
        {0: ["a", "b", "c"]}, hooks={"b": lambda c: c.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)}
    )
    loop.run()
    assert log == ["0:a", "0:b"]
    assert not loop.caught_up


def test_bootstrap_partition_is_read_to_its_end_before_the_others() -> None:
    loop, log, _, _ = _loop({0: ["a", "b", "c"], 1: ["x", "y"]}, bootstrap=frozenset({1}))
    loop.run()
    assert log == ["1:x", "1:y", "0:a", "0:b", "0:c"]


def test_window_waits_for_the_bootstrap_like_process() -> None:
    loop, log, _, ti = _loop({0: ["a"], 1: ["x", "y"]}, window_ms=60_000, bootstrap=frozenset({1}))
    ti.next_window = 0.0  # due before the first message: it fires once the bootstrap stream caught up
    loop.run()
    assert log == ["1:x", "1:y", "window", "0:a"]


def test_an_undeserializable_message_goes_to_the_policy_and_is_passed() -> None:
    bad: list[tuple[str, int]] = []

    def key_from(raw: bytes) -> str:
        raise ValueError("bad key")

    class KeyedMsg(Msg):
        def key(self) -> bytes | None:
            return b"k" if self._v == b"b" else None

    loop, log, consumer, ti = _loop(
        {0: ["a", "b", "c"]},
        key_from=key_from,
        on_bad=lambda buf, msg, part, e: bad.append((part, msg.offset())),
    )
    consumer.queues[("t", 0)] = [KeyedMsg("t", 0, i, v) for i, v in enumerate([b"a", b"b", b"c"])]
    loop.run()
    assert bad == [("key", 1)]
    assert log == ["0:a", "0:c"]
    assert list(ti.offsets.values()) == [3]


def test_a_failing_process_names_the_message_and_keeps_its_offset() -> None:
    def boom(c: Any) -> None:
        raise RuntimeError("boom")

    loop, _log, _, ti = _loop({0: ["a", "b", "c"]}, hooks={"b": boom})
    with pytest.raises(TaskError, match=r"t#0@1"):
        loop.run()
    assert list(ti.offsets.values()) == [1], "only the message before the failure counts as processed"


def test_bootstrap_ends_at_the_start_watermark_even_while_more_arrives() -> None:
    seen: dict[str, bool] = {}
    holder: dict[str, RunLoop] = {}
    hooks = {"299": lambda c: seen.setdefault("bootstrapping at the end", holder["loop"]._bootstrapping)}
    loop, log, consumer, _ = _loop(
        {0: ["a"], 1: [str(i) for i in range(300)]}, bootstrap=frozenset({1}), hooks=hooks
    )
    holder["loop"] = loop
    loop._bootstrap_ends = {s: 2 for s in loop._bootstrap_ends}  # only 2 existed at start
    loop.run()
    assert seen == {"bootstrapping at the end": False}, "done once offset 2 was reached, not when drained"
    assert [("t", 0)] in consumer.resume_calls
    assert "0:a" in log


def test_a_stop_ends_the_chunk_after_the_message_in_hand() -> None:
    holder: dict[str, RunLoop] = {}
    loop, log, _, _ = _loop({0: [str(i) for i in range(100)]}, hooks={"3": lambda c: holder["loop"].stop()})
    holder["loop"] = loop
    loop.run()
    assert log == ["0:0", "0:1", "0:2", "0:3"]


def test_a_commit_falling_due_mid_chunk_runs_before_the_next_message() -> None:
    import time

    loop, log, _, ti = _loop(
        {0: [str(i) for i in range(10)]}, hooks={"4": lambda c: time.sleep(0.2)}, commit_ms=60_000
    )
    ti.next_commit = time.monotonic() + 0.1  # falls due while message 4 is processed
    loop.run()
    assert log[4:7] == ["0:4", "commit:0=5", "0:5"]
