"""The TestRunner's bulk feed and read-back: what the records keep (offsets, keys, headers, timestamps), the
messages read back, the serdes' own errors, the garbage collector left as it was, and blank config keys."""

from __future__ import annotations

import gc

import pytest

from samsa import OutgoingMessage, StreamTask
from samsa.examples.wordcount.task import WordCount
from samsa.kafka.inmemory import broker
from samsa.testing import Message, TestRunner, TestRunnerError

WORDCOUNT = {"wordcount.output.stream": "counts-out"}
STRINGS = {
    "systems.kafka.samza.key.serde": "string",
    "systems.kafka.samza.msg.serde": "string",
    "systems.kafka.streams.counts-out.samza.msg.serde": "long",
}


class Stamps(StreamTask):
    """Sends each message's [value, timestamp, headers] to `out`, keyed as it came."""

    def process(self, envelope, collector, coordinator):
        headers = [[k, None if v is None else v.decode()] for k, v in envelope.headers or ()]
        value = [envelope.message, envelope.timestamp, headers]
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=value))


def test_a_batch_feed_keeps_each_records_timestamp_headers_partition_and_order(tmp_path):
    items = [
        Message("a", key="k", partition=1, timestamp=5_000, headers=[("h", b"1")]),
        Message("b", key="j", partition=0),
        Message("c", key="k", partition=1),  # no timestamp: the runner's clock
        Message("d", key="j", partition=0, timestamp=0),  # 0 is none, as for Kafka's producer
        Message("e", key="k", partition=1, timestamp=7, headers=[("h", b"2"), ("n", None)]),
    ]
    with TestRunner.of(Stamps, state_dir=tmp_path) as runner:
        result = runner.add_output("out").add_input("in", items, partitions=2).run()
        now = int(runner.clock() * 1000)
        fed = [(m.partition, m.offset, m.key, m.value, m.timestamp, m.headers) for m in result.messages("in")]
        assert fed == [
            (0, 0, "j", "b", now, ()),
            (0, 1, "j", "d", now, ()),
            (1, 0, "k", "a", 5_000, (("h", b"1"),)),
            (1, 1, "k", "c", now, ()),
            (1, 2, "k", "e", 7, (("h", b"2"), ("n", None))),
        ]
        # The job reads each record with its timestamp and headers, in the order fed per partition.
        seen: dict[str, list[object]] = {}
        for m in result.messages("out"):
            seen.setdefault(m.key, []).append(m.value)
        assert seen == {
            "j": [["b", now, []], ["d", now, []]],
            "k": [["a", 5_000, [["h", "1"]]], ["c", now, []], ["e", 7, [["h", "2"], ["n", None]]]],
        }


def test_messages_read_back_equal_messages_built_with_their_fields(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path).with_config(WORDCOUNT) as runner:
        result = runner.add_input("words", ["a", "b", "a"]).add_output("counts-out").add_store("counts").run()
        now = int(runner.clock() * 1000)
        read = result.messages("counts-out")
        built = [
            Message(1, key="a", partition=0, timestamp=now, offset=0),
            Message(1, key="b", partition=0, timestamp=now, offset=1),
            Message(2, key="a", partition=0, timestamp=now, offset=2),
        ]
        assert read == built
        assert [hash(m) for m in read] == [hash(m) for m in built]
        assert [repr(m) for m in read] == [repr(m) for m in built]
        with pytest.raises(AttributeError):
            read[0].value = 5  # type: ignore[misc]  # frozen, as any Message


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_back_leaves_the_garbage_collector_as_it_was(tmp_path, enabled):
    with TestRunner.of(WordCount, state_dir=tmp_path).with_config(WORDCOUNT) as runner:
        result = runner.add_input("words", ["a", "b"]).add_output("counts-out").add_store("counts").run()
        was = gc.isenabled()
        try:
            gc.enable() if enabled else gc.disable()
            assert result.output("counts-out") == [1, 1]
            assert gc.isenabled() is enabled
            broker(runner._bootstrap).append_batch("counts-out", 0, [(b'"c"', b"{not json", 1, None)])
            with pytest.raises(TestRunnerError, match="does not deserialize"):
                result.output("counts-out")
            assert gc.isenabled() is enabled
        finally:
            gc.enable() if was else gc.disable()


def test_an_input_or_output_a_fast_serde_path_refuses_is_explained_by_the_serdes_own_error(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path).with_config({**WORDCOUNT, **STRINGS}) as runner:
        runner.add_store("counts").add_input("words", ["a", 7])
        with pytest.raises(
            TestRunnerError, match=r"item 1 \(key 7, value 7\) does not serialize: .*expected str"
        ):
            runner.run()
        result = runner.add_input("words", ["a"]).run()
        broker(runner._bootstrap).append_batch("words", 0, [(b"k", b"\xff\xfe", 1, None)])
        with pytest.raises(TestRunnerError, match=r"stream 'words' partition 0 offset 1: .*not valid utf-8"):
            result.messages("words")


def test_a_blank_adstore_input_leaves_the_store_a_regular_one(tmp_path):
    # Blank means unset, as everywhere in the config: the store gets the runner's defaults and a changelog.
    for blank in ("", "  "):
        config = {**WORDCOUNT, "stores.counts.adstore.input": blank}
        with TestRunner.of(WordCount, state_dir=tmp_path / f"b{len(blank)}").with_config(config) as runner:
            result = runner.add_input("words", ["a", "b", "a"]).add_store("counts", initial={"b": 1}).run()
            assert result.store("counts") == {"a": 2, "b": 2}
            runner.restart()  # local state gone: restored from the changelog
            assert runner.add_input("words", ["b"]).run().store("counts") == {"a": 2, "b": 3}


class NumberingSerde:
    """Text with a count of the calls so far: not a pure function, so each record is serialized anew."""

    def __init__(self) -> None:
        self.calls = 0

    def to_bytes(self, obj):
        self.calls += 1
        return f"{obj}#{self.calls}".encode()

    def from_bytes(self, data):
        return data.decode()


class Nothing(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass


def test_a_repeated_item_is_serialized_anew_by_a_serde_that_is_not_a_built_in_one(tmp_path):
    # Built-in serdes are pure functions, so a repeated bare string reuses their bytes; any other serde is
    # called for every record, as a producer would.
    config = {
        "serializers.registry.numbered.class": f"{__name__}:NumberingSerde",
        "systems.kafka.streams.words.samza.msg.serde": "numbered",
        "systems.kafka.streams.words.samza.key.serde": "string",
    }
    with TestRunner.of(Nothing, state_dir=tmp_path).with_config(config) as runner:
        result = runner.add_input("words", ["a", "a", "b", "a"]).add_input("plain", ["a", "a"]).run()
        assert [(m.key, m.value) for m in result.messages("words")] == [
            ("a", "a#1"),
            ("a", "a#2"),
            ("b", "b#3"),
            ("a", "a#4"),
        ]
        assert [(m.offset, m.key, m.value) for m in result.messages("plain")] == [
            (0, "a", "a"),
            (1, "a", "a"),
        ]
