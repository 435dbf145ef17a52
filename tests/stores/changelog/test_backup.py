"""Changelog backup: the marker is the changelog's newest offset; upload and cleanup are done futures."""

from __future__ import annotations

from samsa.kafka import KafkaProducer
from samsa.kafka.message import TopicPartition
from samsa.stores.backend import TaskStoresContext
from samsa.stores.changelog.backup import ChangelogBackupManager
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStreamPartition

SSP_A = SystemStreamPartition("kafka", "a-changelog", 4)
SSP_B = SystemStreamPartition("other", "b-changelog", 4)


def test_snapshot_asks_each_store_once_and_encodes_markers() -> None:
    asked: list[tuple[str, TopicPartition]] = []
    marks = {"a-changelog": (0, 11), "b-changelog": (3, 3)}

    def watermarks(system: str, tp: TopicPartition) -> tuple[int, int]:
        asked.append((system, tp))
        return marks[tp[0]]

    manager = ChangelogBackupManager({"a": SSP_A, "b": SSP_B}, watermarks)
    manager.init(None)
    markers = manager.snapshot("1-1")
    assert sorted(asked) == [("kafka", ("a-changelog", 4)), ("other", ("b-changelog", 4))]
    assert ChangelogMarker.decode(markers["a"]) == ChangelogMarker(SSP_A, 10)
    assert ChangelogMarker.decode(markers["b"]) == ChangelogMarker(SSP_B, None)  # empty partition
    uploaded = manager.upload("1-1", markers)
    assert uploaded.done() and uploaded.result() == markers
    cleanup = manager.cleanup("1-1", markers)
    assert cleanup.done() and cleanup.result() is None
    manager.close()


def test_snapshot_against_the_broker_follows_the_flushed_writes(
    factory: ChangelogBackendFactory, context: TaskStoresContext, producer: KafkaProducer, changelog: str
) -> None:
    manager = factory.backup_manager(context)
    ssp = SystemStreamPartition("kafka", changelog, 0)
    assert ChangelogMarker.decode(manager.snapshot("1-1")["counts"]) == ChangelogMarker(ssp, None)
    for i in range(25):
        producer.send(changelog, b"v", b"k%d" % i, 0)
    producer.flush()
    assert ChangelogMarker.decode(manager.snapshot("2-1")["counts"]) == ChangelogMarker(ssp, 24)


def test_backup_manager_covers_only_the_task_stores_it_backs(
    factory: ChangelogBackendFactory, context: TaskStoresContext
) -> None:
    context.store_dirs["plain"] = context.store_dirs["counts"].with_name("plain")
    manager = factory.backup_manager(context)
    assert set(manager._changelogs) == {"counts"}
