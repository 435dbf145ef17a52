"""A store's serdes are checked at start: a schema-registry avro serde, which needs a topic, is refused."""

from __future__ import annotations

import json

import pytest

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.validation import check_job

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "id", "type": "int"}]})


def job(**extra: str) -> JobConfig:
    return JobConfig(
        Config(
            {
                "job.name": "j",
                "task.class": "samsa.runtime.task:StreamTask",
                "task.inputs": "kafka.in",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "localhost:9092",
                "serializers.registry.rec.class": "avro",
                "serializers.registry.rec.schema": SCHEMA,
                "serializers.registry.rec.schema.registry.url": "http://127.0.0.1:9",
                "serializers.registry.plain.class": "avro",
                "serializers.registry.plain.schema": SCHEMA,
                "stores.s.factory": "rocksdb",
                **extra,
            }
        )
    )


@pytest.mark.parametrize("part", ["key", "msg"])
def test_a_registry_avro_serde_on_a_store_is_refused_at_start_naming_the_key(part: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_job(job(**{f"stores.s.{part}.serde": "rec"}))
    message = str(info.value)
    assert message.startswith(f"stores.s.{part}.serde=rec: ")
    assert "schemaless avro serde" in message and "no .schema.registry.url" in message


def test_a_schemaless_avro_store_serde_and_a_registry_stream_serde_pass() -> None:
    check_job(job(**{"stores.s.msg.serde": "plain", "systems.kafka.samza.msg.serde": "rec"}))
