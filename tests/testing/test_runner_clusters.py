"""The TestRunner gives each Kafka cluster of a job (systems of equal bootstrap.servers) its own in-memory
broker: a cross-cluster mirror job, reading `events` on one cluster and writing `events` on another, runs
and reads back by system (`system=`), through restarts, crashes and exactly-once."""

from __future__ import annotations

import gc
import weakref

import pytest

from samsa import OutgoingMessage, StreamTask
from samsa.kafka.inmemory import broker
from samsa.testing import Message, TestRunner, TestRunnerError

#: Samza's classic mirror: `events` of cluster dc1 copied to `events` of cluster dc2.
MIRROR = {
    "task.inputs": "source.events",
    "task.outputs": "dest.events",
    "systems.source.samza.factory": "kafka",
    "systems.source.bootstrap.servers": "dc1-a:9092,dc1-b:9092",
    "systems.dest.samza.factory": "kafka",
    "systems.dest.bootstrap.servers": "dc2:9092",
}
EXACTLY_ONCE = {"job.processing.guarantee": "exactly_once", "task.checkpoint.system": "dest"}


class Mirror(StreamTask):
    """Copies each message to the stream of the same name on system `dest`."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessage("dest", envelope.stream, key=envelope.key, value=envelope.message))


class CountingMirror(StreamTask):
    """Mirror, counting the copies per key in store `copied`."""

    def init(self, context):
        self.copied = context.store("copied")

    def process(self, envelope, collector, coordinator):
        self.copied.put(envelope.key, (self.copied.get(envelope.key) or 0) + 1)
        collector.send(OutgoingMessage("dest", envelope.stream, key=envelope.key, value=envelope.message))


class SideOutput(StreamTask):
    """Copies each message to `copies` on system `dest`, a stream no config lists."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessage("dest", "copies", key=envelope.key, value=envelope.message))


class CopyToB(StreamTask):
    """Copies each message of `in` to `copy` on system `b`."""

    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessage("b", "copy", key=envelope.key, value=envelope.message))


def pairs(messages: list[Message]) -> list[tuple[object, object]]:
    return [(m.key, m.value) for m in messages]


def test_a_mirror_job_reads_one_cluster_and_writes_the_same_name_on_the_other(tmp_path):
    with TestRunner.of(Mirror, state_dir=tmp_path).with_config(MIRROR) as runner:
        result = runner.add_input("events", [("a", 1), ("b", 2)]).run()
        assert pairs(result.messages("events", system="dest")) == [("a", 1), ("b", 2)]
        assert pairs(result.messages("events", system="source")) == [("a", 1), ("b", 2)]
        # A later feed goes to the source cluster only: its copies once more on dest, nothing else.
        result = runner.add_input("events", [("c", 3)], system="source").run()
        assert result.output("events", system="source") == [1, 2, 3]
        assert result.output("events", system="dest") == [1, 2, 3]
        assert result.output_by_partition("events", system="dest") == {0: [1, 2, 3]}
        # Records sent without a timestamp on the other cluster take the runner's clock too.
        now = int(runner.clock() * 1000)
        assert {m.timestamp for m in result.messages("events", system="dest")} == {now}


def test_two_systems_of_one_cluster_share_their_topics_and_another_cluster_has_its_own(tmp_path):
    config = {
        "task.inputs": "a.in",
        "systems.a.samza.factory": "kafka",
        "systems.a.bootstrap.servers": "shared:9092",
        "systems.b.samza.factory": "kafka",
        "systems.b.bootstrap.servers": " shared:9092 ",
        "systems.c.samza.factory": "kafka",
        "systems.c.bootstrap.servers": "other:9092",
    }
    with TestRunner.of(CopyToB, state_dir=tmp_path).with_config(config) as runner:
        # Fed through system b, read by the job's a.in: one cluster, one topic, as on Kafka.
        result = runner.add_input("in", [("k", "v")], system="b").run()
        assert pairs(result.messages("copy", system="a")) == [("k", "v")]
        assert pairs(result.messages("copy", system="b")) == [("k", "v")]
        with pytest.raises(TestRunnerError, match=r"no stream 'copy' on system 'c'.*pass system='a'"):
            result.messages("copy", system="c")


def test_a_name_the_job_has_on_two_clusters_needs_system(tmp_path):
    with TestRunner.of(Mirror, state_dir=tmp_path).with_config(MIRROR) as runner:
        # add_input looks among the job's inputs: only source.events is one.
        result = runner.add_input("events", [("a", 1)]).run()
        with pytest.raises(TestRunnerError, match=r"'events' on systems 'dest' and 'source'.*system="):
            result.messages("events")
        with pytest.raises(TestRunnerError, match=r"'dest' and 'source'.*system="):
            result.output_by_partition("events")
    both = {**MIRROR, "task.outputs": "source.events,dest.events"}
    with TestRunner.of(Mirror, state_dir=tmp_path / "both").with_config(both) as runner:
        runner.add_input("events", [("a", 1)], system="source").add_output("events")
        with pytest.raises(TestRunnerError, match=r"add_output\('events'\).*'dest' and 'source'"):
            runner.run()


def test_a_system_the_job_does_not_have_is_an_error_listing_its_systems(tmp_path):
    with TestRunner.of(Mirror, state_dir=tmp_path).with_config(MIRROR) as runner:
        runner.add_input("events", [("a", 1)], system="dset")
        with pytest.raises(
            TestRunnerError, match=r"no system 'dset' \(its systems: dest, kafka, source\).*dropped"
        ):
            runner.run()
        # Dropped: the runner goes on once the test names a system of the job.
        result = runner.add_input("events", [("b", 2)], system="source").run()
        assert result.output("events", system="dest") == [2]
        with pytest.raises(TestRunnerError, match=r"no system 'dset' \(its systems: dest, kafka, source\)"):
            result.messages("events", system="dset")
        with pytest.raises(TestRunnerError, match=r"no system 'dset'"):
            runner.add_output("more", system="dset")
    with TestRunner.of(Mirror, state_dir=tmp_path / "out").with_config(MIRROR) as runner:
        runner.add_input("events", [("a", 1)]).add_output("events", system="dset")
        with pytest.raises(TestRunnerError, match=r"add_output\('events', system='dset'\).*it is dropped"):
            runner.run()
        assert runner.run().output("events", system="dest") == [1]


def test_each_cluster_keeps_the_partition_count_the_test_gave_its_stream(tmp_path):
    config = {k: v for k, v in MIRROR.items() if k != "task.outputs"}
    with TestRunner.of(Mirror, state_dir=tmp_path).with_config(config) as runner:
        # add_output(system=) lists dest.events in task.outputs; the job's source.events has 4 partitions.
        runner.add_input("events", {3: [("a", 1)]}, partitions=4).add_output("events", 2, system="dest")
        result = runner.run()
        assert result.output_by_partition("events", system="source") == {3: [1]}
        assert result.output_by_partition("events", system="dest") == {1: [1]}  # murmur2 of "a", of 2
        assert result.messages("events", partition=0, system="dest") == []
        with pytest.raises(TestRunnerError, match=r"'events' has 2 partition\(s\), no partition 2"):
            result.messages("events", partition=2, system="dest")


def test_a_stream_sent_to_undeclared_on_another_cluster_is_made_there(tmp_path):
    with TestRunner.of(SideOutput, state_dir=tmp_path).with_config(MIRROR) as runner:
        result = runner.add_input("events", [("a", 1)]).run()
        assert pairs(result.messages("copies", system="dest")) == [("a", 1)]
        with pytest.raises(
            TestRunnerError, match=r"no stream 'copies' on system 'kafka'.*pass system='dest'"
        ):
            result.messages("copies")


@pytest.mark.parametrize("crash", [False, True])
def test_a_mirror_job_with_a_changelog_on_the_other_cluster_restarts(tmp_path, crash):
    config = {**MIRROR, "stores.copied.changelog": "dest.mirror-copied-changelog"}
    with TestRunner.of(CountingMirror, state_dir=tmp_path).with_config(config) as runner:
        runner.add_store("copied", initial={"a": 10})
        result = runner.add_input("events", [("a", 1), ("b", 2)]).run()
        runner.restart(crash=crash)
        if not crash:  # stopped with a final commit: read from its changelog, on the dest cluster
            assert result.store("copied") == {"a": 11, "b": 1}
        result = runner.add_input("events", [("a", 3)]).run()
        assert result.store("copied") == {"a": 12, "b": 1}  # restored from dest's changelog
        assert result.output("events", system="dest") == [1, 2, 3]
        assert result.output("events", system="source") == [1, 2, 3]
        changelog = result.messages("mirror-copied-changelog", raw=True)
        assert changelog == result.messages("mirror-copied-changelog", system="dest", raw=True)
        assert {m.key for m in changelog} == {b'"a"', b'"b"'}
        with pytest.raises(TestRunnerError, match=r"no stream 'mirror-copied-changelog' on system 'source'"):
            result.messages("mirror-copied-changelog", system="source")
        runner.restart()
        assert result.store("copied") == {"a": 12, "b": 1}  # read back from dest's changelog


def test_a_mirror_jobs_default_changelog_is_on_the_default_systems_cluster(tmp_path):
    with TestRunner.of(CountingMirror, state_dir=tmp_path).with_config(MIRROR) as runner:
        result = runner.add_store("copied").add_input("events", [("a", 1)]).run()
        runner.restart(crash=True)
        result = runner.add_input("events", [("a", 2)]).run()
        assert result.store("copied") == {"a": 2}
        assert len(result.messages("countingmirror-copied-changelog", system="kafka", raw=True)) == 2


@pytest.mark.parametrize("crash", [False, True])
def test_an_exactly_once_mirror_reads_back_by_system(tmp_path, crash):
    with TestRunner.of(CountingMirror, state_dir=tmp_path).with_config({**MIRROR, **EXACTLY_ONCE}) as runner:
        runner.add_store("copied")
        result = runner.add_input("events", [("a", 1), ("b", 2)]).run()
        assert pairs(result.messages("events", system="dest")) == [("a", 1), ("b", 2)]
        runner.restart(crash=crash)
        result = runner.add_input("events", [("a", 3)]).run()
        assert pairs(result.messages("events", system="dest")) == [("a", 1), ("b", 2), ("a", 3)]
        assert pairs(result.messages("events", system="source")) == [("a", 1), ("b", 2), ("a", 3)]
        assert result.store("copied") == {"a": 2, "b": 1}
        # The sink is written in transactions on dest: its commit markers take offsets there.
        offsets = [m.offset for m in result.messages("events", system="dest", raw=True)]
        assert offsets != list(range(len(offsets)))


def test_every_clusters_records_go_once_runner_and_results_are_gone(tmp_path):
    with TestRunner.of(Mirror, state_dir=tmp_path).with_config(MIRROR) as runner:
        result = runner.add_input("events", [("a", 1)]).run()
    urls = set(runner._urls.values())
    assert len(urls) == 3  # source, dest and the default system kafka
    systems = [weakref.ref(broker(url)) for url in urls]
    del runner
    gc.collect()
    assert all(system() is not None for system in systems), "a result still reads from them"
    assert result.output("events", system="dest") == [1]
    del result
    gc.collect()
    assert all(system() is None for system in systems), "a test session's runners must not keep their records"


def test_without_system_add_input_and_add_output_name_the_jobs_input_and_output(tmp_path):
    with TestRunner.of(Mirror, state_dir=tmp_path).with_config(MIRROR) as runner:
        # source.events (an input) and dest.events (an output): two topics, two counts.
        result = runner.add_input("events", {1: [("a", 1)]}, partitions=2).add_output("events", 3).run()
        assert result.output_by_partition("events", system="source") == {1: [1]}
        assert result.output_by_partition("events", system="dest") == {2: [1]}  # murmur2 of "a", of 3
        with pytest.raises(TestRunnerError, match=r"'events' has 2 partition\(s\), no partition 2"):
            result.messages("events", partition=2, system="source")


def test_other_counts_for_one_topic_are_refused_at_the_first_run(tmp_path):
    config = {
        "task.inputs": "a.in",
        "systems.a.samza.factory": "kafka",
        "systems.a.bootstrap.servers": "shared:9092",
        "systems.b.samza.factory": "kafka",
        "systems.b.bootstrap.servers": "shared:9092",
    }
    with TestRunner.of(CopyToB, state_dir=tmp_path).with_config(config) as runner:
        # b.in is a.in's topic: the output declaration's count conflicts with the input's.
        runner.add_input("in", [("k", "v")], partitions=2).add_output("in", 3, system="b")
        with pytest.raises(
            TestRunnerError, match=r"add_output\('in', partitions=3\): b.in is the topic that "
        ):
            runner.run()
