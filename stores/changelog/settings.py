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


@dataclass(frozen=True, slots=True)
class ChangelogSettings:
    """One store's changelog settings, read from its `stores.<s>.*` keys (prefix removed)."""

    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = DEFAULT_MIN_COMPACTION_LAG_MS
    replication_factor: int = DEFAULT_REPLICATION_FACTOR

    @classmethod
    def of(cls, store: str, config: Mapping[str, str]) -> ChangelogSettings:
        return cls(
            delete_retention_ms=_int(
                store, config, "changelog.delete.retention.ms", DEFAULT_DELETE_RETENTION_MS, 0
            ),
            min_compaction_lag_ms=_int(
                store, config, "changelog.min.compaction.lag.ms", DEFAULT_MIN_COMPACTION_LAG_MS, 0
            ),
            replication_factor=_replication_factor(store, config),
        )

    def restore_age_limit_ms(self) -> float:
        """How old a checkpoint may be for a restore to trust what it judges by the checkpoint's age: a local
        dir's changelog tail (`delete.retention.ms`) and undoing the writes after it (the compaction lag)."""
        return min(COMPACTION_LAG_MARGIN * self.min_compaction_lag_ms, self.delete_retention_ms)

    def topic_config(self) -> dict[str, str]:
        """The topic configuration a changelog is created with."""
        return {
            "cleanup.policy": "compact",
            "delete.retention.ms": str(self.delete_retention_ms),
            "min.compaction.lag.ms": str(self.min_compaction_lag_ms),
        }


def _int(store: str, config: Mapping[str, str], sub: str, default: int, least: int) -> int:
    raw = config.get(sub)
    if raw is None or not str(raw).strip():
        return default
    key = f"stores.{store}.{sub}"
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
