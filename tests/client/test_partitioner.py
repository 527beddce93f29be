"""Kafka's murmur2 partitioning: Kafka's own test vectors, and properties over any key."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.client.partitioner import StickyPartitioner, murmur2, partition_for_key

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_for_key_is_the_positive_hash_modulo_the_count() -> None:
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16
    assert partition_for_key(b"foobar", 50) == 16
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=10_000))
def test_partition_for_key_is_in_range_and_stable(key: bytes, partitions: int) -> None:
    value = murmur2(key)
    assert -(2**31) <= value < 2**31
    p = partition_for_key(key, partitions)
    assert 0 <= p < partitions and p == partition_for_key(bytes(key), partitions)


@given(st.integers(min_value=1, max_value=64), st.integers(min_value=0, max_value=2**32))
def test_sticky_partitioner_takes_every_partition_in_turn(partitions: int, seed: int) -> None:
    sticky = StickyPartitioner(random.Random(seed))
    chosen = [sticky.partition_for_batch(partitions) for _ in range(2 * partitions)]
    assert sorted(chosen) == sorted(list(range(partitions)) * 2)
    assert all(
        (b - a) % partitions == 1 % partitions for a, b in zip(chosen, chosen[1:], strict=False)
    )
