"""An admin client gets a system's consumer settings without the consumer-only keys: librdkafka warned of
each one (CONFWARN), while the security and other client keys must still reach it."""

from __future__ import annotations

import logging

import pytest

from samsa.kafka import KafkaAdmin
from samsa.kafka.config import admin_config
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config

CONSUMER_ONLY = {
    "auto.offset.reset": "smallest",
    "isolation.level": "read_uncommitted",
    "enable.auto.commit": "true",
    "group.id": "mygroup",
    "fetch.min.bytes": "1",
}


def test_the_admin_config_of_a_job_keeps_its_security_keys_and_drops_its_consumer_only_ones() -> None:
    security = {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "user",
        "sasl.password": "secret",
        "ssl.ca.location": "/etc/ca.pem",
        "client.id": "app",
    }
    job = JobConfig(
        Config(
            {
                "job.name": "keys",
                "task.class": "samsa_test_tasks:EchoTask",
                "task.inputs": "kafka.in",
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": "broker:9092",
                **{f"systems.kafka.consumer.{k}": v for k, v in {**CONSUMER_ONLY, **security}.items()},
            }
        )
    )
    config = admin_config(client_config(job, "kafka"))
    assert config == {"bootstrap.servers": "broker:9092", **security}


def test_an_admin_client_given_consumer_only_keys_logs_no_warning(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap, **CONSUMER_ONLY}
    with caplog.at_level(logging.DEBUG, "samsa.kafka.librdkafka"), KafkaAdmin(config) as admin:
        admin.metadata()
    warned = [r.getMessage() for r in caplog.records if "CONFWARN" in r.getMessage()]
    assert not warned
