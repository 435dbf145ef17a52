"""The changelog backend's state checkpoint marker: a store's changelog partition and offset at a commit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from samsa.stores.changelog.exceptions import ChangelogMarkerError
from samsa.streams import SystemStreamPartition

MARKER_VERSION = 1


@dataclass(frozen=True, slots=True)
class ChangelogMarker:
    """`offset` is the last offset written to `changelog` when the commit snapshot was taken (None: empty)."""

    changelog: SystemStreamPartition
    offset: int | None

    def encode(self) -> str:
        """The marker as stored in Checkpoint V2 and local marker files (structured JSON, no dotted names)."""
        ssp = self.changelog
        return json.dumps(
            {
                "version": MARKER_VERSION,
                "changelog": {"system": ssp.system, "stream": ssp.stream, "partition": ssp.partition},
                "offset": self.offset,
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str, store: str | None = None) -> ChangelogMarker:
        """Reads `encode()`'s output; anything else raises `ChangelogMarkerError` naming marker and store."""
        try:
            data = json.loads(text)
        except (ValueError, TypeError) as e:
            raise ChangelogMarkerError(str(text), f"not JSON ({e})", store) from None
        if not isinstance(data, dict):
            raise ChangelogMarkerError(text, "not a JSON object", store)
        version = data.get("version")
        if version != MARKER_VERSION:
            raise ChangelogMarkerError(text, f"version {version!r} is not {MARKER_VERSION}", store)
        changelog = data.get("changelog")
        if not isinstance(changelog, dict):
            raise ChangelogMarkerError(text, "'changelog' is not an object", store)
        system, stream, partition = (
            changelog.get("system"),
            changelog.get("stream"),
            changelog.get("partition"),
        )
        if not (isinstance(system, str) and system and isinstance(stream, str) and stream):
            raise ChangelogMarkerError(
                text, "'changelog' needs non-empty 'system' and 'stream' strings", store
            )
        if not isinstance(partition, int) or not _is_offset(partition):
            raise ChangelogMarkerError(text, "'changelog.partition' is not a non-negative integer", store)
        if "offset" not in data:
            raise ChangelogMarkerError(text, "'offset' is missing (null for an empty changelog)", store)
        offset = data["offset"]
        if offset is not None and not _is_offset(offset):
            raise ChangelogMarkerError(text, "'offset' is neither null nor a non-negative integer", store)
        return cls(SystemStreamPartition(system, stream, partition), offset)


def _is_offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
