"""`stores.<s>.changelog` renamed (or moved to another system) between two starts, on the real broker and
RocksDB: the start is refused while the checkpoint's changelog still holds the state, touching nothing (no
restore, no write, no local directory deleted), and goes on once that topic is deleted (the state started
over) or its records copied to the new topic and it is deleted (the state moved)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from count_job import count_job, final_counts, run_cli, store_counts

from samsa.kafka import KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.stores.changelog.exceptions import ChangelogMovedError


def _ends(bootstrap: str, topics: tuple[str, ...]) -> dict[tuple[str, int], int]:
    """The high watermark of every partition of those of `topics` that exist."""
    config = {"bootstrap.servers": bootstrap}
    with KafkaAdmin(config) as admin, KafkaConsumer(config) as consumer:
        counts = admin.partition_counts(topics)
        return {(t, p): consumer.watermarks((t, p))[1] for t, n in counts.items() for p in range(n or 0)}


def _store_files(config: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Each file of the tasks' `counts` dirs and local checkpoints, with its size and modification time."""
    job = JobConfig(Config(config))
    files = (
        f for d in (job.logged_store_dir / job.job_key).glob("*/counts*") for f in d.rglob("*") if f.is_file()
    )
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in files}


def _copy_topic(bootstrap: str, source: str, target: str) -> None:
    """What a Kafka tool moving the state does: every record, partition for partition, headers included."""
    config = {"bootstrap.servers": bootstrap}
    producer = KafkaProducer(config)
    with KafkaAdmin(config) as admin, KafkaConsumer(config) as consumer:
        for p in range(admin.partition_counts([source])[source] or 0):
            low, high = consumer.watermarks((source, p))
            if high <= low:
                continue
            consumer.assign({(source, p): low})
            last = low - 1
            while last < high - 1:
                for m in consumer.consume(1000, 1.0):
                    producer.send(target, m.value(), m.key(), p, m.headers())
                    last = m.offset()
            consumer.unassign()
    producer.flush()
    producer.close()


def _counts_job(
    job_config: Callable[..., dict[str, str]], words: str, out: str, **extra: str
) -> dict[str, str]:
    return count_job(job_config, words, out, **{"job.container.count": "1", **extra})


def test_a_renamed_changelog_is_refused_while_the_old_one_holds_the_state(
    broker_bootstrap, kafka_admin, job_config, topics, produce, read_topic, run_job, tmp_path, subprocess_env
):
    words, out = topics(2), topics(1)
    old, new = f"{words}-counts", f"{words}-1-counts-changelog"
    produce(words, [("a", "a"), ("b", "b"), ("a", "a")])
    v1 = _counts_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{old}"})
    v2 = {**v1, "stores.counts.changelog": f"kafka.{new}"}
    try:
        run_job(v1)
        assert final_counts(read_topic(out)) == {"a": 2, "b": 1}
        written = (out, old, new)
        before, local = _ends(broker_bootstrap, written), _store_files(v1)
        assert local, "the store's local dirs"

        with pytest.raises(ChangelogMovedError) as refused:
            run_job(v2)
        message = str(refused.value)
        assert (
            f"changelog kafka.{old}" in message and f"stores.counts.changelog is now kafka.{new}" in message
        )
        assert f"set stores.counts.changelog=kafka.{old} back" in message, message
        assert f"copy every record of topic {old} into topic {new}" in message, message
        assert f"delete topic {old}" in message, message

        # End to end: `samsa run` exits 2 (a config error: the container is not restarted).
        job_file = tmp_path / "v2.yaml"
        job_file.write_text(json.dumps(v2))
        proc = run_cli(job_file, subprocess_env)
        assert proc.returncode == 2, proc.stderr[-3000:]
        text = proc.stdout + proc.stderr
        assert "still holds records" in text and "restarting in" not in text, text[-3000:]

        # Nothing restored, written or deleted: the old changelog, the local dirs, the new topic (created
        # empty by the coordinator) and the outputs are as they were.
        after = _ends(broker_bootstrap, written)
        assert {k: v for k, v in after.items() if k[0] != new} == before
        assert all(v == 0 for k, v in after.items() if k[0] == new)
        assert _store_files(v1) == local

        # The old config still has the whole state.
        produce(words, [("a", "a")])
        run_job(v1)
        assert final_counts(read_topic(out))["a"] == 3

        # Starting the store over: the old changelog deleted, the new config starts (from an empty store).
        kafka_admin.delete_topics([old])
        produce(words, [("b", "b")])
        run_job(v2)
        assert final_counts(read_topic(out))["b"] == 1
    finally:
        kafka_admin.delete_topics([t for t, n in kafka_admin.partition_counts([old, new]).items() if n])


def test_an_exactly_once_changelog_moved_to_another_system_keeps_its_state_once_moved(
    broker_bootstrap, kafka_admin, job_config, topics, produce, run_job
):
    words, out = topics(1), topics(1)
    old, new = f"{words}-counts", f"{words}-counts-moved"
    produce(words, [("a", "a"), ("b", "b"), ("a", "a")])
    eos = {"job.processing.guarantee": "exactly_once", "task.outputs": f"kafka.{out}"}
    v1 = _counts_job(job_config, words, out, **eos, **{"stores.counts.changelog": f"kafka.{old}"})
    # The same broker under another system name: the checkpoint's changelog is looked at on system kafka.
    v2 = {
        **v1,
        "systems.moved.samza.factory": v1["systems.kafka.samza.factory"],
        "systems.moved.bootstrap.servers": broker_bootstrap,
        "stores.counts.changelog": f"moved.{new}",
    }
    job = JobConfig(Config(v1))
    store_dir = job.logged_store_dir / job.job_key / "Partition_0" / "counts"
    try:
        run_job(v1)
        assert store_counts(store_dir) == {"a": 2, "b": 1}  # the sink is transactional: the store says
        before = _ends(broker_bootstrap, (old,))
        with pytest.raises(
            ChangelogMovedError, match=f"changelog kafka.{old}, but stores.counts.changelog is now"
        ):
            run_job(v2)
        # No abort record (an exactly-once start writes one to each changelog before its restore).
        assert _ends(broker_bootstrap, (old,)) == before
        assert all(v == 0 for v in _ends(broker_bootstrap, (new,)).values())

        # Moving the state: its records copied to the new topic, the old one deleted.
        _copy_topic(broker_bootstrap, old, new)
        kafka_admin.delete_topics([old])
        produce(words, [("a", "a")])
        run_job(v2)
        assert store_counts(store_dir) == {"a": 3, "b": 1}
    finally:
        kafka_admin.delete_topics([t for t, n in kafka_admin.partition_counts([old, new]).items() if n])
