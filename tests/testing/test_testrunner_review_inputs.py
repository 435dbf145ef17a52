"""The TestRunner's input, config and misuse side, as a review found it: equal items share a partition, an
exactly-once job reads back its own sink in one run, a misspelt input leaves the runner usable, a
production config's unfed streams exist, add_output lists task.outputs, timestamps follow the runner's
clock, the errors for a task instance and a timeout, and two clusters' streams of one name told apart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import samsa.examples.enrichment as enrichment_package
from samsa import OutgoingMessage, StreamTask
from samsa.examples.enrichment.task import EnrichOrders
from samsa.examples.wordcount.task import WordCount
from samsa.kafka.inmemory import broker
from samsa.runtime.config.loader import load_raw
from samsa.testing import TestRunner, TestRunnerError

EXACTLY_ONCE = {"job.processing.guarantee": "exactly_once"}


class CountByUser(StreamTask):
    """Counts messages per user (the key's `user` field, or the key) in store `counts`."""

    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        key = envelope.key["user"] if isinstance(envelope.key, dict) else envelope.key
        self.counts.put(key, (self.counts.get(key) or 0) + 1)


class Repartition(StreamTask):
    """Re-keys `raw` by user into `by-user`, which it also reads, counting per user in store `counts`."""

    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        if envelope.stream == "raw":
            collector.send(OutgoingMessage("kafka", "by-user", key=envelope.message["user"], value=1))
        else:
            self.counts.put(envelope.key, (self.counts.get(envelope.key) or 0) + 1)


class Echo(StreamTask):
    """Sends each message to `out` as it came."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.message))


class Stamp(StreamTask):
    """Sends each message's timestamp to `out`."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.timestamp))


class NeedsArgs(StreamTask):
    def __init__(self, factor: int) -> None:
        self.factor = factor

    def process(self, envelope, collector, coordinator):
        pass


class SlowInit(StreamTask):
    def init(self, context):
        time.sleep(1.0)

    def process(self, envelope, collector, coordinator):
        pass


class SlowProcess(StreamTask):
    def process(self, envelope, collector, coordinator):
        time.sleep(0.3)


class Forever(StreamTask):
    """Sends every message back to its own input."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessage("kafka", "loop", key=envelope.key, value=envelope.message))


# -- 1: equal items, one partition ------------------------------------------------------------------
def test_equal_dict_items_built_in_another_key_order_land_in_one_partition(tmp_path):
    items = [{"user": "u1", "n": 1}, {"n": 1, "user": "u1"}, {"user": "u1", "n": 1}]
    with TestRunner.of(CountByUser, state_dir=tmp_path) as runner:
        result = runner.add_store("counts").add_input("ev", items, partitions=8).run()
        messages = result.messages("ev")
        assert len({m.partition for m in messages}) == 1
        assert result.store("counts") == {"u1": 3}
        # The value is sent as the serde writes the item; only the key (the item itself) is canonical.
        assert [list(m.value) for m in messages] == [list(item) for item in items]
        assert {tuple(m.key) for m in messages} == {("n", "user")}


# -- 2: an exactly-once job reading its own sink -----------------------------------------------------
def test_an_exactly_once_job_reading_its_own_sink_processes_it_in_the_same_run(tmp_path):
    config = {**EXACTLY_ONCE, "task.inputs": "kafka.raw,kafka.by-user", "task.outputs": "kafka.by-user"}
    raw = [("e1", {"user": "u1"}), ("e2", {"user": "u2"}), ("e3", {"user": "u1"})]
    with TestRunner.of(Repartition, state_dir=tmp_path).with_config(config) as runner:
        runner.add_store("counts").add_output("by-user").add_input("raw", raw)
        assert runner.run().store("counts") == {"u1": 2, "u2": 1}
        assert runner.run().store("counts") == {"u1": 2, "u2": 1}


# -- 3: a misspelt input ------------------------------------------------------------------------------
def test_a_misspelt_add_input_after_a_run_is_refused_at_once_and_the_runner_goes_on(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        runner.add_store("counts").add_input("words", ["a"]).run()
        with pytest.raises(TestRunnerError, match=r"not consume stream 'wrods'.*nothing of it was added"):
            runner.add_input("wrods", ["b"])
        assert runner.add_input("words", ["b"]).run().store("counts") == {"a": 1, "b": 1}
        assert runner.advance_time(10).store("counts") == {"a": 1, "b": 1}
        assert runner.restart().run().store("counts") == {"a": 1, "b": 1}


def test_a_misspelt_add_input_before_the_first_run_is_dropped_with_the_error(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        runner.with_config({"task.inputs": "kafka.words"}).add_store("counts")
        runner.add_input("words", ["a"]).add_input("wrods", ["b"])
        with pytest.raises(TestRunnerError, match=r"does not consume stream 'wrods'.*dropped"):
            runner.run()
        assert runner.run().store("counts") == {"a": 1}


# -- 4: a production config's unfed streams -----------------------------------------------------------
def test_an_input_the_test_does_not_feed_exists_empty_co_partitioned_with_the_fed_ones(tmp_path):
    config = {"task.inputs": "kafka.in1,kafka.in2"}
    with TestRunner.of(Echo, state_dir=tmp_path).with_config(config) as runner:
        result = runner.add_input("in1", {2: ["x"]}, partitions=3).run()
        assert result.output("out") == ["x"]
        assert result.messages("in2") == []
        assert broker(runner._bootstrap).partition_counts()["in2"] == 3
        with pytest.raises(TestRunnerError, match=r"already has 3 partition\(s\)"):
            runner.add_input("in2", ["y"], partitions=1)
        assert runner.add_input("in2", ["y"]).run().output("out") == ["x", "y"]


def test_the_enrichment_job_yaml_runs_with_only_its_orders_fed(tmp_path):
    config = load_raw(Path(enrichment_package.__file__).with_name("job.yaml"))
    with TestRunner.of(EnrichOrders, state_dir=tmp_path).with_config(config) as runner:
        result = runner.add_input("orders", [("1", {"order": "o1"})], partitions=2).run()
        assert result.output("orders-enriched") == [{"order": "o1", "customer_name": "unknown"}]


# -- 5: add_output and task.outputs -------------------------------------------------------------------
def test_add_output_lists_the_stream_in_task_outputs_so_an_exactly_once_job_starts(tmp_path):
    config = {**EXACTLY_ONCE, "wordcount.output.stream": "out"}
    with TestRunner.of(WordCount, state_dir=tmp_path).with_config(config) as runner:
        result = runner.add_output("out").add_store("counts").add_input("words", ["a", "a"]).run()
        assert result.output("out") == [1, 2]
        assert result.store("counts") == {"a": 2}


# -- 6: timestamps --------------------------------------------------------------------------------------
def test_records_without_a_timestamp_take_the_runners_clock(tmp_path):
    with TestRunner.of(Stamp, state_dir=tmp_path) as runner:
        result = runner.add_output("out").add_input("in", ["a"]).run()
        now_ms = int(runner.clock() * 1000)
        [message] = result.messages("out")
        assert (message.value, message.timestamp) == (now_ms, now_ms)
        runner.advance_time(5000)
        result = runner.add_input("in", ["b"]).run()
        assert [(m.value, m.timestamp) for m in result.messages("out")][1] == (now_ms + 5000, now_ms + 5000)


# -- 7: a task instance -----------------------------------------------------------------------------------
def test_an_instance_instead_of_the_class_says_to_pass_the_class():
    with pytest.raises(TestRunnerError, match=r"pass the task class, TestRunner.of\(NeedsArgs\)"):
        TestRunner.of(NeedsArgs(1))


# -- 9: what a timeout hit -------------------------------------------------------------------------------
def test_a_timeout_in_init_says_init_was_running_and_the_next_run_starts_again(tmp_path):
    with TestRunner.of(SlowInit, state_dir=tmp_path) as runner:
        runner.add_input("in", ["a"])
        with pytest.raises(TestRunnerError, match=r"init\(\).*cannot interrupt a running call") as raised:
            runner.run(timeout=0.2)
        assert "its own input" not in str(raised.value)
        runner.run(timeout=30)


def test_a_timeout_in_process_names_the_partition_and_guesses_a_loop_only_when_it_fits(tmp_path):
    with TestRunner.of(SlowProcess, state_dir=tmp_path) as runner:
        runner.add_input("in", ["a", "b", "c"])
        with pytest.raises(TestRunnerError, match=r"processing 'in' partition 0") as raised:
            runner.run(timeout=0.1)
        assert "its own input" not in str(raised.value)
    forever = TestRunner.of(Forever, state_dir=tmp_path / "loop")
    with forever, pytest.raises(TestRunnerError, match=r"processing 'loop'.*its own input forever"):
        forever.add_input("loop", ["x"]).run(timeout=0.5)


# -- 10: two systems, one stream name (more in test_runner_clusters.py) ----------------------------------
def test_one_stream_name_on_two_clusters_is_two_streams(tmp_path):
    config = {
        "task.inputs": "dc1.events",
        "task.outputs": "dc2.events",
        "systems.dc1.samza.factory": "kafka",
        "systems.dc1.bootstrap.servers": "dc1:9092",
        "systems.dc2.samza.factory": "kafka",
        "systems.dc2.bootstrap.servers": "dc2:9092",
    }
    with TestRunner.of(Echo, state_dir=tmp_path).with_config(config) as runner:
        result = runner.add_input("events", [("k", 1)]).run(timeout=3)
        assert result.output("out") == [1]
        assert result.output("events", system="dc1") == [1]
        assert result.output("events", system="dc2") == []  # the job never sent there
        with pytest.raises(TestRunnerError, match=r"'events' on systems 'dc1' and 'dc2'.*system="):
            result.output("events")
