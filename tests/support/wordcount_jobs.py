"""The word count example as a job with a changelogged store, its input words and its latest counts read
back: for tests that change a job between runs on the session broker."""

from __future__ import annotations

import time
from typing import Any

from samsa.kafka import KafkaConsumer

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date"]


def changelogged_wordcount(
    job_config: Any, inputs: str | list[str], out: str, changelog: str, **extra: str
) -> dict[str, str]:
    """The word count job over `inputs` (a topic or several), its counts kept in a changelogged store."""
    topics = [inputs] if isinstance(inputs, str) else inputs
    return job_config(
        ",".join(f"kafka.{t}" for t in topics),
        out,
        task="samsa.examples.wordcount.task:WordCount",
        **{
            "job.container.count": "1",
            "wordcount.output.stream": out,
            "task.outputs": f"kafka.{out}",
            f"systems.kafka.streams.{out}.samza.msg.serde": "long",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.changelog": f"kafka.{changelog}",
            **extra,
        },
    )


def seeded_words(n: int, seed: int) -> list[tuple[str, str]]:
    """`n` (word, word number) records, the words in an order `seed` shifts."""
    return [(WORDS[(i * 3 + seed) % len(WORDS)], str(i)) for i in range(n)]


def latest_counts(bootstrap: str, out: str) -> dict[str, int]:
    """Each word's latest count in the (one partition) output, as a read_committed consumer sees it: an
    exactly-once job's output ends with transaction markers, no records."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    latest: dict[str, int] = {}
    try:
        end = consumer.watermarks((out, 0))[1]
        consumer.assign({(out, 0): 0})
        deadline = time.monotonic() + 30
        while end and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                word, count = m.key().decode(), int.from_bytes(m.value(), "big", signed=True)
                latest[word] = max(latest.get(word, 0), count)
            if consumer.position([(out, 0)])[(out, 0)] >= end:
                break
        else:
            assert not end, f"could not read {out} to its end {end}"
    finally:
        consumer.close()
    return latest
