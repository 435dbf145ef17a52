"""Early writeback of restored files (Linux `sync_file_range`), so the fsync that ends each file is short.

A download writes tens of MB per file into the page cache; left alone, all of it reaches the disk only at
the closing fsync, after the last byte arrived. Starting the writeback every few MB overlaps it with the
download (RocksDB's `bytes_per_sync` does the same for its own files).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

INTERVAL = 8 << 20
"""Bytes written between two writeback requests."""

_SYNC_FILE_RANGE_WRITE = 2  # start writing the dirty pages of the range; do not wait for them


def _load() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_sync_file_range = _load()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Asks the kernel to start writing bytes [offset, offset + length) of `fd` to disk, without waiting.

    Only a hint: a no-op where unsupported, and a failure is ignored, because the fsync that ends the
    file is what makes it durable.
    """
    if _sync_file_range is not None:
        _sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE)
