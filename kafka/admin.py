"""Kafka admin: partition counts, creating/validating/deleting topics."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# confluent_kafka.admin re-exports these without __all__, which strict mypy rejects: import their homes.
from confluent_kafka.admin._config import ConfigResource, ConfigSource
from confluent_kafka.admin._metadata import ClusterMetadata
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.cimpl import NewTopic

from samsa.kafka.client_log import PUMP, PUMP_EVERY_S, ClientLog
from samsa.kafka.config import admin_config, rejected_setting
from samsa.kafka.exceptions import KafkaSystemError, TopicMismatchError, TopicNotFoundError
from samsa.kafka.inmemory import InMemoryAdminClient, is_inmemory

# New topics can take a moment to show in every broker's metadata on a real cluster.
_METADATA_POLL_S = 0.1


def _error_of(e: BaseException) -> KafkaError | None:
    arg = e.args[0] if e.args else None
    return arg if isinstance(arg, KafkaError) else None


def _policy_set(policy: str) -> frozenset[str]:
    return frozenset(p.strip() for p in policy.split(",") if p.strip())


class KafkaAdmin:
    """Topic administration on one cluster."""

    def __init__(self, config: Mapping[str, Any], timeout: float = 30) -> None:
        self._bootstrap = str(config.get("bootstrap.servers", "?"))
        self._timeout = timeout
        self._log = ClientLog(f"Kafka admin ({self._bootstrap})")
        self._serving = threading.Lock()  # held by the pump while it polls the client, and by close
        # Callers pass a system's consumer settings: librdkafka would warn of each consumer-only key.
        conf = admin_config(config)
        conf.setdefault("logger", self._log)
        try:
            if is_inmemory(conf.get("bootstrap.servers")):
                # The in-memory client implements the part of AdminClient's API called here.
                self._admin = cast(AdminClient, InMemoryAdminClient(conf))
            else:
                self._admin = AdminClient(conf)
                # Polled only after a metadata call: the pump delivers its log lines meanwhile.
                PUMP.add(self)
        except (KafkaException, ValueError, TypeError) as e:
            raise rejected_setting(e) from e

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def metadata(self, timeout: float | None = None) -> ClusterMetadata:
        """The cluster's metadata (all topics; never asks the broker to auto-create one)."""
        try:
            found = self._admin.list_topics(timeout=self._timeout if timeout is None else timeout)
        except KafkaException as e:
            raise KafkaSystemError(f"Cannot read cluster metadata from {self._bootstrap}: {e.args[0]}") from e
        finally:
            self._admin.poll(0)  # serves librdkafka's queued log lines (ClientLog: repeats coalesced)
            self._log.served()
        self._log.reachable()
        return found

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Partition count per topic; None for a topic that does not exist."""
        known = self.metadata().topics
        counts: dict[str, int | None] = {}
        for name in topics:
            meta = known.get(name)
            counts[name] = None if meta is None or meta.error is not None else len(meta.partitions)
        return counts

    def require_topics(self, names: Iterable[str]) -> dict[str, int]:
        """Partition count of each topic; raises TopicNotFoundError naming all missing topics."""
        counts = self.partition_counts(names)
        missing = [name for name, n in counts.items() if n is None]
        if missing:
            raise TopicNotFoundError(missing, self._bootstrap)
        return {name: n for name, n in counts.items() if n is not None}

    def topic_config(self, name: str) -> dict[str, str]:
        """The topic's effective configuration (defaults included)."""
        entries = self._topic_entries(name)
        return {key: entry.value for key, entry in entries.items() if entry.value is not None}

    def broker_defaults(self, name: str) -> set[str]:
        """The settings of the topic that it takes from the broker (not set on the topic itself); a setting
        whose source the broker does not say is left out."""
        own = (ConfigSource.UNKNOWN_CONFIG.value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        return {key for key, entry in self._topic_entries(name).items() if entry.source not in own}

    def _topic_entries(self, name: str) -> dict[str, Any]:
        futures = self._admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
        try:
            return dict(next(iter(futures.values())).result(timeout=self._timeout))
        except KafkaException as e:
            err = _error_of(e)
            if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicNotFoundError([name], self._bootstrap) from e
            raise KafkaSystemError(f"Cannot describe the config of topic {name!r}: {e.args[0]}") from e

    def create_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str] | None = None,
        replication_factor: int = -1,
    ) -> None:
        """Create a topic (replication_factor -1: the broker's default); fails if it exists."""
        if not self._create(name, partitions, config, replication_factor):
            raise KafkaSystemError(
                f"Topic {name!r} already exists on {self._bootstrap}; use ensure_topic to accept it."
            )

    def ensure_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str] | None = None,
        replication_factor: int = -1,
    ) -> bool:
        """Create the topic if missing (True), else check it matches (False).

        Checked: the partition count, and cleanup.policy when `config` sets it. A mismatch raises
        TopicMismatchError naming the topic, both values and the fix.
        """
        existing = self.partition_counts([name])[name]
        if existing is None:
            if self._create(name, partitions, config, replication_factor):
                return True
            existing = self.partition_counts([name])[name]  # lost a creation race: validate the winner's
            if existing is None:
                raise KafkaSystemError(f"Topic {name!r} was reported as existing but is not in the metadata")
        self._validate(name, existing, partitions, config)
        return False

    def _validate(self, name: str, actual: int, partitions: int, config: Mapping[str, str] | None) -> None:
        if actual != partitions:
            raise TopicMismatchError(
                name,
                "partitions",
                partitions,
                actual,
                f"Samsa does not repartition existing topics: delete topic {name!r} (its data is lost) "
                f"so it is recreated with {partitions} partitions, or change the job so it expects {actual}.",
            )
        wanted = (config or {}).get("cleanup.policy")
        if wanted is None:
            return
        have = self.topic_config(name).get("cleanup.policy", "delete")
        if _policy_set(have) != _policy_set(wanted):
            raise TopicMismatchError(
                name,
                "cleanup.policy",
                wanted,
                have,
                f"Alter it (kafka-configs --alter --entity-type topics --entity-name {name} "
                f"--add-config cleanup.policy={wanted}) or delete the topic so it is recreated.",
            )

    def _create(
        self, name: str, partitions: int, config: Mapping[str, str] | None, replication_factor: int
    ) -> bool:
        new = NewTopic(name, partitions, replication_factor, config=dict(config or {}))
        future = self._admin.create_topics([new], operation_timeout=self._timeout)[name]
        try:
            future.result(timeout=self._timeout)
        except KafkaException as e:
            err = _error_of(e)
            if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise KafkaSystemError(
                f"Cannot create topic {name!r} ({partitions} partitions, config {dict(config or {})}) "
                f"on {self._bootstrap}: {e.args[0]}"
            ) from e
        self._await_partitions(name, partitions)
        return True

    def _await_partitions(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + self._timeout
        while self.partition_counts([name])[name] != partitions:
            if time.monotonic() > deadline:
                raise KafkaSystemError(
                    f"Topic {name!r} was created but did not show {partitions} partitions in the metadata of "
                    f"{self._bootstrap} within {self._timeout}s"
                )
            time.sleep(_METADATA_POLL_S)

    def delete_topics(self, names: Iterable[str]) -> None:
        """Delete topics; ones that do not exist are ignored."""
        names = list(names)
        if not names:
            return
        futures = self._admin.delete_topics(names, operation_timeout=self._timeout)
        for name, future in futures.items():
            try:
                future.result(timeout=self._timeout)
            except KafkaException as e:
                err = _error_of(e)
                if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise KafkaSystemError(
                    f"Cannot delete topic {name!r} on {self._bootstrap}: {e.args[0]}"
                ) from e

    def serve_logs(self) -> None:
        """Deliver the log lines librdkafka queued since the client was last polled."""
        if time.time() - self._log.served_at >= PUMP_EVERY_S / 2 and self._serving.acquire(blocking=False):
            try:
                if self._admin is not None:
                    self._admin.poll(0)
                    self._log.served()
            finally:
                self._serving.release()
        self._log.tick()

    def close(self) -> None:
        """Release the client (librdkafka frees it when the last reference goes)."""
        with self._serving:
            admin, self._admin = self._admin, None  # type: ignore[assignment]
        PUMP.remove(self)
        if admin is None:
            return
        # What is still queued (the pump serves every PUMP_EVERY_S) is summed up in a line, not logged as new.
        self._log.closing()
        try:
            admin.poll(0)
        finally:
            self._log.closed()

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
