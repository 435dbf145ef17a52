"""Changelog topics: created compacted with one partition per task, and validated at start."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from samsa.kafka import KafkaAdmin, TopicMismatchError, TopicNotFoundError
from samsa.stores.changelog.settings import ChangelogSettings
from samsa.stores.exceptions import StoreConfigError
from samsa.streams import SystemStream

log = logging.getLogger(__name__)

AdminFor = Callable[[str], KafkaAdmin]
"""System name -> a KafkaAdmin on that system's cluster (closed by the caller of this module)."""


def check_unique_changelogs(changelogs: Mapping[str, SystemStream]) -> None:
    """Two stores writing one changelog would restore each other's keys: refuse, naming both."""
    owner: dict[SystemStream, str] = {}
    for store in sorted(changelogs):
        stream = changelogs[store]
        other = owner.setdefault(stream, store)
        if other != store:
            raise StoreConfigError(
                f"stores.{store}.changelog",
                f"{stream} is also the changelog of store {other!r}; stores {other!r} and {store!r} "
                "need a changelog stream each",
            )


class ChangelogAdmin:
    """`StateBackendAdmin` of the changelog backend for the stores it backs up."""

    def __init__(
        self,
        stores: Mapping[str, Mapping[str, str]],
        changelogs: Mapping[str, SystemStream],
        task_count: int,
        admin_for: AdminFor,
    ) -> None:
        missing = sorted(set(stores) - set(changelogs))
        if missing:
            raise StoreConfigError(
                f"stores.{missing[0]}.changelog",
                f"store(s) {', '.join(missing)} are backed up by the changelog backend but have no "
                "changelog; "
                "set stores.<s>.changelog=<system>.<stream> or choose another backup factory",
            )
        check_unique_changelogs({s: changelogs[s] for s in stores})
        self._changelogs = {s: changelogs[s] for s in sorted(stores)}
        self._settings = {s: ChangelogSettings.of(s, stores[s]) for s in self._changelogs}
        self._task_count = task_count
        self._admin_for = admin_for

    def create_resources(self) -> None:
        """Create each missing changelog; an existing one must have `task_count` partitions and compaction."""
        with self._admins() as admin_of:
            for store, stream in self._changelogs.items():
                settings = self._settings[store]
                created = admin_of(stream.system).ensure_topic(
                    stream.stream, self._task_count, settings.topic_config(), settings.replication_factor
                )
                if created:
                    log.info(
                        "created changelog %s of store %s (%d partitions, compacted)",
                        stream,
                        store,
                        self._task_count,
                    )
                else:
                    self._check_compaction_lag(admin_of(stream.system), store, stream)

    def validate_resources(self) -> None:
        """Check, without creating anything, that every changelog exists and fits (errors name the topic)."""
        by_system: dict[str, list[str]] = {}
        for stream in self._changelogs.values():
            by_system.setdefault(stream.system, []).append(stream.stream)
        with self._admins() as admin_of:
            counts: dict[str, int | None] = {}
            for system, topics in by_system.items():
                found = admin_of(system).partition_counts(topics)
                missing = [t for t, n in found.items() if n is None]
                if missing:
                    raise TopicNotFoundError(missing, admin_of(system).bootstrap_servers)
                counts.update({f"{system}.{t}": n for t, n in found.items()})
            for store, stream in self._changelogs.items():
                admin = admin_of(stream.system)
                actual = counts[str(stream)]
                if actual != self._task_count:
                    raise TopicMismatchError(
                        stream.stream,
                        "partitions",
                        self._task_count,
                        actual,
                        f"the changelog of store {store!r} needs one partition per task; delete the topic "
                        "(its state is then lost) or run the job with as many tasks as it has partitions",
                    )
                policy = admin.topic_config(stream.stream).get("cleanup.policy", "delete")
                if {p.strip() for p in policy.split(",")} != {"compact"}:
                    raise TopicMismatchError(
                        stream.stream,
                        "cleanup.policy",
                        "compact",
                        policy,
                        f"the changelog of store {store!r} must be compacted only (deletion by retention "
                        "loses state): alter the topic's cleanup.policy to compact",
                    )
                self._check_compaction_lag(admin, store, stream)

    def _check_compaction_lag(self, admin: KafkaAdmin, store: str, stream: SystemStream) -> None:
        # Restore undoes uncommitted writes only while compaction cannot yet have dropped the committed
        # records they supersede, and reuses local state only while its deletes' tombstones remain: a topic
        # laxer than the config would let restore count inputs twice or bring deleted keys back.
        settings = self._settings[store]
        topic = admin.topic_config(stream.stream)
        for name, wanted in (
            ("min.compaction.lag.ms", settings.min_compaction_lag_ms),
            ("delete.retention.ms", settings.delete_retention_ms),
        ):
            have = int(topic.get(name, "0"))
            if have < wanted:
                raise TopicMismatchError(
                    stream.stream,
                    name,
                    wanted,
                    have,
                    f"raise the topic's {name} to at least {wanted} (kafka-configs --alter), or lower "
                    f"stores.{store}.changelog.{name} to {have}",
                )

    @contextmanager
    def _admins(self) -> Iterator[Callable[[str], KafkaAdmin]]:
        opened: dict[str, KafkaAdmin] = {}

        def admin_of(system: str) -> KafkaAdmin:
            if system not in opened:
                opened[system] = self._admin_for(system)
            return opened[system]

        try:
            yield admin_of
        finally:
            for admin in opened.values():
                admin.close()
