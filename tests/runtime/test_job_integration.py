"""Jobs end to end on the real broker: exact results, resume from checkpoints, bad input."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import systems_fixtures
from count_job import WORDS, final_counts

from samsa.checkpoint.kafka_manager import KafkaCheckpointManager, checkpoint_topic
from samsa.kafka import ProducerDeliveryError, TopicMismatchError, TopicNotFoundError
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config, coordinator_topic
from samsa.runtime.exceptions import MessageDeserializationError, TaskError
from samsa.serde.registry import SerdeRegistry
from samsa.serde.testing import FakeSchemaRegistry
from samsa.streams import SystemStreamPartition

# Every test here runs on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin


def _words(n: int, seed: int = 1) -> list[str]:
    return random.Random(seed).choices(WORDS, k=n)


def _run_until_caught_up(job_file: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`samsa run --until-caught-up` through the supervisor; asserts it exits 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", str(job_file), "--until-caught-up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _count_config(job_config, inputs: str, output: str, containers: int) -> dict[str, str]:
    return job_config(
        f"kafka.{inputs}",
        output,
        task="samsa_test_tasks:CountTask",
        **{
            "job.container.count": containers,
            f"systems.kafka.streams.{output}.samza.msg.serde": "long",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
        },
    )


@pytest.mark.parametrize("containers", [1, 2])
def test_word_count_is_exact_through_the_supervisor(
    containers, job_config, topics, produce, read_topic, subprocess_env, tmp_path
):
    words, counts = topics(4), topics(4)
    sent = _words(3000)
    produce(words, [(w, w) for w in sent])
    config = _count_config(job_config, words, counts, containers)
    job_file = tmp_path / "job.properties"
    job_file.write_text("\n".join(f"{k}={v}" for k, v in config.items()))
    proc = _run_until_caught_up(job_file, subprocess_env)
    for cid in range(containers):
        assert f"[container-{cid}]" in proc.stdout
    assert final_counts(read_topic(counts)) == Counter(sent)


def test_one_and_two_containers_give_the_same_result(job_config, topics, produce, read_topic, run_job):
    words = topics(4)
    sent = _words(2000, seed=3)
    produce(words, [(w, w) for w in sent])
    results = []
    for containers in (1, 2):
        out = topics(4)
        run_job(_count_config(job_config, words, out, containers))
        results.append(final_counts(read_topic(out)))
    assert results[0] == results[1] == Counter(sent)


def test_restart_resumes_from_the_checkpoint(job_config, topics, produce, read_topic, run_job):
    inp, out = topics(2), topics(1)
    produce(inp, [(None, str(i)) for i in range(100)])
    config = job_config(f"kafka.{inp}", out)
    run_job(config)
    produce(inp, [(None, str(i)) for i in range(100, 150)])
    run_job(config)
    keys = Counter(r[2] for r in read_topic(out))
    assert len(keys) == 150
    assert max(keys.values()) == 1, "a graceful stop commits: nothing is processed twice"


def test_crash_reprocesses_at_most_what_came_after_the_last_commit(
    job_config, topics, produce, read_topic, tmp_path, subprocess_env
):
    inp, out = topics(1), topics(1)
    produce(inp, [(None, str(i)) for i in range(200)])
    marker = tmp_path / "killed"
    config = job_config(
        f"kafka.{inp}",
        out,
        **{
            "task.commit.ms": "-1",
            "test.commit.every": "40",
            "test.kill.at.value": "130",
            "test.kill.marker": str(marker),
        },
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))  # JSON is YAML
    proc = _run_until_caught_up(job_file, subprocess_env)
    assert marker.exists(), "the container was killed once"
    assert "restarting" in proc.stderr
    rows = read_topic(out, headers=True)
    assert {r[2] for r in rows} == {f"0:{i}".encode() for i in range(200)}, "every input has its output"
    pids = [dict(r[4])["pid"] for r in rows]
    restarted = [int(r[2].split(b":")[1]) for r, pid in zip(rows, pids, strict=True) if pid == pids[-1]]
    # Killed while processing offset 130; the task asked for commits after 40, 80 and 120. Commits are
    # async: the one at 120 may have been snapshotted but not yet durable. The restart resumes at the last
    # durable commit, so it reprocesses only messages after it.
    assert min(restarted) in (80, 120)
    assert sorted(restarted) == list(range(min(restarted), 200))


def test_process_failure_names_the_message_and_does_not_checkpoint_it(job_config, topics, produce, run_job):
    inp = topics(1)
    produce(inp, [(None, "ok"), (None, "ok"), (None, "boom"), (None, "ok")])
    config = job_config(f"kafka.{inp}", "unused", task="samsa_test_tasks:FailingTask")
    with pytest.raises(TaskError, match=rf"{inp}#0@2"):
        run_job(config)
    job = JobConfig(Config(config))
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    checkpoints = manager.read_last()
    assert all(o <= 2 for cp in checkpoints.values() for o in cp.offsets.values())


def test_missing_input_topic_is_named(job_config, run_job):
    config = job_config("kafka.no-such-topic-x1", "unused")
    with pytest.raises(TopicNotFoundError, match="no-such-topic-x1"):
        run_job(config)


def test_a_start_failing_on_a_missing_input_leaves_no_internal_topics(
    job_config, topics, kafka_admin, run_job
):
    config = job_config("kafka.no-such-topic-x2", topics(1))
    with pytest.raises(TopicNotFoundError, match="no-such-topic-x2"):
        run_job(config)
    job = JobConfig(Config(config))
    internal = [checkpoint_topic(job.name, job.id), coordinator_topic(job)]
    assert kafka_admin.partition_counts(internal) == dict.fromkeys(internal)


def test_checkpoint_topic_with_wrong_partition_count_is_named(job_config, topics, kafka_admin, run_job):
    inp = topics(1)
    config = job_config(f"kafka.{inp}", "unused")
    job = JobConfig(Config(config))
    topic = checkpoint_topic(job.name, job.id)
    kafka_admin.create_topic(topic, 3, {"cleanup.policy": "compact"})
    with pytest.raises(TopicMismatchError, match=topic):
        run_job(config)


def test_more_containers_than_tasks_names_the_key(job_config, topics, run_job):
    config = job_config(f"kafka.{topics(2)}", "unused", **{"job.container.count": 3})
    with pytest.raises(Exception, match=r"job\.container\.count"):
        run_job(config)


def _bad_json_job(job_config, topics, produce, policy):
    inp, out = topics(1), topics(1)
    produce(inp, [(None, '{"n": 1}'), (None, "{not json"), (None, '{"n": 3}')])
    config = job_config(
        f"kafka.{inp}",
        out,
        **{
            "systems.kafka.samza.msg.serde": "json",
            f"systems.kafka.streams.{out}.samza.msg.serde": "json",
            "task.deserialization.error.policy": policy,
        },
    )
    return inp, out, config


def test_undeserializable_message_fails_naming_topic_partition_offset(job_config, topics, produce, run_job):
    inp, _, config = _bad_json_job(job_config, topics, produce, "fail")
    with pytest.raises(MessageDeserializationError, match=rf"topic {inp} partition 0 offset 1"):
        run_job(config)


def test_undeserializable_message_is_skipped_and_counted(job_config, topics, produce, read_topic, run_job):
    _, out, config = _bad_json_job(job_config, topics, produce, "skip")
    (container,) = run_job(config)
    assert [json.loads(r[3]) for r in read_topic(out)] == [{"n": 1}, {"n": 3}]
    errors = container.registry.snapshot()["samsa_deserialization_errors_total"]
    assert errors[0]["value"] == 1 and errors[0]["labels"]["policy"] == "skip"


def test_undeserializable_message_goes_to_the_dead_letter_topic(
    job_config, topics, produce, read_topic, run_job
):
    inp, out, config = _bad_json_job(job_config, topics, produce, "dlq")
    run_job(config)
    assert [json.loads(r[3]) for r in read_topic(out)] == [{"n": 1}, {"n": 3}]
    job = JobConfig(Config(config))
    (dead,) = read_topic(f"samsa-dlq-{job.job_key}", headers=True)
    assert dead[3] == b"{not json"
    headers = dict(dead[4])
    assert headers["samsa.source.topic"] == inp.encode()
    assert headers["samsa.source.offset"] == b"1"
    assert b"json" in headers["samsa.error"]


def test_checkpoint_records_next_offsets_per_partition(job_config, topics, produce, run_job):
    inp = topics(2)
    produce(inp, [(None, "a"), (None, "b")], partition=0)
    produce(inp, [(None, "c")], partition=1)
    config = job_config(f"kafka.{inp}", topics(1))
    run_job(config)
    job = JobConfig(Config(config))
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    checkpoints = manager.read_last()
    assert checkpoints["Partition 0"].offsets == {SystemStreamPartition("kafka", inp, 0): 2}
    assert checkpoints["Partition 1"].offsets == {SystemStreamPartition("kafka", inp, 1): 1}


def test_a_failed_delivery_fails_the_task_and_is_not_checkpointed(job_config, topics, produce, run_job):
    inp = topics(1)
    small = topics(1, config={"max.message.bytes": "200"})
    produce(inp, [(None, "short"), (None, "x" * 1000), (None, "short")])
    config = job_config(f"kafka.{inp}", small)
    with pytest.raises(ProducerDeliveryError, match=small):
        run_job(config)
    job = JobConfig(Config(config))
    manager = KafkaCheckpointManager(checkpoint_topic(job.name, job.id), client_config(job, "kafka"))
    # The start-up commit (no checkpoint yet) holds where the input started; no later commit may claim
    # the second message (offset 1), whose output was not delivered.
    offset = manager.read_last()["Partition 0"].offsets[SystemStreamPartition("kafka", inp, 0)]
    assert offset <= 1, "no commit may claim the undelivered output"


def test_avro_in_the_confluent_wire_format_end_to_end(job_config, topics, produce, read_topic, run_job):
    schema = json.dumps({"type": "record", "name": "Word", "fields": [{"name": "w", "type": "string"}]})
    inp, out = topics(1), topics(1)
    with FakeSchemaRegistry() as registry:
        serdes = SerdeRegistry(
            {
                "serializers.registry.words.class": "avro",
                "serializers.registry.words.schema": schema,
                "serializers.registry.words.schema.registry.url": registry.url,
            }
        )
        produce(inp, [(None, serdes.get("words", inp).to_bytes({"w": w})) for w in ("a", "b")])
        config = job_config(
            f"kafka.{inp}",
            out,
            **{
                "serializers.registry.words.class": "avro",
                "serializers.registry.words.schema": schema,
                "serializers.registry.words.schema.registry.url": registry.url,
                f"systems.kafka.streams.{inp}.samza.msg.serde": "words",
                f"systems.kafka.streams.{out}.samza.msg.serde": "words",
            },
        )
        run_job(config)
        rows = read_topic(out)
        assert [serdes.get("words", out).from_bytes(r[3]) for r in rows] == [{"w": "a"}, {"w": "b"}]
        assert rows[0][3][0] == 0, "Confluent magic byte"
        assert any(f"/subjects/{out}-value" in r for r in map(str, registry.requests))
