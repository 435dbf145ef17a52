"""A store whose `stores.<s>.changelog` was changed since its task's last checkpoint: checked at start, before
any store is restored (and before an exactly-once start writes its abort records to the changelogs).

The checkpoint's changelog marker names the topic that holds the store's state. While that topic still holds
records, restoring from the newly configured topic would start the store without its state (and the restore
deletes the local copy, which belongs to the old topic): the start is refused (`ChangelogMovedError`, a
config error). A checkpoint's changelog that is deleted or empty held nothing to lose: the start goes on from
the new topic, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.kafka import KafkaAdmin, KafkaConsumer
from samsa.stores.changelog.exceptions import ChangelogMarkerError, ChangelogMovedError
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStream, SystemStreamPartition

log = logging.getLogger(__name__)

#: Whether a changelog topic exists and holds records; None when it cannot be told (its system is not
#: defined in the job's config).
Probe = Callable[[SystemStream], bool | None]


@dataclass(frozen=True, slots=True)
class ChangelogMove:
    """Store `store` has its state in `checkpointed` at the last checkpoint of `tasks`, and is configured
    with `configured` now."""

    store: str
    checkpointed: SystemStream
    configured: SystemStream
    tasks: tuple[str, ...]
    #: False when only guessed from a V1 checkpoint (no store names): warned about, never refused.
    certain: bool = True


def changelog_moves(
    changelogs: Mapping[str, SystemStream],
    markers: Mapping[str, Mapping[str, str] | None],
    v1_offsets: Mapping[str, Iterable[SystemStreamPartition]] | None = None,
) -> list[ChangelogMove]:
    """The stores of `changelogs` (store -> configured changelog, the stores backed up to one) whose
    checkpoint names another changelog. `markers`: task -> its last checkpoint's changelog markers (V2:
    store -> marker). `v1_offsets`: task -> the changelog partitions of its last checkpoint when that is a
    V1 one (no store names): a single changelog no store has now, in a checkpoint without a position for the
    single store that has none, is taken as that store's."""
    found: dict[tuple[str, SystemStream], list[str]] = {}
    guessed: dict[tuple[str, SystemStream], list[str]] = {}
    for task, stores in sorted(markers.items()):
        for store, raw in sorted((stores or {}).items()):
            configured = changelogs.get(store)
            if configured is None:
                continue
            try:
                marker = ChangelogMarker.decode(raw, store)
            except ChangelogMarkerError:
                continue  # the restore fails on it, naming it
            old = marker.changelog.system_stream
            if old != configured:
                found.setdefault((store, old), []).append(task)
    for task, ssps in sorted((v1_offsets or {}).items()):
        streams = {ssp.system_stream for ssp in ssps}
        orphans = streams - set(changelogs.values())
        unmatched = [s for s, stream in changelogs.items() if stream not in streams]
        if len(orphans) == 1 and len(unmatched) == 1:
            guessed.setdefault((unmatched[0], next(iter(orphans))), []).append(task)
    return [
        ChangelogMove(store, old, changelogs[store], tuple(tasks))
        for (store, old), tasks in sorted(found.items())
    ] + [
        # A V1 checkpoint names no store: a store removed and another added in one deploy looks the same as
        # a rename, so the guess is only warned about.
        ChangelogMove(store, old, changelogs[store], tuple(tasks), certain=False)
        for (store, old), tasks in sorted(guessed.items())
        if (store, old) not in found
    ]


def check_changelog_moves(moves: Iterable[ChangelogMove], probe: Probe) -> None:
    """Raises `ChangelogMovedError` naming every move whose checkpointed changelog holds records (or whose
    system is not defined); logs a warning for the others, which restore from the configured changelog."""
    refused: list[tuple[str, str, str, tuple[str, ...], bool | None]] = []
    held: dict[SystemStream, bool | None] = {}
    for move in moves:
        old = move.checkpointed
        if old not in held:
            held[old] = probe(old)
        if not move.certain:
            if held[old] is not False:
                log.warning(
                    "store %s: the last (V1) checkpoint of task(s) %s names no store, and changelog %s, "
                    "which no store has now, holds records: if it is store %s's state (stores.%s.changelog "
                    "was %s, now %s), stop the job and set the key back, or the store starts from what %s "
                    "holds",
                    move.store,
                    ", ".join(move.tasks),
                    old,
                    move.store,
                    move.store,
                    old,
                    move.configured,
                    move.configured,
                )
            continue
        if held[old] is False:
            log.warning(
                "store %s: the last checkpoint of task(s) %s has its state in changelog %s, which is "
                "deleted or empty; stores.%s.changelog is now %s: the store starts from what %s holds",
                move.store,
                ", ".join(move.tasks),
                old,
                move.store,
                move.configured,
                move.configured,
            )
            continue
        refused.append((move.store, str(old), str(move.configured), move.tasks, held[old]))
    if refused:
        raise ChangelogMovedError(refused)


def kafka_probe(config_for: Callable[[str], Mapping[str, Any] | None]) -> Probe:
    """A `Probe` asking the broker of the changelog's system; `config_for(system)`: the system's librdkafka
    consumer config, None when the system is not defined (or hosts no Kafka clients)."""

    def probe(stream: SystemStream) -> bool | None:
        config = config_for(stream.system)
        if config is None:
            return None
        with KafkaAdmin(dict(config)) as admin:
            partitions = admin.partition_counts([stream.stream])[stream.stream] or 0
        if not partitions:
            return False
        with KafkaConsumer(dict(config)) as consumer:
            return any(
                high > low
                for low, high in (consumer.watermarks((stream.stream, p)) for p in range(partitions))
            )

    return probe
