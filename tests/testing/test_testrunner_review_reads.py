"""How the TestRunner reads results: open transactions, voided exactly-once versions, stores after a crash,
blob-store backed stores, broadcast adjunct stores, dead-letter streams and raw records."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)
from samsa.examples.wordcount.task import WordCount
from samsa.kafka import KafkaProducer
from samsa.kafka.inmemory import broker
from samsa.testing import Message, TestRunner, TestRunnerError

EXACTLY_ONCE = {"job.processing.guarantee": "exactly_once", "task.outputs": "kafka.out"}


def _within(seconds: float, read: Callable[[], Any]) -> Any:
    """What `read()` returns, failing the test when it takes longer than `seconds` (a read that hangs)."""
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(read()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert got, f"the read did not return within {seconds} s"
    return got[0]


class FailOnce(StreamTask):
    """Sends every message to `out`; fails once on the message "boom" (after sending it)."""

    failed = False

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.message))
        if envelope.message == "boom" and not type(self).failed:
            type(self).failed = True
            raise ValueError("boom")


class Slow(StreamTask):
    """Sends every message to `out`, slowly (a run with a short timeout stops in the middle)."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        time.sleep(0.01)
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.message))


def test_an_exactly_once_jobs_output_is_read_up_to_its_open_transaction_never_waiting_for_it(tmp_path):
    task = type("FailOnceA", (FailOnce,), {"failed": False})
    with TestRunner.of(task, state_dir=tmp_path / "failed").with_config(EXACTLY_ONCE) as runner:
        result = runner.add_output("out").add_input("in", ["a", "b"]).run()
        runner.add_input("in", ["boom"])
        with pytest.raises(Exception, match="boom"):
            runner.run()
        # The failed run's transaction (its "boom" output) stays open: what is committed reads at once.
        assert _within(10, lambda: result.output("out")) == ["a", "b"]
        runner.restart()
        assert _within(10, lambda: result.output("out")) == ["a", "b"]
        assert runner.run().output("out") == ["a", "b", "boom"]

    with TestRunner.of(Slow, state_dir=tmp_path / "timeout").with_config(EXACTLY_ONCE) as runner:
        result = runner.add_output("out").add_input("in", ["first"]).run()
        runner.add_input("in", [str(i) for i in range(200)])
        with pytest.raises(TestRunnerError, match="timeout"):
            runner.run(timeout=0.2)
        assert _within(10, lambda: result.output("out")) == ["first"]
        assert runner.run().output("out") == ["first", *map(str, range(200))]


def test_an_exactly_once_intermediate_output_leaves_out_the_versions_a_restart_voided(tmp_path):
    task = type("FailOnceB", (FailOnce,), {"failed": False})
    config = {**EXACTLY_ONCE, "systems.kafka.streams.out.samza.intermediate": "true"}
    with TestRunner.of(task, state_dir=tmp_path).with_config(config) as runner:
        result = runner.add_output("out", partitions=2).add_input("in", {0: ["a"], 1: ["b"]}).run()
        runner.add_input("in", {0: [*map(str, range(20)), "boom"], 1: ["c"]})
        with pytest.raises(Exception, match="boom"):
            runner.run()
        result = runner.restart().run()
        # The failed start's records of the versions it never committed are on the topic, and again from
        # the restarted start (a new generation): a Samsa reader takes them once, as the output does.
        expected = ["a", *map(str, range(20)), "boom", "b", "c"]
        assert sorted(result.output("out")) == sorted(expected)
        on_topic = [m for m in result.messages("out", raw=True) if m.key is not None]
        assert len(on_topic) > len(expected), "the replayed records are on the topic"


def test_a_store_is_not_read_after_a_crash_until_the_next_run_restored_it(tmp_path):
    runner = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config({"wordcount.output.stream": "counts-out"})
        .add_input("words", ["a"])
        .add_output("counts-out")
        .add_store("counts")
    )
    result = runner.run()
    assert result.store("counts") == {"a": 1}
    runner.add_input("words", ["a"] * 3000)
    with pytest.raises(TestRunnerError, match="timeout"):
        runner.run(timeout=0.001)  # stops after the first chunk: its writes are not committed
    assert result.store("counts")["a"] > 1  # the live store
    runner.restart(crash=True)
    # The changelog holds the uncommitted writes the next start undoes: no store read shows them.
    with pytest.raises(TestRunnerError, match=r"restart\(crash=True\).*call run\(\)"):
        result.store("counts")
    assert runner.run().store("counts") == {"a": 3001}
    runner.close()


def test_a_failed_jobs_store_is_not_read_after_a_graceful_restart_either(tmp_path):
    task = type("FailOnceC", (FailOnce,), {"failed": False})

    class Counting(task):  # type: ignore[valid-type,misc]
        def init(self, context: TaskContext) -> None:
            self.counts = context.store("counts")

        def process(
            self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
        ) -> None:
            self.counts.put("n", (self.counts.get("n") or 0) + 1)
            super().process(envelope, collector, coordinator)

    with TestRunner.of(Counting, state_dir=tmp_path) as runner:
        result = runner.add_store("counts").add_output("out").add_input("in", ["a"]).run()
        runner.add_input("in", ["b", "boom"])
        with pytest.raises(Exception, match="boom"):
            runner.run()
        runner.restart()
        with pytest.raises(TestRunnerError, match=r"call run\(\)"):
            result.store("counts")
        assert runner.run().store("counts") == {"n": 3}


@pytest.mark.parametrize("key", ["stores.backup.factories", "task.backup.factories"])
def test_a_store_the_jobs_backup_factories_put_in_a_blob_store_gets_no_changelog(tmp_path, key):
    runner = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config({"wordcount.output.stream": "out", "stores.counts.factory": "rocksdb", key: "blobstore"})
        .add_store("counts")
        .add_input("words", ["a", "a", "b"], partitions=2)
    )
    result = runner.run()
    assert result.store("counts") == {"a": 2, "b": 1}
    assert not [t for t in broker(runner._bootstrap).partition_counts() if "changelog" in t]
    runner.restart()
    # Not an empty changelog read as the store: its contents come back through the blob store at the start.
    with pytest.raises(TestRunnerError, match="has no changelog"):
        result.store("counts")
    assert runner.add_input("words", ["a"]).run().store("counts") == {"a": 3, "b": 1}
    runner.close()


class Look(StreamTask):
    """Sends the adjunct store's value of each order's key."""

    def init(self, context: TaskContext) -> None:
        self.ref = context.store("ref")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=self.ref.get(envelope.key)))


@pytest.mark.parametrize("containers", [1, 2])
def test_a_broadcast_adjunct_store_shows_once(tmp_path, containers):
    config = {
        "task.inputs": "kafka.orders",
        "job.container.count": str(containers),
        "stores.ref.factory": "inmemory",
        "stores.ref.key.serde": "json",
        "stores.ref.msg.serde": "json",
        "stores.ref.adstore.input": "kafka.ref",
        "task.broadcast.inputs": "kafka.ref#[0-1]",
        "systems.kafka.streams.ref.samza.bootstrap": "true",
    }
    with TestRunner.of(Look, state_dir=tmp_path).with_config(config) as runner:
        result = (
            runner.add_input("ref", {0: [("x", "X")], 1: [("y", "Y")]}, partitions=2)
            .add_input("orders", {0: [("x", 1)], 1: [("y", 2)]}, partitions=2)
            .run()
        )
        assert sorted(result.output("out")) == ["X", "Y"]
        assert result.store("ref") == {"x": "X", "y": "Y"}
        assert result.store_by_task("ref") == {
            "Partition 0": {"x": "X", "y": "Y"},
            "Partition 1": {"x": "X", "y": "Y"},
        }


class Echo(StreamTask):
    """Sends every message to `out`."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.message))


def test_a_dead_letter_stream_reads_as_raw_records_and_a_bad_record_is_named(tmp_path):
    config = {"task.deserialization.error.policy": "dlq"}
    with TestRunner.of(Echo, state_dir=tmp_path).with_config(config) as runner:
        result = runner.add_output("out").add_input("in", [("k", 1)]).run()
        producer = KafkaProducer({"bootstrap.servers": runner._bootstrap})
        producer.send("in", b"{not json", key=b'"k"', partition=0)
        producer.close()
        assert runner.add_input("in", [("k", 2)]).run().output("out") == [1, 2]
        (dead,) = result.messages("samsa-dlq-echo-1")
        assert (dead.key, dead.value) == (b'"k"', b"{not json")
        assert dict(dead.headers)["samsa.source.offset"] == b"1"
        # The input itself: its serde fails on the record, naming where it is; raw=True reads its bytes.
        with pytest.raises(TestRunnerError, match=r"stream 'in' partition 0 offset 1: .*raw=True"):
            result.messages("in")
        assert [m.value for m in result.messages("in", raw=True)] == [b"1", b"{not json", b"2"]


def test_raw_inputs_feed_a_malformed_record_to_test_the_bad_message_policy(tmp_path):
    config = {"task.deserialization.error.policy": "skip"}
    with TestRunner.of(Echo, state_dir=tmp_path).with_config(config) as runner:
        result = (
            runner.add_output("out")
            .add_input("in", [("k", 1)])
            .add_input("in", [(b'"k"', b"{not json"), Message(b"2", key=b'"k"')], raw=True)
            .run()
        )
        assert result.output("out") == [1, 2]
        with pytest.raises(TestRunnerError, match=r"item 0 .*raw=True.*bytes"):
            runner.add_input("in", ["not bytes"], raw=True).run()
