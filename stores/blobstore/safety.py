"""Names from a snapshot index are untrusted: each must name an entry directly inside its directory."""

from __future__ import annotations

import os
from pathlib import Path

from samsa.stores.blobstore.exceptions import UnsafeIndexError

_FORBIDDEN = ("/", "\\", "\x00")


def check_name(name: str, kind: str) -> str:
    """Returns `name` when it is one plain path segment; raises `UnsafeIndexError` naming it otherwise."""
    if not name or name in (".", "..") or any(c in name for c in _FORBIDDEN) or os.path.isabs(name):
        raise UnsafeIndexError(
            f"{kind} name {name!r} is not a plain name inside the store dir (empty, '.', '..', absolute, "
            "or holding a path separator); the index is corrupt or crafted - nothing was written"
        )
    return name


def child(parent: Path, name: str, kind: str) -> Path:
    """`parent / name`, refused when the name is unsafe or an entry of that name is a symlink."""
    path = parent / check_name(name, kind)
    if path.is_symlink():
        raise UnsafeIndexError(
            f"{kind} {path} is a symbolic link; a restore never writes through links - remove it"
        )
    return path
