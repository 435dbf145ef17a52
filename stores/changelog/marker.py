"""The changelog backend's state checkpoint marker: a store's changelog partition and offset at a commit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from samsa.stores.changelog.exceptions import ChangelogMarkerError
from samsa.streams import SystemStreamPartition

MARKER_VERSION = 1
# A marker saying more than a position (`rebuilding`, `given_up`): an older reader, which knows version 1
# only, refuses it (`ChangelogMarkerError`) rather than take it for a plain position.
FLAGGED_MARKER_VERSION = 2


@dataclass(frozen=True, slots=True)
class RebuildMark:
    """A rebuild of the changelog from a local copy of the checkpointed state, begun by a start and not
    sealed by a commit yet: only that copy (on `host`, in `local_dir`) holds the checkpointed state."""

    host: str
    local_dir: str


@dataclass(frozen=True, slots=True)
class ChangelogMarker:
    """`offset` is the last offset written to `changelog` when the commit snapshot was taken (None: empty).

    `rebuilding`: a start began rebuilding the lost changelog from a local copy (`actions.rebuild_actions`),
    recorded in the checkpoint before its first rebuild record; the changelog may hold part of the rebuild,
    reaching past `offset`, so only that copy can restore the store until the next commit seals the rebuild.
    `given_up`: the state was given up (`samsa checkpoint forget-*`) while such a rebuild was unsealed: the
    next start empties the store and undoes all its changelog holds.
    """

    changelog: SystemStreamPartition
    offset: int | None
    rebuilding: RebuildMark | None = None
    given_up: bool = False

    def encode(self) -> str:
        """The marker as stored in Checkpoint V2 and local marker files (structured JSON, no dotted names)."""
        ssp = self.changelog
        flagged = self.rebuilding is not None or self.given_up
        data: dict[str, Any] = {
            "version": FLAGGED_MARKER_VERSION if flagged else MARKER_VERSION,
            "changelog": {"system": ssp.system, "stream": ssp.stream, "partition": ssp.partition},
            "offset": self.offset,
        }
        if self.rebuilding is not None:
            data["rebuilding"] = {"host": self.rebuilding.host, "localDir": self.rebuilding.local_dir}
        if self.given_up:
            data["givenUp"] = True
        return json.dumps(data, separators=(",", ":"))

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
        if version not in (MARKER_VERSION, FLAGGED_MARKER_VERSION):
            raise ChangelogMarkerError(
                text, f"version {version!r} is not {MARKER_VERSION} or {FLAGGED_MARKER_VERSION}", store
            )
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
        rebuilding, given_up = None, False
        if version == FLAGGED_MARKER_VERSION:
            rebuilding = _rebuild_mark(text, data.get("rebuilding"), store)
            given_up = data.get("givenUp") is True
        return cls(SystemStreamPartition(system, stream, partition), offset, rebuilding, given_up)


def _rebuild_mark(text: str, value: Any, store: str | None) -> RebuildMark | None:
    if value is None:
        return None
    host = value.get("host") if isinstance(value, dict) else None
    local_dir = value.get("localDir") if isinstance(value, dict) else None
    if not (isinstance(host, str) and isinstance(local_dir, str)):
        raise ChangelogMarkerError(text, "'rebuilding' needs 'host' and 'localDir' strings", store)
    return RebuildMark(host, local_dir)


def _is_offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
