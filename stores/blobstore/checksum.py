"""CRC32C of files and streams (the only importer of `crc32c`, hardware-accelerated where the CPU has it)."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import crc32c as _crc32c

_READ = 1 << 20


def extend(crc: int, data: bytes | bytearray | memoryview) -> int:
    """The CRC32C of the bytes so far (`crc`) followed by `data`."""
    return int(_crc32c.crc32c(data, crc))


def file_crc(path: Path) -> int:
    """CRC32C of a whole file."""
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(_READ):
            crc = extend(crc, chunk)
    return crc


class CrcReader:
    """Wraps a binary stream being read, keeping the CRC32C and count of the bytes read through it."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.crc = 0
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self._stream.read(n)
        self.crc = extend(self.crc, data)
        self.size += len(data)
        return data
