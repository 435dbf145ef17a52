"""Every start of a container fences the older ones, with no driver: a second copy of container 0 started
on another host (its own state dir, the same job) takes over, and the first stops without committing."""

from __future__ import annotations

import random
import struct
import time
from collections import Counter
from pathlib import Path

import pytest
import systems_fixtures
from background import Background, wait_for
from count_job import count_job, store_counts

from samsa.checkpoint.exceptions import CheckpointFencedError
from samsa.checkpoint.kafka_manager import EPOCH_HEADER, OWNER_KEY, checkpoint_topic
from samsa.checkpoint.starts import StartWatch
from samsa.kafka import OFFSET_BEGINNING, KafkaConsumer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager

# Every test here runs on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin

KEYS = [f"k{i}" for i in range(1500)]


def _on_host(config: dict[str, str], base: Path, **extra: str) -> JobConfig:
    """The job as a start on another machine sees it: the same job, its own state dirs."""
    dirs = {"job.logged.store.base.dir": str(base), "job.non-logged.store.base.dir": str(base)}
    return JobConfig(Config({**config, **dirs, **extra}))


def _checkpointed(job: JobConfig) -> int:
    """Input messages the job's checkpoints say were processed."""
    return sum(o for cp in checkpoint_manager(job).read_last().values() for o in cp.offsets.values())


def _held(job: JobConfig) -> Counter[str]:
    """The counts in the job's stores on its host."""
    held: Counter[str] = Counter()
    for partition in range(2):
        held += store_counts(job.logged_store_dir / job.job_key / f"Partition_{partition}" / "counts")
    return held


def _epochs(bootstrap: str, job: JobConfig) -> list[int]:
    """The epoch header of every committed checkpoint record, in order."""
    topic = checkpoint_topic(job.name, job.id)
    out = []
    with KafkaConsumer({"bootstrap.servers": bootstrap}) as consumer:
        _, high = consumer.watermarks((topic, 0))
        consumer.assign({(topic, 0): OFFSET_BEGINNING})
        deadline = time.monotonic() + 30
        while consumer.position([(topic, 0)]).get((topic, 0), -1) < high:
            assert time.monotonic() < deadline, f"could not read {topic} to {high}"
            records = [m for m in consumer.consume(1000, 0.2) if m.key() != OWNER_KEY]  # not a checkpoint
            out += [int(dict(m.headers() or [])[EPOCH_HEADER]) for m in records]
    return out


@pytest.fixture
def counts(job_config, topics, kafka_admin) -> dict[str, str]:
    """The changelog-backed count job, its stores' cache and batches at their defaults (the changelog is
    written at commits), its input and output on two partitions."""
    words, out = topics(2), topics(2)
    changelog = f"{words}-counts-changelog"
    yield count_job(
        job_config,
        words,
        out,
        **{
            "stores.counts.changelog": f"kafka.{changelog}",
            "stores.counts.object.cache.size": "1000",
            "stores.counts.write.batch.size": "500",
            "task.commit.ms": "100",
        },
    )
    kafka_admin.delete_topics([changelog])


def _assert_names_the_newer_start(error: BaseException | None, older: Container, newer: Container) -> None:
    assert isinstance(error, CheckpointFencedError), repr(error)
    message = str(error)
    assert f"container 0 of job {older.job.job_key} was started again" in message
    assert f"this start (epoch {older.epoch} on host" in message
    assert f"took over (epoch {newer.epoch} on host" in message
    assert "stops without committing" in message


def test_a_second_start_elsewhere_fences_the_first_and_every_input_counts_once(
    counts, produce, read_topic, kafka_bootstrap, tmp_path
):
    # The review's split brain: a slow copy of container 0 holds processed counts in its store cache when a
    # replacement starts on another host. Were it to flush them at its next commit (the broker would refuse
    # only the checkpoint), the changelog would end with its stale counts; it must stop at once instead.
    words = JobConfig(Config(counts)).inputs[0].stream
    inputs = random.Random(5).choices(KEYS, k=2000)
    produce(words, [(k, k) for k in inputs])
    slow = _on_host(counts, tmp_path / "host-a", **{"test.sleep.us": "2000", "task.commit.ms": "3000"})
    model = JobCoordinator(slow).prepare().container("0")
    older = Container(slow, model)
    run_a = Background(older.run)
    wait_for(
        lambda: sum(o for t in older.tasks for o in t.offsets.values()) >= 300, 30, "the first start busy"
    )

    fast = _on_host(counts, tmp_path / "host-b")
    newer = Container(fast, model)
    run_b = Background(newer.run)
    run_a.join(30)
    assert not run_a.thread.is_alive(), "the older start went on after a newer one took over"
    _assert_names_the_newer_start(run_a.error, older, newer)

    more = random.Random(6).choices(KEYS, k=200)
    produce(words, [(k, k) for k in more])
    wait_for(lambda: _checkpointed(fast) == 2200, 30, "the second start's checkpoint of all input")
    newer.stop()
    run_b.join(30)
    assert run_b.error is None, repr(run_b.error)

    # The older start committed nothing once the newer one had (the newer one's start-up commit on).
    epochs = _epochs(kafka_bootstrap, fast)
    assert older.epoch not in epochs[epochs.index(newer.epoch) :]
    # The newer start's state counts every input once, and no output counts one twice (the older start's
    # last outputs may still follow the newer one's: outputs are at-least-once)...
    expected = Counter(inputs + more)
    assert _held(fast) == expected
    highest: dict[str, int] = {}
    for _, _, key, value in read_topic(JobConfig(Config(counts)).config["test.output"]):
        highest[key.decode()] = max(highest.get(key.decode(), 0), struct.unpack(">q", value)[0])
    assert highest == expected
    # ...and so does a third host restoring the job from its changelog and checkpoints.
    restored = _on_host(counts, tmp_path / "host-c")
    Container(restored, model, until_caught_up=True).run()
    assert _held(restored) == expected


def test_an_older_start_that_missed_the_newer_ones_record_is_refused_its_next_checkpoint(
    counts, produce, kafka_bootstrap, tmp_path, monkeypatch
):
    # Should the watch miss the newer start's record, the broker still refuses the older start's next
    # checkpoint transaction: it stops there, and looks the newer start up to name it.
    monkeypatch.setattr(StartWatch, "look", lambda self: None)
    job = _on_host(counts, tmp_path / "host-a")
    produce(job.inputs[0].stream, [(k, k) for k in KEYS[:50]])
    model = JobCoordinator(job).prepare().container("0")
    older = Container(job, model)
    run_a = Background(older.run)
    wait_for(lambda: _checkpointed(job) == 50, 30, "the first start's checkpoint")

    newer = Container(_on_host(counts, tmp_path / "host-b"), model)
    run_b = Background(newer.run)
    # An idle start writes no checkpoint (its timer's commits are left out): once the newer start has
    # fenced it, new input gives the older one a checkpoint to write.
    wait_for(lambda: newer.epoch in _epochs(kafka_bootstrap, job), 30, "the newer start's checkpoint")
    produce(job.inputs[0].stream, [(k, k) for k in KEYS[50:52]])
    run_a.join(30)
    assert not run_a.thread.is_alive(), "the older start went on after a newer one took over"
    _assert_names_the_newer_start(run_a.error, older, newer)
    newer.stop()
    run_b.join(30)
    assert run_b.error is None, repr(run_b.error)
    epochs = _epochs(kafka_bootstrap, job)
    assert older.epoch not in epochs[epochs.index(newer.epoch) :]
