"""Records over a size limit, end to end on the broker: a changelogged store keeps a 2 MB value once its
limits are raised (stores.<s>.changelog.kafka.max.message.bytes), and a record over a limit stops the job
naming the key to raise, as a config error a restart cannot mend (no restart loop duplicating outputs)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from count_job import run_cli

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, cause_of, unmendable_exit
from samsa.kafka import KafkaAdmin, KafkaProducer, MessageTooLargeError

BIG = 2_000_000
TOPIC_LIMIT = {"max.message.bytes": "20000000"}


@pytest.fixture
def big_producer(kafka_bootstrap: str) -> Iterator[Callable[..., None]]:
    """send(topic, [(key, value), ...]): a producer whose own limit allows 20 MB records."""
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 20_000_000})

    def send(topic: str, records: list[tuple[str, str]]) -> None:
        for key, value in records:
            producer.send(topic, value.encode(), key=key.encode())
        producer.flush()

    yield send
    producer.close()


@pytest.fixture
def changelog(kafka_admin: KafkaAdmin) -> Iterator[str]:
    """A changelog topic name; the job creates the topic, deleted afterwards."""
    name = f"values-cl-{uuid.uuid4().hex[:8]}"
    yield name
    kafka_admin.delete_topics([name])


def _store_job(job_config: Any, inp: str, out: str, changelog: str, **extra: str) -> dict[str, str]:
    return job_config(  # type: ignore[no-any-return]
        f"kafka.{inp}",
        out,
        task="samsa_test_tasks:StoreValuesTask",
        **{
            "stores.values.factory": "rocksdb",
            "stores.values.key.serde": "string",
            "stores.values.msg.serde": "string",
            "stores.values.changelog": f"kafka.{changelog}",
            "systems.kafka.producer.message.max.bytes": "20000000",
            **extra,
        },
    )


def test_a_2mb_store_value_is_kept_and_restored_exactly_with_the_changelog_limit_raised(
    job_config: Any,
    topics: Any,
    run_job: Any,
    read_topic: Any,
    big_producer: Callable[..., None],
    kafka_admin: KafkaAdmin,
    changelog: str,
    tmp_path: Path,
) -> None:
    inp, out = topics(1, TOPIC_LIMIT), topics(1)
    value = "".join(chr(ord("a") + i % 26) for i in range(BIG))
    big_producer(inp, [("big", value), ("small", "s")])
    config = _store_job(
        job_config, inp, out, changelog, **{"stores.values.changelog.kafka.max.message.bytes": "20000000"}
    )
    run_job(config)
    assert kafka_admin.topic_config(changelog)["max.message.bytes"] == "20000000"
    assert [(r[2], len(r[3])) for r in read_topic(changelog)] == [(b"big", BIG), (b"small", 1)]
    shutil.rmtree(tmp_path / "state")  # the next run restores from the changelog alone
    big_producer(inp, [("big", "?"), ("small", "?")])
    run_job(config)
    digests = {r[2]: r[3] for r in read_topic(out)}
    assert digests == {
        b"big": f"{BIG}:{hashlib.sha256(value.encode()).hexdigest()}".encode(),
        b"small": f"1:{hashlib.sha256(b's').hexdigest()}".encode(),
    }


def test_a_store_value_over_the_changelogs_limit_names_the_stores_key(
    job_config: Any,
    topics: Any,
    run_job: Any,
    big_producer: Callable[..., None],
    changelog: str,
) -> None:
    inp, out = topics(1, TOPIC_LIMIT), topics(1)
    big_producer(inp, [("big", "x" * BIG)])
    with pytest.raises(MessageTooLargeError) as caught:
        run_job(_store_job(job_config, inp, out, changelog))
    text = str(caught.value)
    assert f"topic {changelog!r}" in text and "partition 0" in text
    assert "stores.values.changelog.kafka.max.message.bytes" in text, text
    assert "max.message.bytes" in text and "kafka-configs --alter" in text
    assert unmendable_exit(caught.value) == CONFIG_ERROR_EXIT


def test_a_record_over_the_producers_own_limit_names_its_key_value_and_the_records_size(
    job_config: Any, topics: Any, run_job: Any, big_producer: Callable[..., None]
) -> None:
    inp, out = topics(1, TOPIC_LIMIT), topics(1, TOPIC_LIMIT)
    big_producer(inp, [("k", "x" * 1_500_000)])
    with pytest.raises(Exception) as caught:  # raised by process(): the task's failure wraps it
        run_job(job_config(f"kafka.{inp}", out))
    text = str(cause_of(caught.value, MessageTooLargeError))
    assert "systems.kafka.producer.message.max.bytes" in text and "message.max.bytes=1000000" in text, text
    assert f"topic {out!r}" in text
    # EchoTask's output: its key `0:0`, the value and a pid header.
    assert re.search(r"The record is 15000\d\d bytes", text), text
    assert unmendable_exit(caught.value) == CONFIG_ERROR_EXIT


def test_a_bad_record_too_large_for_the_dead_letter_stream_says_so(
    job_config: Any, topics: Any, run_job: Any, big_producer: Callable[..., None]
) -> None:
    inp, out = topics(1, TOPIC_LIMIT), topics(1)
    big_producer(inp, [("k", "y" * 1_500_000)])
    config = job_config(
        f"kafka.{inp}",
        out,
        **{"systems.kafka.samza.msg.serde": "json", "task.deserialization.error.policy": "dlq"},
    )
    with pytest.raises(Exception) as caught:
        run_job(config)
    text = str(cause_of(caught.value, MessageTooLargeError))
    assert "dead-letter stream" in text and "not dead-lettered" in text, text
    assert "systems.kafka.producer.message.max.bytes" in text
    assert f"topic {inp} partition 0 offset 0" in text
    assert unmendable_exit(caught.value) == CONFIG_ERROR_EXIT


def test_the_local_supervisor_stops_the_job_instead_of_restarting_it(
    job_config: Any,
    topics: Any,
    read_topic: Any,
    big_producer: Callable[..., None],
    tmp_path: Path,
    subprocess_env: dict[str, str],
) -> None:
    inp, out = topics(1, TOPIC_LIMIT), topics(1, TOPIC_LIMIT)
    big_producer(inp, [("a", "small"), ("k", "x" * 1_500_000)])
    config = job_config(f"kafka.{inp}", out, **{"deploy.local.max.restarts": "3"})
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    run = run_cli(job_file, subprocess_env)
    text = run.stdout + run.stderr
    assert run.returncode != 0, text
    assert "restarting in" not in text, "the container was restarted"
    assert "stopped on a configuration error" in text, text
    assert "systems.kafka.producer.message.max.bytes" in text
    assert len(read_topic(out)) == 1, "the output before the record is written once"
