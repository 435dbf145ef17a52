"""Exactly-once test pipelines: source `lines` -> split -> intermediate stages -> count -> sink `counts`.

Stage 0 (`SplitTask`) reads lines and sends each word to intermediate stream `s1`; each middle stage
(`ForwardTask`) sends every word on to the next intermediate stream; the last stage (`CountTask`) counts
each word in its RocksDB store `counts` (changelogged) and sends every new count to the sink `counts`.
Truth: per word, the sink's committed records are exactly 1, 2, ..., n and the store holds n.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from samsa.exactly_once.protocol import RecordTag, classify_message
from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.kafka.inmemory.registry import forget
from samsa.runtime.task import OutgoingMessage, StreamTask
from samsa.stores.rocksdb import RocksDbStore


class SplitTask(StreamTask):
    def init(self, context: Any) -> None:
        self.out = context.config["test.output"]

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        for word in envelope.value.split():
            collector.send(OutgoingMessage("kafka", self.out, word, word))


class ForwardTask(StreamTask):
    def init(self, context: Any) -> None:
        self.out = context.config["test.output"]

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessage("kafka", self.out, envelope.key, envelope.value))


class CountTask(StreamTask):
    def init(self, context: Any) -> None:
        self.store = context.store("counts")
        self.out = context.config["test.output"]

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        # A one-stage pipeline counts the words of the lines it reads itself.
        words = envelope.value.split() if envelope.stream.startswith("lines") else [envelope.key]
        for word in words:
            count = (self.store.get(word) or 0) + 1
            self.store.put(word, count)
            collector.send(OutgoingMessage("kafka", self.out, word, count))


class Pipeline:
    """A pipeline of `stages` exactly-once jobs on one broker (in-memory by default), and its checks."""

    def __init__(
        self,
        root: Path,
        stages: int = 2,
        tasks: tuple[int, ...] = (2, 2),
        intermediate_partitions: tuple[int, ...] = (2,),
        url: str | None = None,
    ) -> None:
        assert stages >= 1 and len(tasks) == stages and len(intermediate_partitions) == stages - 1
        self.root = root
        self.url = url or f"inmemory://eos-{uuid.uuid4().hex[:12]}"
        self.suffix = uuid.uuid4().hex[:6]
        self.stages = stages
        self.tasks = tasks
        self.intermediate_partitions = intermediate_partitions
        self.state = root / "state"
        self.lines = f"lines-{self.suffix}"
        self.sink = f"counts-{self.suffix}"
        admin = KafkaAdmin({"bootstrap.servers": self.url})
        try:
            admin.create_topic(self.lines, tasks[0])
            for i, n in enumerate(intermediate_partitions, start=1):
                admin.create_topic(self.stream(i), n)
            admin.create_topic(self.sink, 2)
        finally:
            admin.close()

    def stream(self, i: int) -> str:
        return f"s{i}-{self.suffix}"

    def feed(self, lines: list[str]) -> None:
        """Lines round-robin over the partitions; a one-stage pipeline (no repartitioning) gets one record
        per word, keyed by it, so that each word is counted by one task."""
        producer = KafkaProducer({"bootstrap.servers": self.url})
        if self.stages == 1:
            for word in (w for line in lines for w in line.split()):
                producer.send(self.lines, word.encode(), key=word.encode())
        else:
            for n, line in enumerate(lines):
                producer.send(self.lines, line.encode(), partition=n % self.tasks[0])
        producer.close()

    def configs(self, commit_ms: int = 50, containers: int = 1, **extra: str) -> list[dict[str, str]]:
        """One job config per stage; a stage reading an intermediate stream has as many tasks as its
        partitions (the grouper's rule), so `tasks[i]` of a later stage is its stream's partition count."""
        out = []
        for i in range(self.stages):
            inputs = self.lines if i == 0 else self.stream(i)
            last = i == self.stages - 1
            output = self.sink if last else self.stream(i + 1)
            task = "CountTask" if last else ("SplitTask" if i == 0 else "ForwardTask")
            config = {
                "job.name": f"stage{i}-{self.suffix}",
                "job.processing.guarantee": "exactly_once",
                "task.class": f"eos_pipeline:{task}",
                "task.inputs": f"kafka.{inputs}",
                "task.outputs": f"kafka.{output}",
                "test.output": output,
                "task.commit.ms": str(commit_ms),
                # Containers start at different steps: their tasks cut versions out of step.
                "job.container.count": str(min(containers, self.tasks[i])),
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": self.url,
                "systems.kafka.samza.key.serde": "string",
                "systems.kafka.samza.msg.serde": "string",
                "systems.kafka.samza.offset.default": "oldest",
                f"systems.kafka.streams.{self.sink}.samza.msg.serde": "long",
                "job.non-logged.store.base.dir": str(self.state),
                "job.logged.store.base.dir": str(self.state),
            }
            for s in (inputs, output):
                if s.startswith("s"):
                    config[f"systems.kafka.streams.{s}.samza.intermediate"] = "true"
            if last:
                config.update(
                    {
                        "stores.counts.factory": "rocksdb",
                        "stores.counts.key.serde": "string",
                        "stores.counts.msg.serde": "long",
                        "stores.counts.changelog": f"kafka.counts-log-{self.suffix}",
                        "stores.counts.object.cache.size": "8",
                        "stores.counts.write.batch.size": "4",
                    }
                )
            config.update(extra)
            out.append(config)
        return out

    def sink_records(self) -> dict[str, list[int]]:
        """Per word, the counts the sink holds for read_committed consumers, in order."""
        consumer = KafkaConsumer({"bootstrap.servers": self.url, "isolation.level": "read_committed"})
        try:
            out: dict[str, list[int]] = defaultdict(list)
            ends = {(self.sink, p): consumer.watermarks((self.sink, p))[1] for p in range(2)}
            ends = {tp: end for tp, end in ends.items() if end > 0}
            consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
            deadline = time.monotonic() + 30
            # read_committed: the tail may be an aborted transaction's records, which the position skips.
            while any(consumer.position([tp]).get(tp, -1) < end for tp, end in ends.items()):
                assert time.monotonic() < deadline, f"the sink did not read to its end {ends}"
                for m in consumer.consume(10_000, 0.05):
                    out[m.key().decode()].append(struct.unpack(">q", m.value())[0])
            return dict(out)
        finally:
            consumer.close()

    def changelog(self) -> tuple[dict[str, int], Counter[str]]:
        """What the count store's changelog describes (per word, its last count; control records aside) and
        how many records of each kind it holds: `data` (tagged writes), `untagged`, `marker` (commit
        records), `restore` (abort records)."""
        topic = f"counts-log-{self.suffix}"
        consumer = KafkaConsumer({"bootstrap.servers": self.url})
        try:
            parts = self.tasks[-1]
            ends = {(topic, p): consumer.watermarks((topic, p))[1] for p in range(parts)}
            ends = {tp: end for tp, end in ends.items() if end > 0}
            consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
            state: dict[str, int] = {}
            kinds: Counter[str] = Counter()
            deadline = time.monotonic() + 30
            while any(consumer.position([tp]).get(tp, -1) < end for tp, end in ends.items()):
                assert time.monotonic() < deadline, f"the changelog did not read to its end {ends}"
                for m in consumer.consume(10_000, 0.05):
                    tag = classify_message(m)
                    kind = "untagged" if tag is None else type(tag).__name__
                    kinds[
                        {"RecordTag": "data", "Marker": "marker", "RestoreCommand": "restore"}.get(kind, kind)
                    ] += 1
                    if tag is None or type(tag) is RecordTag:
                        key, value = m.key().decode(), m.value()
                        if value is None:
                            state.pop(key, None)
                        else:
                            state[key] = struct.unpack(">q", value)[0]
            return state, kinds
        finally:
            consumer.close()

    def store(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for path in sorted(self.state.rglob("counts")):
            if (path / "CURRENT").exists() and f"stage{self.stages - 1}" in str(path):
                db = RocksDbStore(path, name="counts")
                try:
                    total += Counter({k.decode(): struct.unpack(">q", v)[0] for k, v in db.all()})
                finally:
                    db.close()
        return total

    def run_in_turn(self, seed: int, *configs: dict[str, str]) -> None:
        """Runs each job to its end before the next starts (a downstream job then catches up)."""
        from samsa.testing.scheduler import DeterministicScheduler

        for config in configs:
            scheduler = DeterministicScheduler(seed)
            scheduler.add_job(config)
            scheduler.run()

    def close(self) -> None:
        """Forgets an in-memory broker; deletes the pipeline's topics from a real one."""
        if self.url.startswith("inmemory://"):
            forget(self.url)
            return
        admin = KafkaAdmin({"bootstrap.servers": self.url})
        try:
            admin.delete_topics([t for t in admin.metadata().topics if self.suffix in t])
        finally:
            admin.close()


def truth(lines: list[str]) -> Counter[str]:
    return Counter(word for line in lines for word in line.split())
