"""KafkaAdmin against the real broker: create, validate, require and delete topics."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from samsa.kafka import KafkaAdmin, KafkaSystemError, TopicMismatchError, TopicNotFoundError

TopicFactory = Callable[..., str]


@pytest.fixture
def fresh_name(kafka_admin: KafkaAdmin) -> Iterator[str]:
    name = f"admin-{uuid.uuid4().hex[:10]}"
    yield name
    kafka_admin.delete_topics([name])


def test_ensure_topic_creates_then_accepts(kafka_admin: KafkaAdmin, fresh_name: str) -> None:
    assert kafka_admin.ensure_topic(fresh_name, 3, {"cleanup.policy": "compact"}) is True
    assert kafka_admin.partition_counts([fresh_name]) == {fresh_name: 3}
    assert kafka_admin.topic_config(fresh_name)["cleanup.policy"] == "compact"
    assert kafka_admin.ensure_topic(fresh_name, 3, {"cleanup.policy": "compact"}) is False


def test_ensure_topic_partition_mismatch_names_the_topic(
    kafka_admin: KafkaAdmin, topics: TopicFactory
) -> None:
    topic = topics(2)
    with pytest.raises(TopicMismatchError) as err:
        kafka_admin.ensure_topic(topic, 4)
    assert err.value.topic == topic and (err.value.expected, err.value.actual) == (4, 2)
    assert (
        repr(topic) in str(err.value)
        and "partitions=2" in str(err.value)
        and "delete topic" in str(err.value)
    )


def test_ensure_topic_cleanup_policy_mismatch(kafka_admin: KafkaAdmin, topics: TopicFactory) -> None:
    topic = topics(1)  # broker default: delete
    with pytest.raises(TopicMismatchError, match=r"cleanup\.policy=delete.*cleanup\.policy=compact"):
        kafka_admin.ensure_topic(topic, 1, {"cleanup.policy": "compact"})
    both = topics(1, config={"cleanup.policy": "compact,delete"})
    assert kafka_admin.ensure_topic(both, 1, {"cleanup.policy": "delete, compact"}) is False


def test_create_topic_twice_fails(kafka_admin: KafkaAdmin, topics: TopicFactory) -> None:
    topic = topics(1)
    with pytest.raises(KafkaSystemError, match="already exists"):
        kafka_admin.create_topic(topic, 1)


def test_require_topics_names_the_missing(kafka_admin: KafkaAdmin, topics: TopicFactory) -> None:
    present = topics(5)
    assert kafka_admin.require_topics([present]) == {present: 5}
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TopicNotFoundError) as err:
        kafka_admin.require_topics([present, missing])
    assert err.value.topics == [missing]
    assert repr(missing) in str(err.value) and present not in str(err.value)
    assert kafka_admin.partition_counts([missing]) == {missing: None}


def test_delete_topics_ignores_missing(kafka_admin: KafkaAdmin, fresh_name: str) -> None:
    kafka_admin.create_topic(fresh_name, 1)
    kafka_admin.delete_topics([fresh_name, f"never-{uuid.uuid4().hex[:8]}"])
    assert kafka_admin.partition_counts([fresh_name]) == {fresh_name: None}


def test_topic_config_of_missing_topic(kafka_admin: KafkaAdmin) -> None:
    with pytest.raises(TopicNotFoundError):
        kafka_admin.topic_config(f"missing-{uuid.uuid4().hex[:8]}")
