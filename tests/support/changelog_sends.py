"""A recorder of the changelog sends of a `LoggedStore`, for store tests."""

from __future__ import annotations


class Sent:
    """Records the changelog sends of a `LoggedStore`."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def __call__(
        self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None
    ) -> None:
        self.records.append((key, value))
