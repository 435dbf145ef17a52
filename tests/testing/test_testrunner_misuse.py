"""The TestRunner off the happy path: placement of initial state, failing and shutting-down jobs, builder
calls in the wrong order, other system names, and the errors that say what to do."""

from __future__ import annotations

import pytest

from samsa import OutgoingMessage, StreamTask
from samsa.examples.wordcount.task import WordCount
from samsa.runtime.exceptions import TaskError
from samsa.runtime.task import RequestScope
from samsa.testing import TestRunner, TestRunnerError

WORDCOUNT = {"wordcount.output.stream": "counts-out"}
STRINGS = {
    **WORDCOUNT,
    "systems.kafka.samza.key.serde": "string",
    "systems.kafka.samza.msg.serde": "string",
    "systems.kafka.streams.counts-out.samza.msg.serde": "long",
}
FAILURES = {"left": 0}
CLOSED: list[str] = []


class KeyedSum(StreamTask):
    """Adds each message's value to its key's sum in store `sums`; fails once on the value -1 when told to,
    after its store write."""

    def init(self, context):
        self.sums = context.store("sums")

    def process(self, envelope, collector, coordinator):
        self.sums.put(envelope.key, (self.sums.get(envelope.key) or 0) + envelope.value)
        if envelope.value == -1 and FAILURES["left"] > 0:
            FAILURES["left"] -= 1
            raise RuntimeError("poison")


class StopOnEnd(StreamTask):
    """Echoes its input to `out`; the value "END" shuts its container down."""

    def process(self, envelope, collector, coordinator):
        if envelope.value == "END":
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)
            return
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.value))

    def close(self):
        CLOSED.append("closed")


class SeenAtInit(StreamTask):
    """Adds each value to its key's sum in store `sums`, and sends what the store held when init() ran (a
    cache warmed there)."""

    def init(self, context):
        self.sums = context.store("sums")
        self.at_init = dict(self.sums.all())

    def process(self, envelope, collector, coordinator):
        self.sums.put(envelope.key, (self.sums.get(envelope.key) or 0) + envelope.value)
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=self.at_init))


def scaler(factor: int) -> type[StreamTask]:
    class Scaler(StreamTask):
        def process(self, envelope, collector, coordinator):
            collector.send(OutgoingMessage("kafka", "out", value=envelope.value * factor))

    return Scaler


# -- initial state ---------------------------------------------------------------------------------
def test_initial_contents_go_to_the_task_that_gets_the_same_key_from_the_input(tmp_path):
    # The store's serdes (JSON, add_store's default) differ from the stream's (string): placement is by
    # the input's key bytes, so every word's initial count meets its messages.
    initial = {"a": 3, "b": 10, "c": 7, "d": 1}
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        result = (
            runner.with_config(STRINGS)
            .add_output("counts-out")
            .add_store("counts", initial=initial)
            .add_input("words", ["a", "b", "c", "d"], partitions=4)
            .run()
        )
        assert result.store("counts") == {"a": 4, "b": 11, "c": 8, "d": 2}
        assert sum(1 for contents in result.store_by_task("counts").values() if contents) > 1


def test_initial_contents_by_partition_for_a_store_keyed_otherwise(tmp_path):
    with TestRunner.of(KeyedSum, state_dir=tmp_path) as runner:
        result = (
            runner.add_store("sums", by_partition={1: {"k": 100}})
            .add_input("in", {1: [("k", 1)]}, partitions=2)
            .run()
        )
        assert result.store_by_task("sums") == {"Partition 0": {}, "Partition 1": {"k": 101}}


def test_a_key_two_tasks_hold_is_an_error_that_points_at_store_by_task(tmp_path):
    with TestRunner.of(KeyedSum, state_dir=tmp_path) as runner:
        result = runner.add_store("sums").add_input("in", {0: [("k", 1)], 1: [("k", 2)]}).run()
        with pytest.raises(TestRunnerError, match=r"store_by_task\('sums'\)"):
            result.store("sums")
        assert result.store_by_task("sums") == {"Partition 0": {"k": 1}, "Partition 1": {"k": 2}}


def test_a_later_add_input_of_a_stream_keeps_its_partitions_and_a_conflicting_count_is_refused(tmp_path):
    with TestRunner.of(KeyedSum, state_dir=tmp_path) as runner:
        runner.add_store("sums").add_input("in", [("bob", 1)], partitions=3).run()
        result = runner.add_input("in", [("bob", 5)]).run()
        assert result.store("sums") == {"bob": 6}  # not split over two tasks
        with pytest.raises(TestRunnerError, match=r"already has 3 partition\(s\)"):
            runner.add_input("in", [("bob", 1)], partitions=8)
        with pytest.raises(TestRunnerError, match="partition 5, but the stream has 3"):
            runner.add_input("in", {5: [("bob", 1)]})


# -- failures, shutdown, restarts -----------------------------------------------------------------
@pytest.mark.parametrize("crash", [False, True])
def test_a_failed_job_must_be_restarted_and_then_counts_each_message_once(tmp_path, crash):
    FAILURES["left"] = 1
    runner = TestRunner.of(KeyedSum, state_dir=tmp_path).add_store("sums")
    runner.add_input("in", [("k", 1), ("k", -1), ("k", 2)])
    with pytest.raises(TaskError, match="poison"):
        runner.run()
    with pytest.raises(TestRunnerError, match=r"call restart\(\)"):
        runner.run()  # the failed message is not skipped
    with pytest.raises(TestRunnerError, match=r"what a restart restores: call restart\(\)"):
        runner.read_store("sums")  # the changelog holds the failed message's write, which a restart trims
    # A graceful restart of a failed job still commits nothing: the failed message's write is not kept.
    result = runner.restart(crash=crash).run()
    assert result.store("sums") == {"k": 2}
    runner.close()


def test_closing_a_failed_runner_does_not_raise_its_failure_again(tmp_path):
    FAILURES["left"] = 1
    with pytest.raises(TaskError), TestRunner.of(KeyedSum, state_dir=tmp_path) as runner:
        runner.add_store("sums").add_input("in", [("k", -1)]).run()


def test_a_job_its_tasks_shut_down_is_closed_and_runs_again_only_after_a_restart(tmp_path):
    CLOSED.clear()
    with TestRunner.of(StopOnEnd, state_dir=tmp_path) as runner:
        result = runner.add_input("in", [("a", "1"), ("e", "END"), ("b", "2")]).run()
        assert result.output("out") == ["1"]
        assert CLOSED == ["closed"]  # as in Samza, the container ended: close() ran
        with pytest.raises(TestRunnerError, match=r"shut down.*restart\(\)"):
            runner.add_input("in", [("c", "3")]).run()
        assert runner.restart().run().output("out") == ["1", "2", "3"]


def test_after_a_timeout_the_next_run_goes_on(tmp_path):
    with TestRunner.of(KeyedSum, state_dir=tmp_path) as runner:
        runner.add_store("sums").add_input("in", [("k", 1)] * 2_000)
        with pytest.raises(TestRunnerError, match="timeout of 1e-06 s"):
            runner.run(timeout=0.000001)
        assert runner.run().store("sums") == {"k": 2_000}


def test_a_blob_store_backed_store_survives_a_restart_and_a_production_bucket_is_never_used(tmp_path):
    config = {
        "stores.sums.factory": "rocksdb",
        "stores.sums.key.serde": "json",
        "stores.sums.msg.serde": "json",
        "stores.sums.backup.factories": "blobstore",
        "stores.sums.restore.factories": "blobstore",
        # A production config's bucket: the test keeps its blobs in a local dir of its own.
        "blobstore.s3.bucket": "prod-bucket",
        "blobstore.s3.endpoint.url": "http://127.0.0.1:9",
    }
    with TestRunner.of(KeyedSum, state_dir=tmp_path) as runner:
        runner.with_config(config).add_input("in", [("k", 1), ("j", 2)], partitions=2).run()
        for crash in (False, True):
            result = runner.restart(crash=crash).add_input("in", [("k", 10)]).run()
        assert result.store("sums") == {"k": 21, "j": 2}
        assert list((tmp_path / "blobstore").iterdir())


# -- the task class, the clock, the config -----------------------------------------------------
def test_task_classes_made_in_a_function_run_as_given_even_when_they_share_a_name(tmp_path):
    doubled = TestRunner.of(scaler(2), state_dir=tmp_path / "2").add_input("in", [1, 5])
    tripled = TestRunner.of(scaler(3), state_dir=tmp_path / "3").add_input("in", [1, 5])
    with doubled, tripled:
        assert doubled.run().output("out") == [2, 10]
        assert tripled.run().output("out") == [3, 15]


class WindowedCount(StreamTask):
    """Counts messages in `counts` and, at each window, sends and clears the counts."""

    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        self.counts.put(envelope.key, (self.counts.get(envelope.key) or 0) + 1)

    def window(self, collector, coordinator):
        for key, n in list(self.counts.all()):
            collector.send(OutgoingMessage("kafka", "out", key=key, value=n))
            self.counts.delete(key)


def test_advance_time_processes_what_is_pending_before_the_clock_moves(tmp_path):
    config = {"task.window.ms": "60000"}
    with TestRunner.of(WindowedCount, state_dir=tmp_path) as runner:
        runner.with_config(config).add_store("counts").add_input("in", ["a", "a"])
        result = runner.advance_time(60_000)  # the job never ran before: the advance is not lost
        assert [(m.key, m.value) for m in result.messages("out")] == [("a", 2)]
        runner.add_input("in", ["b"])
        result = runner.advance_time(60_000)
        assert [(m.key, m.value) for m in result.messages("out")] == [("a", 2), ("b", 1)]
        assert result.store("counts") == {}


class Upper(StreamTask):
    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessage("events", "upper", key=envelope.key, value=envelope.value.upper()))


def test_a_config_whose_system_is_not_named_kafka_reads_its_inputs_with_that_systems_serdes(tmp_path):
    config = {
        "task.inputs": "events.words",
        "systems.events.samza.factory": "kafka",
        "systems.events.bootstrap.servers": "broker.prod:9092",
        "systems.events.samza.key.serde": "string",
        "systems.events.samza.msg.serde": "string",
        "systems.events.samza.offset.default": "upcoming",  # production's: the test still reads its inputs
    }
    with TestRunner.of(Upper, state_dir=tmp_path) as runner:
        result = runner.with_config(config).add_input("words", [("k", "ab")]).run()
        assert result.output("upper") == ["AB"]


def test_with_config_takes_lists_nested_dicts_and_job_files(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("wordcount:\n  output:\n    stream: counts-out\n")
    with TestRunner.of(WordCount, state_dir=tmp_path / "state") as runner:
        result = (
            runner.with_config(job)
            .with_config({"task.inputs": ["kafka.words", "kafka.more"]})
            .add_store("counts")
            .add_input("words", ["a"])
            .add_input("more", ["a"])
            .run()
        )
        assert sorted(result.output("counts-out")) == [1, 2]


def test_a_stream_the_task_sends_to_undeclared_is_made_and_a_wrong_name_lists_the_streams(tmp_path):
    # The pytest plugin's docstring example: WordCount sends to wordcount-counts, which the test never named.
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        result = runner.add_input("words", ["a", "a"]).add_store("counts").run()
        assert result.store("counts") == {"a": 2}
        assert result.output("wordcount-counts") == [1, 2]
        with pytest.raises(TestRunnerError, match=r"no stream 'counts'.*wordcount-counts"):
            result.output("counts")
        with pytest.raises(TestRunnerError, match="has 1 partition"):
            result.output("wordcount-counts", partition=3)


def test_a_prometheus_port_of_the_config_is_not_served_by_tests(tmp_path):
    config = {**WORDCOUNT, "metrics.prometheus.port": "19191"}
    one = TestRunner.of(WordCount, state_dir=tmp_path / "1").with_config(config)
    two = TestRunner.of(WordCount, state_dir=tmp_path / "2").with_config(config)
    with one, two:
        assert one.add_store("counts").add_input("words", ["a"]).run().output("counts-out") == [1]
        assert two.add_store("counts").add_input("words", ["a"]).run().output("counts-out") == [1]


# -- wrong usage gets errors that say what to do -------------------------------------------------
def test_builder_calls_after_the_first_run_are_refused_except_inputs_and_outputs(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        runner.with_config(WORDCOUNT).add_store("counts").add_input("words", ["a"]).run()
        for call in (
            lambda: runner.with_config({"task.commit.ms": "1"}),
            lambda: runner.add_store("counts", initial={"z": 1}),
        ):
            with pytest.raises(TestRunnerError, match=r"before the first run\(\)"):
                call()
        assert runner.add_output("other", partitions=2).run().output("other") == []
    with pytest.raises(TestRunnerError, match="the runner is closed"):
        runner.run()


def test_input_for_a_stream_the_job_does_not_consume_is_refused(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        runner.with_config({**WORDCOUNT, "task.inputs": "kafka.words"}).add_input("word", ["a"])
        with pytest.raises(TestRunnerError, match=r"does not consume stream 'word' \(its inputs: words\)"):
            runner.run()


def test_an_input_the_serde_rejects_names_stream_and_item_and_nothing_is_fed(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        runner.with_config(STRINGS).add_store("counts").add_input("words", ["a", 7, "b"])
        with pytest.raises(TestRunnerError, match=r"add_input\('words'\): item 1 \(key 7, value 7\)"):
            runner.run()
        # That add_input is dropped whole (nothing of it was sent); the test goes on.
        assert runner.add_input("words", ["a", "c"]).run().output("counts-out") == [1, 1]
    with pytest.raises(TestRunnerError, match=r"item 1 \('a', 'b', 'c'\) is a tuple of 3"):
        TestRunner.of(WordCount).add_input("words", ["x", ("a", "b", "c")])


def test_initial_contents_are_in_the_store_when_init_runs_and_are_put_once(tmp_path):
    config = {"systems.kafka.samza.key.serde": "string", "stores.sums.changelog": "kafka.sums-changelog"}
    with TestRunner.of(SeenAtInit, state_dir=tmp_path) as runner:
        runner.with_config(config).add_store("sums", initial={"k": 7}).add_output("out")
        assert runner.add_input("in", [("k", 1)]).run().output("out") == [{"k": 7}]
        # A restart restores the store through its changelog; the initial contents are not put again.
        runner.restart()
        result = runner.add_input("in", [("k", 2)]).run()
        assert [m.value for m in runner.read_stream("out")] == [{"k": 7}, {"k": 8}]
        assert result.store("sums") == {"k": 10}


def test_an_initial_value_the_store_serde_rejects_names_the_store(tmp_path):
    config = {**STRINGS, "stores.counts.factory": "inmemory", "stores.counts.msg.serde": "long"}
    with TestRunner.of(WordCount, state_dir=tmp_path) as runner:
        runner.with_config(config).add_store("counts", initial={"a": "many"}).add_input("words", ["a"])
        with pytest.raises(TestRunnerError, match=r"add_store\('counts'\): initial entry 'a': 'many'"):
            runner.run()


def test_no_input_at_all_says_add_input(tmp_path):
    with pytest.raises(TestRunnerError, match=r"add_input"):
        TestRunner.of(WordCount, state_dir=tmp_path).run()


# -- reading stores -------------------------------------------------------------------------------
def test_an_exactly_once_jobs_store_and_output_read_while_running_and_after_close(tmp_path):
    config = {**WORDCOUNT, "job.processing.guarantee": "exactly_once", "task.outputs": "kafka.counts-out"}
    runner = TestRunner.of(WordCount, state_dir=tmp_path).with_config(config).add_store("counts")
    result = runner.add_input("words", ["a", "b", "a"], partitions=2).add_output("counts-out").run()
    assert result.store("counts") == {"a": 2, "b": 1}
    assert sorted(result.output("counts-out")) == [1, 1, 2]  # the barriers are no output
    runner.close()
    assert result.store("counts") == {"a": 2, "b": 1}  # from the changelog, without its control records
    assert sorted(result.output("counts-out")) == [1, 1, 2]


class PairCount(StreamTask):
    """Counts messages per [key, value] pair: a composite (JSON list) store key."""

    def init(self, context):
        self.counts = context.store("pairs")

    def process(self, envelope, collector, coordinator):
        pair = [envelope.key, envelope.value]
        self.counts.put(pair, (self.counts.get(pair) or 0) + 1)


def test_composite_list_keys_come_back_as_tuples_live_and_from_the_changelog(tmp_path):
    runner = TestRunner.of(PairCount, state_dir=tmp_path).add_store("pairs")
    result = runner.add_input("in", [("u", "d1"), ("u", "d1"), ("u", "d2")]).run()
    assert result.store("pairs") == {("u", "d1"): 2, ("u", "d2"): 1}
    runner.close()
    assert result.store("pairs") == {("u", "d1"): 2, ("u", "d2"): 1}


def test_the_pytest_plugins_documented_example_runs_as_written(samsa_runner):
    result = samsa_runner(WordCount).add_input("words", ["a", "a"]).add_store("counts").run()
    assert result.store("counts") == {"a": 2}
