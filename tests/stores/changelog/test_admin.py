"""Changelog topics: settings, one stream per store, creation and validation on the real broker."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from samsa.kafka import KafkaAdmin, TopicMismatchError, TopicNotFoundError
from samsa.stores.changelog.admin import ChangelogAdmin, check_unique_changelogs
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.settings import ChangelogSettings
from samsa.stores.exceptions import StoreConfigError
from samsa.streams import SystemStream


def test_settings_defaults_are_samzas() -> None:
    s = ChangelogSettings.of("counts", {})
    assert (s.delete_retention_ms, s.min_compaction_lag_ms, s.replication_factor) == (
        86_400_000,
        14_400_000,
        -1,
    )
    assert s.topic_config() == {
        "cleanup.policy": "compact",
        "delete.retention.ms": "86400000",
        "min.compaction.lag.ms": "14400000",
    }


def test_settings_read_store_keys() -> None:
    s = ChangelogSettings.of(
        "counts",
        {
            "changelog.delete.retention.ms": "1000",
            "changelog.min.compaction.lag.ms": " 2000 ",
            "changelog.replication.factor": "3",
        },
    )
    assert (s.delete_retention_ms, s.min_compaction_lag_ms, s.replication_factor) == (1000, 2000, 3)


@pytest.mark.parametrize(
    ("sub", "raw"),
    [
        ("changelog.delete.retention.ms", "1d"),
        ("changelog.delete.retention.ms", "-1"),
        ("changelog.replication.factor", "0"),
        ("changelog.replication.factor", "-2"),
    ],
)
def test_bad_settings_name_the_key(sub: str, raw: str) -> None:
    with pytest.raises(StoreConfigError, match=re.escape(f"stores.counts.{sub}")):
        ChangelogSettings.of("counts", {sub: raw})


def test_two_stores_may_not_share_a_changelog() -> None:
    check_unique_changelogs({"a": SystemStream("kafka", "cl"), "b": SystemStream("other", "cl")})
    with pytest.raises(StoreConfigError, match="stores 'a' and 'b'") as caught:
        check_unique_changelogs({"b": SystemStream("kafka", "cl"), "a": SystemStream("kafka", "cl")})
    assert caught.value.key == "stores.b.changelog"
    with pytest.raises(StoreConfigError, match="'a' and 'b'"):
        ChangelogBackendFactory(None, lambda s: {}, {"a": ("kafka", "cl"), "b": ("kafka", "cl")})  # type: ignore[arg-type]


def test_a_backed_store_needs_a_changelog() -> None:
    with pytest.raises(StoreConfigError, match=r"stores\.plain\.changelog"):
        ChangelogAdmin({"plain": {}}, {}, 4, lambda system: pytest.fail("no admin needed"))


@pytest.fixture
def names(kafka_admin: KafkaAdmin) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    kafka_admin.delete_topics(created)


def _admin(
    kafka_bootstrap: str, stores: dict[str, str], task_count: int, config: dict[str, str] | None = None
) -> ChangelogAdmin:
    factory = ChangelogBackendFactory(
        None,  # type: ignore[arg-type]
        lambda system: {"bootstrap.servers": kafka_bootstrap, "group.id": "ignored-by-admin"},
        {store: ("kafka", topic) for store, topic in stores.items()},
    )
    return factory.admin({store: dict(config or {}) for store in stores}, task_count)


def test_create_resources_creates_compacted_changelogs(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, names: list[str]
) -> None:
    a, b = f"a-cl-{uuid.uuid4().hex[:8]}", f"b-cl-{uuid.uuid4().hex[:8]}"
    names += [a, b]
    admin = _admin(kafka_bootstrap, {"a": a, "b": b}, 3, {"changelog.delete.retention.ms": "5000"})
    with pytest.raises(TopicNotFoundError, match=a):
        admin.validate_resources()
    admin.create_resources()
    assert kafka_admin.partition_counts([a, b]) == {a: 3, b: 3}
    config = kafka_admin.topic_config(a)
    assert config["cleanup.policy"] == "compact"
    assert config["delete.retention.ms"] == "5000"
    assert config["min.compaction.lag.ms"] == "14400000"
    admin.validate_resources()
    admin.create_resources()  # existing and matching: nothing to do


def test_existing_changelog_with_another_partition_count_is_an_error(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, names: list[str]
) -> None:
    topic = f"cl-{uuid.uuid4().hex[:8]}"
    names.append(topic)
    kafka_admin.create_topic(topic, 2, {"cleanup.policy": "compact"})
    admin = _admin(kafka_bootstrap, {"counts": topic}, 4)
    with pytest.raises(TopicMismatchError, match=topic) as created:
        admin.create_resources()
    assert (created.value.setting, created.value.expected, created.value.actual) == ("partitions", 4, 2)
    with pytest.raises(TopicMismatchError, match="'counts'"):
        admin.validate_resources()


def test_existing_changelog_that_is_not_compacted_is_an_error(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, names: list[str]
) -> None:
    topic = f"cl-{uuid.uuid4().hex[:8]}"
    names.append(topic)
    kafka_admin.create_topic(topic, 1, {"cleanup.policy": "delete"})
    admin = _admin(kafka_bootstrap, {"counts": topic}, 1)
    with pytest.raises(TopicMismatchError, match=r"cleanup\.policy"):
        admin.create_resources()
    with pytest.raises(TopicMismatchError, match=r"cleanup\.policy"):
        admin.validate_resources()


@pytest.mark.parametrize("setting", ["min.compaction.lag.ms", "delete.retention.ms"])
def test_existing_changelog_laxer_than_the_config_is_an_error(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, names: list[str], setting: str
) -> None:
    topic = f"cl-{uuid.uuid4().hex[:8]}"
    names.append(topic)
    other = "delete.retention.ms" if setting == "min.compaction.lag.ms" else "min.compaction.lag.ms"
    kafka_admin.create_topic(topic, 1, {"cleanup.policy": "compact", setting: "1000", other: "999999999"})
    admin = _admin(kafka_bootstrap, {"counts": topic}, 1)
    with pytest.raises(TopicMismatchError, match=rf"stores\.counts\.changelog\.{setting}") as error:
        admin.create_resources()
    assert error.value.setting == setting and error.value.actual == 1000


def test_create_and_validate_fetch_the_clusters_metadata_once_per_system_for_existing_changelogs(
    kafka_bootstrap: str, kafka_admin: KafkaAdmin, names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cluster's full metadata is large and a job has a changelog per store: one fetch serves them all.
    topics = [f"cl-{n}-{uuid.uuid4().hex[:8]}" for n in range(3)]
    names += topics
    for topic in topics:
        kafka_admin.create_topic(topic, 2, {"cleanup.policy": "compact", "min.compaction.lag.ms": "14400000"})
    fetches: list[str] = []
    metadata = KafkaAdmin.metadata

    def counted(self: KafkaAdmin, timeout: float | None = None) -> object:
        fetches.append(self.bootstrap_servers)
        return metadata(self, timeout)

    monkeypatch.setattr(KafkaAdmin, "metadata", counted)
    admin = _admin(kafka_bootstrap, {f"s{n}": topic for n, topic in enumerate(topics)}, 2)
    admin.create_resources()
    assert len(fetches) == 1
    admin.validate_resources()
    assert len(fetches) == 2
