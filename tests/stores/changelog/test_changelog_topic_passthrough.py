"""Samza's `stores.<s>.changelog.kafka.<topic config>` keys: passed to the changelog Samsa creates, refused
where they contradict the changelog's own settings, and warned of where an existing changelog lacks them."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator

import pytest

from samsa.kafka import KafkaAdmin
from samsa.runtime.config.config import Config
from samsa.stores.changelog.admin import ChangelogAdmin
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.settings import ChangelogSettings
from samsa.stores.exceptions import StoreConfigError

LIMIT = "changelog.kafka.max.message.bytes"


def test_the_keys_are_known_to_the_job_config() -> None:
    Config({"stores.s.factory": "rocksdb", f"stores.s.{LIMIT}": "20000000"})


def test_passthrough_settings_go_into_the_topic_config() -> None:
    s = ChangelogSettings.of("s", {LIMIT: "20000000", "changelog.kafka.segment.bytes": "1048576"})
    assert s.topic_config() == {
        "max.message.bytes": "20000000",
        "segment.bytes": "1048576",
        "cleanup.policy": "compact",
        "delete.retention.ms": "86400000",
        "min.compaction.lag.ms": "14400000",
    }


def test_a_passthrough_of_samsas_own_setting_sets_it() -> None:
    s = ChangelogSettings.of(
        "s", {"changelog.kafka.delete.retention.ms": "5000", "changelog.kafka.cleanup.policy": "compact"}
    )
    assert s.delete_retention_ms == 5000
    assert s.topic_config()["delete.retention.ms"] == "5000"
    # Given both ways alike: accepted.
    same = {"changelog.min.compaction.lag.ms": "7000", "changelog.kafka.min.compaction.lag.ms": "7000"}
    assert ChangelogSettings.of("s", same).min_compaction_lag_ms == 7000


@pytest.mark.parametrize("policy", ["delete", "compact,delete"])
def test_a_cleanup_policy_other_than_compact_is_refused(policy: str) -> None:
    with pytest.raises(StoreConfigError, match=r"stores\.s\.changelog\.kafka\.cleanup\.policy") as caught:
        ChangelogSettings.of("s", {"changelog.kafka.cleanup.policy": policy})
    assert "compacted only" in str(caught.value) and "stores.s.changelog" in str(caught.value)


def test_one_setting_given_both_ways_with_different_values_is_refused_naming_both_keys() -> None:
    config = {"changelog.min.compaction.lag.ms": "1000", "changelog.kafka.min.compaction.lag.ms": "2000"}
    with pytest.raises(StoreConfigError) as caught:
        ChangelogSettings.of("s", config)
    text = str(caught.value)
    assert "stores.s.changelog.min.compaction.lag.ms" in text
    assert "stores.s.changelog.kafka.min.compaction.lag.ms=2000" in text


def test_a_limit_that_is_not_a_whole_number_is_refused_naming_the_key() -> None:
    with pytest.raises(StoreConfigError, match=re.escape(f"stores.s.{LIMIT}")):
        ChangelogSettings.of("s", {LIMIT: "20MB"})


def test_whole_numbers_reach_the_topic_as_the_broker_reads_them() -> None:
    assert ChangelogSettings.of("s", {LIMIT: "20_000_000"}).topic_config()["max.message.bytes"] == "20000000"


def test_a_replication_factor_passed_through_is_refused_naming_samsas_key() -> None:
    """Not a topic config: the broker would refuse the topic naming only `replication.factor`."""
    with pytest.raises(StoreConfigError, match=r"stores\.s\.changelog\.kafka\.replication\.factor") as caught:
        ChangelogSettings.of("s", {"changelog.kafka.replication.factor": "3"})
    assert "stores.s.changelog.replication.factor" in str(caught.value)


@pytest.fixture
def names(kafka_admin: KafkaAdmin) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    kafka_admin.delete_topics(created)


def _admin(kafka_bootstrap: str, topic: str, config: dict[str, str]) -> ChangelogAdmin:
    factory = ChangelogBackendFactory(
        None,  # type: ignore[arg-type]
        lambda system: {"bootstrap.servers": kafka_bootstrap},
        {"s": ("kafka", topic)},
    )
    return factory.admin({"s": config}, 1)


def test_a_changelog_is_created_with_the_passthrough_settings(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, names: list[str]
) -> None:
    topic = f"cl-{uuid.uuid4().hex[:8]}"
    names.append(topic)
    _admin(kafka_bootstrap, topic, {LIMIT: "20000000"}).create_resources()
    config = kafka_admin.topic_config(topic)
    assert config["max.message.bytes"] == "20000000"
    assert config["cleanup.policy"] == "compact"


def test_an_existing_changelog_with_a_smaller_limit_is_warned_of_not_altered(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, names: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    topic = f"cl-{uuid.uuid4().hex[:8]}"
    names.append(topic)
    kafka_admin.create_topic(topic, 1, {**ChangelogSettings().topic_config(), "max.message.bytes": "1000000"})
    with caplog.at_level(logging.WARNING, logger="samsa.stores.changelog.admin"):
        _admin(kafka_bootstrap, topic, {LIMIT: "20000000"}).create_resources()
    warned = [r.getMessage() for r in caplog.records if topic in r.getMessage()]
    assert len(warned) == 1, caplog.text
    assert "max.message.bytes=1000000" in warned[0] and f"stores.s.{LIMIT}=20000000" in warned[0]
    assert (
        f"kafka-configs --alter --entity-type topics --entity-name {topic} "
        "--add-config max.message.bytes=20000000" in warned[0]
    )
    assert kafka_admin.topic_config(topic)["max.message.bytes"] == "1000000", "never altered silently"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="samsa.stores.changelog.admin"):  # a larger limit is fine
        _admin(kafka_bootstrap, topic, {LIMIT: "500000"}).validate_resources()
    assert topic not in caplog.text
