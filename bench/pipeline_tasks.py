"""The two tasks of bench/pipeline.py's exactly-once pipeline: split lines into words, count the words.

Imported by the jobs' container processes as `pipeline_tasks` (bench/pipeline.py puts bench/ on their
PYTHONPATH), so it imports nothing but Samsa's task API.
"""

from __future__ import annotations

from typing import Any

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)


class SplitWords(StreamTask):
    """Input: a line of text. Output: each of its words, keyed by the word, to `pipeline.words.stream`."""

    def init(self, context: TaskContext) -> None:
        self.out = context.config["pipeline.words.stream"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        for word in envelope.value.split():
            collector.send(OutgoingMessage("kafka", self.out, key=word, value=word))


class CountWords(StreamTask):
    """Input: words keyed by word. Counts each in the RocksDB store `counts`; sends (word, count so far)
    to `pipeline.counts.stream`."""

    def init(self, context: TaskContext) -> None:
        self.counts: Any = context.store("counts")
        self.out = context.config["pipeline.counts.stream"]

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        word = envelope.key
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        collector.send(OutgoingMessage("kafka", self.out, key=word, value=count))
