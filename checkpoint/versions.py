"""Which checkpoint versions a job writes and reads: `task.checkpoint.write.versions` / `.read.versions`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from samsa.checkpoint.exceptions import CheckpointError

WRITE_VERSIONS_KEY = "task.checkpoint.write.versions"
READ_VERSIONS_KEY = "task.checkpoint.read.versions"
DEFAULT_WRITE_VERSIONS = (1, 2)
# Highest priority first: read V2 when a task has one, else fall back to V1.
DEFAULT_READ_VERSIONS = (2, 1)
KNOWN_VERSIONS = frozenset({1, 2})


def checkpoint_versions(config: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """(write versions, read versions in priority order) from a job config; errors name the key."""
    write = parse_versions(WRITE_VERSIONS_KEY, config.get(WRITE_VERSIONS_KEY), DEFAULT_WRITE_VERSIONS)
    read = parse_versions(READ_VERSIONS_KEY, config.get(READ_VERSIONS_KEY), DEFAULT_READ_VERSIONS)
    return write, read


def parse_versions(key: str, value: Any, default: Sequence[int]) -> list[int]:
    """A comma list (`"2,1"`), a list of ints or strings, or one int; None (unset) means `default`."""
    if value is None:
        return list(default)
    items: list[Any]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")] if value.strip() else []
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise CheckpointError(f"{key} = {value!r}: write a comma list of checkpoint versions, like 1,2")
    if not items:
        raise CheckpointError(f"{key} is empty: name at least one checkpoint version (1, 2)")
    versions: list[int] = []
    for item in items:
        version = _version(item)
        if version not in KNOWN_VERSIONS:
            raise CheckpointError(
                f"{key} = {value!r}: {item!r} is not a checkpoint version; the versions are 1 and 2"
            )
        if version in versions:
            raise CheckpointError(f"{key} = {value!r}: version {version} is listed twice")
        versions.append(version)
    return versions


def validate_versions(key: str, versions: Sequence[int]) -> list[int]:
    """Checks an already-parsed list (e.g. a caller's argument) with the same rules."""
    return parse_versions(key, list(versions) if versions else [], ())


def _version(item: Any) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, str) and item.strip().isdigit() and item.strip().isascii():
        return int(item.strip())
    return None
