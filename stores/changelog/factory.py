"""The Kafka changelog state backend: its factory, wiring the backup, restore and admin parts together."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from samsa.kafka import KafkaAdmin, KafkaConsumer, KafkaProducer
from samsa.kafka.message import TopicPartition
from samsa.stores.backend import (
    Markers,
    StateBackendAdmin,
    StateBackendFactory,
    TaskBackupManager,
    TaskRestoreManager,
    TaskStoresContext,
)
from samsa.stores.changelog.admin import ChangelogAdmin, check_unique_changelogs
from samsa.stores.changelog.backup import ChangelogBackupManager
from samsa.stores.changelog.restore import ChangelogRestoreManager, TrimProducer
from samsa.stores.changelog.settings import size_note
from samsa.streams import SystemStream, SystemStreamPartition

# Restore reads whole partitions: large fetches and a deep prefetch queue keep the consumer ahead of the
# store writes. Settings in the system's consumer config win.
RESTORE_CONSUMER_TUNING: Mapping[str, Any] = {
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "queued.max.messages.kbytes": 64 * 1024,
    "queued.min.messages": 200_000,
}
# Client settings an admin client shares with a consumer; the rest of a consumer config is consumer-only.
_SHARED_PREFIXES = ("bootstrap.servers", "security.", "ssl.", "sasl.", "client.id", "socket.", "broker.")


class ChangelogBackendFactory:
    """`StateBackendFactory` named `changelog`: stores are backed up to compacted Kafka topics.

    `stores` maps each store this backend backs up to its changelog (system, stream); task `t` writes
    partition `t.changelog_partition`. `producer` is the container's producer of the changelog records
    (restore sends the undo records through it); `consumer_config_for(system)` gives a librdkafka consumer
    config (bootstrap servers included) for that system. One watermark client per system is shared by the
    backup managers of every task: call `close()` once they are closed.
    """

    def __init__(
        self,
        producer: TrimProducer,
        consumer_config_for: Callable[[str], Mapping[str, Any]],
        stores: Mapping[str, SystemStream | tuple[str, str]],
        *,
        name: str = "changelog",
        admin_config_for: Callable[[str], Mapping[str, Any]] | None = None,
        clock: Callable[[], float] = time.time,
        retain_existing_state: bool = True,
    ) -> None:
        """`retain_existing_state`: Samza's task.transactional.state.retain.existing.state (False: a store
        without a checkpointed position starts empty, its changelog undone)."""
        self.name = name
        self.changelogs = {store: SystemStream(*stream) for store, stream in stores.items()}
        check_unique_changelogs(self.changelogs)
        self._producer = producer
        if isinstance(producer, KafkaProducer):  # its error for a record too large names the store's key
            for store, stream in self.changelogs.items():
                producer.note_topic(stream.stream, size_note(store, stream.stream))
        self._consumer_config_for = consumer_config_for
        self._admin_config_for = admin_config_for or self._admin_config
        self._clock = clock
        self._retain_existing_state = retain_existing_state
        self._lock = threading.Lock()
        self._watermark_clients: dict[str, KafkaConsumer] = {}

    def backup_manager(self, task: TaskStoresContext) -> ChangelogBackupManager:
        return ChangelogBackupManager(self._partitions(task), self._watermarks)

    def restore_manager(self, task: TaskStoresContext) -> ChangelogRestoreManager:
        return ChangelogRestoreManager(
            task,
            self._partitions(task),
            self._restore_consumer,
            self._producer,
            self.name,
            self._clock,
            self._retain_existing_state,
        )

    def admin(self, stores: Mapping[str, Mapping[str, str]], task_count: int) -> ChangelogAdmin:
        """`stores`: the stores to check, each with its `stores.<s>.*` keys (prefix removed)."""
        return ChangelogAdmin(
            stores, self.changelogs, task_count, lambda system: KafkaAdmin(self._admin_config_for(system))
        )

    def close(self) -> None:
        with self._lock:
            clients, self._watermark_clients = self._watermark_clients, {}
        for client in clients.values():
            client.close()

    def _partitions(self, task: TaskStoresContext) -> dict[str, SystemStreamPartition]:
        return {
            store: SystemStreamPartition(stream.system, stream.stream, task.changelog_partition)
            for store, stream in self.changelogs.items()
            if store in task.store_dirs
        }

    def check_restore(
        self, task: TaskStoresContext, markers: Markers | None, checkpoint_id: str | None
    ) -> Markers:
        """Decides the restore of `task`'s stores as its restore manager's init would, acting on nothing:
        raises what the init would raise (`ChangelogLostError`). Asks the shared watermark client. Returns
        the markers the checkpoint must hold before the restore rebuilds a lost changelog (store -> marker
        saying `rebuilding`: `ChangelogRestoreManager.check`)."""
        manager = ChangelogRestoreManager(
            task,
            self._partitions(task),
            self._watermark_client,
            self._producer,
            self.name,
            self._clock,
            self._retain_existing_state,
        )
        return manager.check(markers, checkpoint_id)  # not closed: its consumer is the shared client

    def _watermarks(self, system: str, tp: TopicPartition) -> tuple[int, int]:
        # librdkafka serves concurrent callers: no lock held while asking
        return self._watermark_client(system).watermarks(tp)

    def _watermark_client(self, system: str) -> KafkaConsumer:
        with self._lock:
            client = self._watermark_clients.get(system)
            if client is None:
                client = self._watermark_clients[system] = KafkaConsumer(self._consumer_config_for(system))
            return client

    def _restore_consumer(self, system: str) -> KafkaConsumer:
        return KafkaConsumer({**RESTORE_CONSUMER_TUNING, **self._consumer_config_for(system)})

    def _admin_config(self, system: str) -> dict[str, Any]:
        config = self._consumer_config_for(system)
        return {k: v for k, v in config.items() if k.startswith(_SHARED_PREFIXES)}


if TYPE_CHECKING:  # the factory and its managers satisfy the backend interfaces (checked by mypy only)

    def _is_backend(factory: ChangelogBackendFactory, context: TaskStoresContext) -> StateBackendFactory:
        backup: TaskBackupManager = factory.backup_manager(context)
        restore: TaskRestoreManager = factory.restore_manager(context)
        admin: StateBackendAdmin = factory.admin({}, 1)
        del backup, restore, admin
        return factory
