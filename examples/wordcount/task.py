"""Counts words in a RocksDB store and emits each word's running count."""

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

OUTPUT_STREAM = "wordcount-counts"


class WordCount(StreamTask):
    """Input: key = word. Output: key = word, value = its count so far, to `wordcount-counts`."""

    def init(self, context: TaskContext) -> None:
        self.counts: Any = context.store("counts")
        self.output = context.config.get("wordcount.output.stream", OUTPUT_STREAM)

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        word = envelope.key
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        collector.send(OutgoingMessage("kafka", self.output, key=word, value=count))
