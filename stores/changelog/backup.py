"""Changelog backup: a commit's marker per store is its changelog's newest offset; nothing to upload."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TypeVar

from samsa.kafka.message import TopicPartition
from samsa.stores.backend import Markers
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.streams import SystemStreamPartition

T = TypeVar("T")

Watermarks = Callable[[str, TopicPartition], tuple[int, int]]
"""(system, (topic, partition)) -> (low, high) watermark, asked of the broker (not a cached value)."""


class ChangelogBackupManager:
    """`TaskBackupManager` of one task's changelog-backed stores (Samza's Kafka state backup manager).

    The changelog records are the backup: they are durable once the producer is flushed, which the
    commit does before `snapshot`. The marker records how far the changelog went at that point, so a
    restore can replay exactly that far and undo what came after.
    """

    def __init__(self, changelogs: Mapping[str, SystemStreamPartition], watermarks: Watermarks) -> None:
        self._changelogs = dict(changelogs)
        self._watermarks = watermarks

    def init(self, markers: Markers | None) -> None:
        """Nothing to prepare: every snapshot stands alone."""

    def snapshot(self, checkpoint_id: str) -> Markers:
        """One watermark request per store; the producer was flushed just before, so `high - 1` is ours."""
        markers: Markers = {}
        for store, ssp in self._changelogs.items():
            low, high = self._watermarks(ssp.system, (ssp.stream, ssp.partition))
            markers[store] = ChangelogMarker(ssp, high - 1 if high > low else None).encode()
        return markers

    def upload(self, checkpoint_id: str, markers: Markers) -> Future[Markers]:
        return _done(dict(markers))

    def cleanup(self, checkpoint_id: str, markers: Markers) -> Future[None]:
        return _done(None)

    def close(self) -> None:
        """The watermark client belongs to the backend factory."""


def _done(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future
