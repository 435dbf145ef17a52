"""Kafka's partition of a keyed record as the Java client computes it: toPositive(murmur2(key)) % partitions.

librdkafka's `murmur2_random` partitioner (Samsa's producer default) agrees with it; Python's `hash()` and
librdkafka's default (`consistent_random`, CRC32) do not. Batch jobs that must put a key where the
streaming job will look for it (state bootstrap) partition with `partition_for`, or with
`consistent_partition_for` where the inputs' producers use librdkafka's default.
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
# One compiled little-endian word reader per key length (in words): keys come in few lengths.
_WORDS: dict[int, struct.Struct] = {}


def murmur2(data: bytes) -> int:
    """`org.apache.kafka.common.utils.Utils.murmur2`: the 32-bit hash as Java's signed int."""
    h = _hash(data)
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def partition_for(key: bytes, partitions: int) -> int:
    """The partition the Java producer's default partitioner gives `key` among `partitions`."""
    return (_hash(key) & 0x7FFFFFFF) % partitions


def consistent_partition_for(key: bytes, partitions: int) -> int:
    """The partition librdkafka's `consistent` and `consistent_random` partitioners give a non-empty `key`:
    `rd_crc32(key) % partition_cnt`, the CRC-32 of zlib taken as unsigned (no sign masking, unlike murmur2).
    confluent-kafka's producers use it unless told otherwise; `consistent_random` places an empty key at
    random."""
    return zlib.crc32(key) % partitions


def consistent_partitions_for(keys: Sequence[bytes], partitions: int) -> list[int]:
    """`consistent_partition_for` of each key (zlib's CRC-32 is C already: no batching trick needed)."""
    crc32 = zlib.crc32
    return [crc32(key) % partitions for key in keys]


def _hash(data: bytes) -> int:
    """murmur2 as an unsigned 32-bit value (the arithmetic kept in range by masking)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n = length >> 2
    if n:
        reader = _WORDS.get(n)
        if reader is None:
            reader = _WORDS[n] = struct.Struct(f"<{n}I")
        for k in reader.unpack_from(data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    rest = length & 3
    if rest:
        tail = n << 2
        if rest == 3:
            h ^= data[tail + 2] << 16
        if rest >= 2:
            h ^= data[tail + 1] << 8
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def partitions_for(keys: Sequence[bytes], partitions: int) -> list[int]:
    """`partition_for` of each key, computed a batch at a time (about 5x faster than one call a key:
    for batch jobs placing millions of keys)."""
    by_length: dict[int, list[int]] = {}
    for at, key in enumerate(keys):
        by_length.setdefault(len(key), []).append(at)
    if len(by_length) == 1:
        (length,) = by_length
        return _same_length(b"".join(keys), length, len(keys), partitions)
    out = [0] * len(keys)
    for length, where in by_length.items():
        placed = _same_length(b"".join([keys[at] for at in where]), length, len(where), partitions)
        for at, partition in zip(where, placed, strict=True):
            out[at] = partition
    return out


def _same_length(data: bytes, length: int, count: int, partitions: int) -> list[int]:
    """murmur2 (as `_hash`) of `count` keys of `length` bytes, concatenated in `data`.

    Why this shape: each key's 32-bit arithmetic runs in its own 64-bit lane of one big Python int, so
    every step is one C-level operation over the whole batch; a product of two 32-bit values fits in a
    lane and the mask after each step keeps lanes from leaking into each other.
    """
    if count == 0:
        return []
    lane_bytes = 8 * count
    ones = int.from_bytes(b"\x01\0\0\0\0\0\0\0" * count, "little")
    mask = _MASK * ones
    h = ((_SEED ^ length) & _MASK) * ones
    words = length >> 2
    for word in range(words):
        k = _lanes(data, 4 * word, 4, length, lane_bytes)
        k = (k * _M) & mask
        k = (k ^ (k >> 24)) & mask
        h = ((h * _M) & mask) ^ ((k * _M) & mask)
    rest = length & 3
    if rest:
        h = ((h ^ _lanes(data, 4 * words, rest, length, lane_bytes)) * _M) & mask
    h = (h ^ (h >> 13)) & mask
    h = (h * _M) & mask
    h = (h ^ (h >> 15)) & (0x7FFFFFFF * ones)
    lanes = memoryview(h.to_bytes(lane_bytes, sys.byteorder)).cast("Q")
    return [value % partitions for value in (lanes if sys.byteorder == "little" else lanes[::-1])]


def _lanes(data: bytes, start: int, width: int, stride: int, lane_bytes: int) -> int:
    """Bytes `start..start+width` of every `stride`-byte key, each as the little-endian value of a lane."""
    out = bytearray(lane_bytes)
    for byte in range(width):
        out[byte::8] = data[start + byte :: stride]
    return int.from_bytes(out, "little")
