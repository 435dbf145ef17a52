"""Fixtures for the deterministic scheduler tests: a word-count job on a fresh in-memory broker."""

import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from count_job import store_counts

from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.kafka.inmemory.registry import forget


class WordCountSetup:
    """A word-count job (`CountTask`, RocksDB store `counts` with a changelog) over `words` on its own
    in-memory broker and state directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"inmemory://sched-{uuid.uuid4().hex[:12]}"
        self.state = root / "state"

    def config(
        self, words: list[str], partitions: int = 4, containers: int = 1, commit_ms: int = 100, **extra: str
    ) -> dict[str, str]:
        admin = KafkaAdmin({"bootstrap.servers": self.url})
        try:
            admin.create_topic("words", partitions)
            admin.create_topic("counts", partitions)
        finally:
            admin.close()
        producer = KafkaProducer({"bootstrap.servers": self.url})
        for word in words:
            producer.send("words", word.encode(), key=word.encode())
        producer.close()
        return {
            "job.name": "wordcount",
            "task.class": "samsa_test_tasks:CountTask",
            "task.inputs": "kafka.words",
            "test.output": "counts",
            "task.commit.ms": str(commit_ms),
            "job.container.count": str(containers),
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.bootstrap.servers": self.url,
            "systems.kafka.samza.key.serde": "string",
            "systems.kafka.samza.msg.serde": "string",
            "systems.kafka.streams.counts.samza.msg.serde": "long",
            "systems.kafka.samza.offset.default": "oldest",
            "job.non-logged.store.base.dir": str(self.state),
            "job.logged.store.base.dir": str(self.state),
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.changelog": "kafka.counts-log",
            "stores.counts.object.cache.size": "8",
            "stores.counts.write.batch.size": "4",
            **extra,
        }

    def store(self) -> Counter[str]:
        """The counts of every task's live `counts` store, summed (each word lives in one task)."""
        total: Counter[str] = Counter()
        for path in sorted(self.state.rglob("counts")):
            if (path / "CURRENT").exists():
                total += store_counts(path)
        return total

    def last_outputs(self) -> dict[str, int]:
        """The last count sent per word to `counts` (outputs repeat after a crash: the last one counts)."""
        consumer = KafkaConsumer({"bootstrap.servers": self.url})
        try:
            partitions = KafkaAdmin({"bootstrap.servers": self.url}).require_topics(["counts"])["counts"]
            ends = {("counts", p): consumer.watermarks(("counts", p))[1] for p in range(partitions)}
            consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
            last: dict[str, int] = {}
            remaining = sum(ends.values())
            while remaining > 0:
                msgs = consumer.consume(10_000, 0)
                assert msgs, "the output topic ended early"
                for m in msgs:
                    last[m.key().decode()] = int.from_bytes(m.value(), "big", signed=True)
                remaining -= len(msgs)
            return last
        finally:
            consumer.close()

    def close(self) -> None:
        forget(self.url)


@pytest.fixture
def wordcount(tmp_path: Path) -> Iterator[Callable[[], WordCountSetup]]:
    """Factory of word-count setups, each on its own broker and state dir under the test's tmp dir."""
    made: list[WordCountSetup] = []

    def make() -> WordCountSetup:
        setup = WordCountSetup(tmp_path / f"run{len(made)}")
        made.append(setup)
        return setup

    yield make
    for setup in made:
        setup.close()
