"""The `stores.<s>.changelog.*` settings the changelog backend reads, with Samza's defaults."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from samsa.stores.changelog.actions import COMPACTION_LAG_MARGIN
from samsa.stores.exceptions import StoreConfigError

# Tombstones stay readable this long (Samza's default); local state older than this may miss deletes.
DEFAULT_DELETE_RETENTION_MS = 86_400_000
# Records younger than this are never compacted (Samza's default); trimming relies on it.
DEFAULT_MIN_COMPACTION_LAG_MS = 14_400_000
# -1: the broker's default.replication.factor.
DEFAULT_REPLICATION_FACTOR = -1
# Samza's prefix of a changelog's own topic settings (KafkaConfig's CHANGELOG_STREAM_KAFKA_SETTINGS): each
# `stores.<s>.changelog.kafka.<setting>` is passed as <setting> when the changelog is created.
TOPIC_SETTINGS_PREFIX = "changelog.kafka."
# Topic settings Samsa has keys of its own for (under `stores.<s>.changelog.`): the passthrough may repeat
# them, with the same value.
_OWN_SETTINGS = ("delete.retention.ms", "min.compaction.lag.ms")


@dataclass(frozen=True, slots=True)
class ChangelogSettings:
    """One store's changelog settings, read from its `stores.<s>.*` keys (prefix removed)."""

    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = DEFAULT_MIN_COMPACTION_LAG_MS
    replication_factor: int = DEFAULT_REPLICATION_FACTOR
    #: The other topic settings of `stores.<s>.changelog.kafka.*` (e.g. max.message.bytes), sorted pairs.
    extra: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, store: str, config: Mapping[str, str]) -> ChangelogSettings:
        passed = _topic_settings(store, config)
        return cls(
            delete_retention_ms=_own_or_passed(
                store, config, passed, "delete.retention.ms", DEFAULT_DELETE_RETENTION_MS
            ),
            min_compaction_lag_ms=_own_or_passed(
                store, config, passed, "min.compaction.lag.ms", DEFAULT_MIN_COMPACTION_LAG_MS
            ),
            replication_factor=_replication_factor(store, config),
            extra=tuple(sorted((k, v) for k, v in passed.items() if k not in _OWN_SETTINGS)),
        )

    def restore_age_limit_ms(self) -> float:
        """How old a checkpoint may be for a restore to trust what it judges by the checkpoint's age: a local
        dir's changelog tail (`delete.retention.ms`) and undoing the writes after it (the compaction lag)."""
        return min(COMPACTION_LAG_MARGIN * self.min_compaction_lag_ms, self.delete_retention_ms)

    def topic_config(self) -> dict[str, str]:
        """The topic configuration a changelog is created with."""
        return {
            **dict(self.extra),
            "cleanup.policy": "compact",
            "delete.retention.ms": str(self.delete_retention_ms),
            "min.compaction.lag.ms": str(self.min_compaction_lag_ms),
        }


def _topic_settings(store: str, config: Mapping[str, str]) -> dict[str, str]:
    """The `stores.<store>.changelog.kafka.*` settings (prefix removed), refusing those that contradict the
    changelog Samsa needs: not compacted only, or a whole-number setting that is not one."""
    passed = {
        k[len(TOPIC_SETTINGS_PREFIX) :]: str(v).strip()
        for k, v in config.items()
        if k.startswith(TOPIC_SETTINGS_PREFIX) and v is not None and str(v).strip()
    }
    policy = passed.pop("cleanup.policy", None)
    if policy is not None and not compacted_only(policy):
        raise StoreConfigError(
            f"stores.{store}.{TOPIC_SETTINGS_PREFIX}cleanup.policy",
            f"{policy!r} contradicts stores.{store}.changelog: a changelog is compacted only (deletion by "
            "retention loses the store's state), and Samsa creates it with cleanup.policy=compact; remove "
            "the key",
        )
    if "replication.factor" in passed:
        # Not a topic config: the broker would refuse the creation naming only its own setting.
        raise StoreConfigError(
            f"stores.{store}.{TOPIC_SETTINGS_PREFIX}replication.factor",
            f"a changelog's replication factor is set by stores.{store}.changelog.replication.factor; use "
            "that key",
        )
    for name in (*_OWN_SETTINGS, "max.message.bytes"):
        if name in passed:
            # As the broker reads it ("20_000_000" is a whole number to Python only).
            value = _int(store, passed, name, 0, 0, key=f"stores.{store}.{TOPIC_SETTINGS_PREFIX}{name}")
            passed[name] = str(value)
    return passed


def compacted_only(policy: str) -> bool:
    """Whether a topic's cleanup.policy is compaction only, as a changelog's must be."""
    return {p.strip() for p in policy.split(",")} == {"compact"}


def _own_or_passed(
    store: str, config: Mapping[str, str], passed: Mapping[str, str], name: str, default: int
) -> int:
    """Setting `name` from Samsa's key `stores.<store>.changelog.<name>` or Samza's passthrough
    `stores.<store>.changelog.kafka.<name>`: refused when both are set and differ."""
    own = _int(store, config, f"changelog.{name}", default, 0)
    if name not in passed:
        return own
    value = int(passed[name])
    own_raw = config.get(f"changelog.{name}")
    if own_raw is not None and str(own_raw).strip() and own != value:
        key = f"stores.{store}.changelog.{name}"
        raise StoreConfigError(
            key,
            f"{own} contradicts stores.{store}.{TOPIC_SETTINGS_PREFIX}{name}={value}: both set the "
            f"changelog's {name}; keep one of them (or give both the same value)",
        )
    return value


def size_note(store: str, topic: str) -> str:
    """What a too-large record's error says of `store`'s changelog `topic`: the key raising its limit."""
    return (
        f"Topic {topic!r} is the changelog of store {store!r}: "
        f"stores.{store}.{TOPIC_SETTINGS_PREFIX}max.message.bytes sets its max.message.bytes when Samsa "
        "creates it; an existing changelog keeps its own (kafka-configs --alter --entity-type topics "
        f"--entity-name {topic} --add-config max.message.bytes=<bytes>)."
    )


def _int(
    store: str, config: Mapping[str, str], sub: str, default: int, least: int, key: str | None = None
) -> int:
    raw = config.get(sub)
    if raw is None or not str(raw).strip():
        return default
    key = key or f"stores.{store}.{sub}"
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise StoreConfigError(key, f"{raw!r} is not a whole number") from None
    if value < least:
        raise StoreConfigError(key, f"{value} is below {least}")
    return value


def _replication_factor(store: str, config: Mapping[str, str]) -> int:
    value = _int(store, config, "changelog.replication.factor", DEFAULT_REPLICATION_FACTOR, -1)
    if value == 0:
        raise StoreConfigError(
            f"stores.{store}.changelog.replication.factor", "0 is invalid: use -1 (broker default) or >= 1"
        )
    return value


def idle_commit_bound_ms(stores: Iterable[tuple[str, Mapping[str, str]]]) -> float:
    """How long a task with these changelogged stores (name, its `stores.<s>.*` keys) may leave out its idle
    timer commits: half the tightest `restore_age_limit_ms`, so a checkpoint never ages past it while the job
    runs (a crash right after the task wakes up must still undo its uncommitted writes). No bound without
    such stores."""
    limits = [ChangelogSettings.of(name, config).restore_age_limit_ms() for name, config in stores]
    return min(limits) / 2 if limits else float("inf")
