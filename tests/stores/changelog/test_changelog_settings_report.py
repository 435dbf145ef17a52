"""An existing changelog whose settings are not the job's: every setting at fault named in one refusal, and
a topic the broker auto-created (recreated after a deletion) told apart from one made by hand."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from samsa.kafka import KafkaAdmin, ProducerDeliveryError, TopicMismatchError
from samsa.stores.changelog.factory import ChangelogBackendFactory


@pytest.fixture
def topic(kafka_admin: KafkaAdmin) -> Iterator[str]:
    name = f"cl-report-{uuid.uuid4().hex[:8]}"
    yield name
    kafka_admin.delete_topics([name])


def _check(kafka_bootstrap: str, topic: str) -> TopicMismatchError:
    factory = ChangelogBackendFactory(
        None,  # type: ignore[arg-type]
        lambda system: {"bootstrap.servers": kafka_bootstrap},
        {"counts": ("kafka", topic)},
    )
    with pytest.raises(TopicMismatchError) as refused:
        factory.admin({"counts": {}}, 1).create_resources()
    return refused.value


def test_a_changelog_with_the_brokers_defaults_is_reported_as_auto_created_with_every_setting(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, topic: str
) -> None:
    kafka_admin.create_topic(topic, 1)  # what a broker's auto-creation makes: no setting of its own
    error = _check(kafka_bootstrap, topic)
    message = str(error)
    assert (error.setting, error.expected, error.actual) == ("cleanup.policy", "compact", "delete")
    # One start names them all (before: cleanup.policy, then min.compaction.lag.ms at the next start).
    assert "min.compaction.lag.ms=0 (14400000 required)" in message, message
    assert "looks auto-created" in message and "delete the topic" in message, message
    assert "--add-config cleanup.policy=compact,min.compaction.lag.ms=14400000" in message, message


def test_a_changelog_made_laxer_by_hand_is_refused_naming_every_setting_at_once(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, topic: str
) -> None:
    config = {"cleanup.policy": "compact", "min.compaction.lag.ms": "1000", "delete.retention.ms": "2000"}
    kafka_admin.create_topic(topic, 1, config)
    error = _check(kafka_bootstrap, topic)
    message = str(error)
    assert (error.setting, error.expected, error.actual) == ("min.compaction.lag.ms", 14400000, 1000)
    assert "delete.retention.ms=2000 (86400000 required)" in message, message
    assert "min.compaction.lag.ms=14400000,delete.retention.ms=86400000" in message, message
    assert "stores.counts.changelog.min.compaction.lag.ms=1000, stores.counts.changelog.delete" in message
    assert "auto-created" not in message, message


def test_a_lost_producer_sequence_points_at_a_deleted_topic() -> None:
    error = ProducerDeliveryError(
        "wc-changelog", 0, "OUT_OF_ORDER_SEQUENCE_NUMBER", "Broker: Broker received an out of order sequence"
    )
    assert "the topic was deleted" in str(error) and "UNKNOWN_TOPIC_OR_PART" in str(error), str(error)
    other = ProducerDeliveryError("out", 0, "MSG_SIZE_TOO_LARGE", "Broker: Message size too large")
    assert "deleted" not in str(other)
