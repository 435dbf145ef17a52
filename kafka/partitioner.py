"""Kafka's partition of a keyed record as the Java client computes it: toPositive(murmur2(key)) % partitions.

librdkafka's `murmur2_random` partitioner (Samsa's producer default) agrees with it; Python's `hash()` and
librdkafka's default (`consistent_random`, CRC32) do not. Batch jobs that must put a key where the
streaming job will look for it (state bootstrap) partition with `partition_for`.
"""

from __future__ import annotations

import struct

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
