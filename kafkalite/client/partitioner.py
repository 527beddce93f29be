"""Kafka's default partitioning of produced records (layer 1: no I/O).

A record with a key goes to ``toPositive(murmur2(key)) % partitions``: Kafka's
``BuiltInPartitioner.partitionForKey`` (the Java DefaultPartitioner) and librdkafka's
``murmur2_random`` partitioner give the same partition for the same key bytes, so a key written
by any of them lands where the others put it. ``murmur2`` is Kafka's ``Utils.murmur2``: the 32-bit
MurmurHash2 with seed 0x9747b28c over little-endian 4-byte words, returned as a signed int32 as
Java does. A record without a key is not hashed (see ``StickyPartitioner``).
"""

from __future__ import annotations

import random

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)`` (a signed 32-bit value)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``partitions``."""
    if partitions <= 0:
        raise ValueError(f"a topic has at least one partition, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Records without a key: all of one batch to one partition, the next batch to another
    (KIP-480's sticky partitioner: big batches, yet every partition gets its share). The first
    partition is random, as Kafka's is, so that many short-lived producers do not all start on
    partition 0; after that the partitions are taken in turn."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._next: int | None = None

    def partition_for_batch(self, partitions: int) -> int:
        if partitions <= 0:
            raise ValueError(f"a topic has at least one partition, got {partitions}")
        if self._next is None:
            self._next = self._rng.randrange(partitions)
        chosen = self._next % partitions
        self._next = chosen + 1
        return chosen
