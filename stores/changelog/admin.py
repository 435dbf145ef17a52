"""Changelog topics: created compacted with one partition per task, and validated at start."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from samsa.kafka import KafkaAdmin, TopicMismatchError, TopicNotFoundError
from samsa.stores.changelog.settings import ChangelogSettings, compacted_only
from samsa.stores.exceptions import StoreConfigError
from samsa.streams import SystemStream

log = logging.getLogger(__name__)

# The settings Samsa creates a changelog with (`ChangelogSettings.topic_config`): set on the topic itself.
_SAMSA_SETTINGS = frozenset({"cleanup.policy", "delete.retention.ms", "min.compaction.lag.ms"})

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
        inputs: Mapping[str, int] | None = None,
    ) -> None:
        """`inputs`: partition count of each input grouped into tasks (`system.stream` -> count), which
        make the `task_count` tasks; a refusal of a changelog's partition count says why from them."""
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
        self._inputs = dict(inputs or {})

    def create_resources(self) -> None:
        """Create each missing changelog; an existing one must have `task_count` partitions and compaction."""
        with self._admins() as admin_of:
            counts = self._partition_counts(admin_of)
            for store, stream in self._changelogs.items():
                admin = admin_of(stream.system)
                if counts[stream] is not None:
                    self._check_existing(admin, store, stream, counts[stream])
                    continue
                settings = self._settings[store]
                created = admin.ensure_topic(
                    stream.stream, self._task_count, settings.topic_config(), settings.replication_factor
                )
                if created:
                    log.info(
                        "created changelog %s of store %s (%d partitions, compacted)",
                        stream,
                        store,
                        self._task_count,
                    )
                else:  # another container created it meanwhile; ensure_topic checked partitions and policy
                    self._check_settings(admin, store, stream)

    def validate_resources(self) -> None:
        """Check, without creating anything, that every changelog exists and fits (errors name the topic)."""
        with self._admins() as admin_of:
            counts = self._partition_counts(admin_of)
            for system in dict.fromkeys(stream.system for stream in self._changelogs.values()):
                missing = [s.stream for s, n in counts.items() if s.system == system and n is None]
                if missing:
                    raise TopicNotFoundError(missing, admin_of(system).bootstrap_servers)
            for store, stream in self._changelogs.items():
                self._check_existing(admin_of(stream.system), store, stream, counts[stream])

    def _check_existing(
        self, admin: KafkaAdmin, store: str, stream: SystemStream, actual: int | None
    ) -> None:
        """Raise unless the existing changelog of `store`, of `actual` partitions, has one per task, is
        compacted only and keeps records as long as the config asks."""
        if actual is not None and actual != self._task_count:
            raise self._partitions_refused(store, stream, actual)
        self._check_settings(admin, store, stream)

    def _partition_counts(self, admin_of: Callable[[str], KafkaAdmin]) -> dict[SystemStream, int | None]:
        """Each changelog's partition count (None: it does not exist), from one metadata fetch per system
        (a cluster's full metadata is large; a job has a changelog per store)."""
        by_system: dict[str, list[str]] = {}
        for stream in self._changelogs.values():
            by_system.setdefault(stream.system, []).append(stream.stream)
        counts: dict[SystemStream, int | None] = {}
        for system, topics in by_system.items():
            found = admin_of(system).partition_counts(topics)
            counts.update({SystemStream(system, t): n for t, n in found.items()})
        return counts

    def _partitions_refused(self, store: str, stream: SystemStream, actual: int) -> TopicMismatchError:
        """The refusal of `store`'s changelog of `actual` partitions, naming the store, why the job has the
        tasks it has, and a way on that neither loses nor silently splits the store's state."""
        n, topic = self._task_count, stream.stream
        widest = sorted(s for s, count in self._inputs.items() if count == n)
        narrower = {s: count for s, count in sorted(self._inputs.items()) if count < n}
        because = (
            f" because input{'s' if len(widest) > 1 else ''} {', '.join(widest)} "
            f"{'have' if len(widest) > 1 else 'has'} {n} partitions (tasks group the inputs' partitions by "
            f"number{''.join(f'; {s} has {count}' for s, count in narrower.items())})"
            if widest
            else ""
        )
        lost = f"deleting topic {topic!r} so it is recreated loses the store's state"
        head = (
            f"It is the changelog of store {store!r}, one partition per task, and the job now has {n} "
            f"tasks{because}."
        )
        if actual < n and any(count == actual for count in narrower.values()):
            new = ", ".join(widest)
            fix = (
                f"{head} Inputs of different partition counts are not co-partitioned: a key's records in "
                f"{new} reach another task than its records in {', '.join(narrower)}, so the store's "
                f"per-key state would be split across tasks. Repartition {new} to {actual} partitions, as "
                f"Samza users do (a job that sends its records, keyed alike, to a topic of {actual} "
                f"partitions, read instead of it), and the job keeps its {actual} tasks and their state. "
                f"Growing the changelog to {n} partitions lets the job start with the state split so (its "
                f"{actual} tasks keep theirs); {lost}."
            )
        elif actual < n:
            fix = (
                f"{head} The store's state is placed by the {actual} tasks the changelog was made for: "
                f"with {n} tasks, keys would move to other tasks, away from their state. Samsa does not "
                f"repartition state; run the job with inputs that make {actual} tasks, or, giving the state "
                f"up, {lost}."
            )
        else:
            fix = (
                f"{head} The changelog was made for {actual} tasks: the state of tasks {n} to {actual - 1} "
                f"would be left behind and keys would move to other tasks. Run the job with the inputs that "
                f"made {actual} tasks, or, giving the state up, {lost}."
            )
        return TopicMismatchError(topic, "partitions", n, actual, fix)

    def _check_settings(self, admin: KafkaAdmin, store: str, stream: SystemStream) -> None:
        """Raise naming every setting of `store`'s changelog that is not what the config asks (all at once:
        one start per setting would take as many starts to learn them), and saying so when the topic looks
        auto-created by the broker (recreated after a deletion) rather than made by Samsa."""
        topic = admin.topic_config(stream.stream)
        settings = self._settings[store]
        self._warn_other_settings(store, stream, topic)
        wrong: list[tuple[str, object, object]] = []  # (setting, wanted, actual)
        policy = topic.get("cleanup.policy", "delete")
        if not compacted_only(policy):
            wrong.append(("cleanup.policy", "compact", policy))
        # Restore undoes uncommitted writes only while compaction cannot yet have dropped the committed
        # records they supersede, and reuses local state only while its deletes' tombstones remain: a topic
        # laxer than the config would let restore count inputs twice or bring deleted keys back.
        for name, wanted in (
            ("min.compaction.lag.ms", settings.min_compaction_lag_ms),
            ("delete.retention.ms", settings.delete_retention_ms),
        ):
            have = int(topic.get(name, "0"))
            if have < wanted:
                wrong.append((name, wanted, have))
        if not wrong:
            return
        (setting, expected, actual), others = wrong[0], wrong[1:]
        text = f"It is the changelog of store {store!r}"
        if others:
            text += ", and also has " + " and ".join(f"{n}={a} ({w} required)" for n, w, a in others)
        text += (
            ": a changelog must be compacted only (deletion by retention loses state) and keep records as "
            f"long as stores.{store}.changelog.min.compaction.lag.ms and .delete.retention.ms say (restore "
            "relies on them)."
        )
        fix = (
            f"kafka-configs --alter --entity-type topics --entity-name {stream.stream} --add-config "
            + ",".join(f"{n}={w}" for n, w, _ in wrong)
        )
        if setting == "cleanup.policy" and admin.broker_defaults(stream.stream) >= _SAMSA_SETTINGS:
            # Samsa creates a changelog with these set on the topic itself: none of them is.
            text += (
                " None of the settings Samsa creates a changelog with is set on the topic (all are the "
                "broker's defaults): it looks auto-created by the broker, e.g. recreated by a client's "
                "write or read after it was deleted while the job ran. If the job used this changelog "
                "before, the changelog was lost and what the topic holds is not the store's state: stop the "
                "job and delete the topic; the next start creates it compacted and rebuilds it from the "
                "store's local copy where the job last ran, or, elsewhere, refuses naming the ways on "
                f"(docs/state.md, a lost changelog). If you made the topic for the job, set them all: {fix}"
            )
        else:
            text += f" Set them all at once: {fix}"
        lower = [f"stores.{store}.changelog.{n}={a}" for n, _, a in wrong if n != "cleanup.policy"]
        if lower:
            text += f"; or lower the job's keys to the topic's: {', '.join(lower)}"
        raise TopicMismatchError(stream.stream, setting, expected, actual, text)

    def _warn_other_settings(self, store: str, stream: SystemStream, topic: Mapping[str, str]) -> None:
        """Warn of each `stores.<s>.changelog.kafka.*` setting the existing changelog does not have (a
        smaller max.message.bytes, any other that differs), naming the command that sets it: they apply when
        Samsa creates the changelog, and Samsa never alters a topic."""
        for name, wanted in self._settings[store].extra:
            have = topic.get(name)
            if have is None or have == wanted:
                continue
            if name == "max.message.bytes" and int(have) >= int(wanted):
                continue  # a larger limit takes the store's values too
            log.warning(
                "changelog %s of store %s has %s=%s but stores.%s.changelog.kafka.%s=%s: the key applies "
                "when Samsa creates the changelog, and Samsa does not alter an existing one%s. Set it with: "
                "kafka-configs --alter --entity-type topics --entity-name %s --add-config %s=%s",
                stream,
                store,
                name,
                have,
                store,
                name,
                wanted,
                " (a store value larger than the topic's limit fails the job)"
                if name == "max.message.bytes"
                else "",
                stream.stream,
                name,
                wanted,
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
