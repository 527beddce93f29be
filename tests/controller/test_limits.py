"""limits.py: what counts against max.partitions, and the raw count of a CreateTopics."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalite.controller.limits import (
    RESERVATION_HOLD_S,
    PartitionBudget,
    PartitionLimits,
    requested_partitions,
)
from kafkalite.protocol.errors import PolicyViolationError


class FakeCache:
    def __init__(self) -> None:
        self.topics: dict[str, int] = {}

    def num_partitions(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def partition_count(self) -> int:
        return sum(self.topics.values())


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_reservation_counts_until_the_metadata_shows_the_partitions():
    cache, clock = FakeCache(), Clock()
    budget = PartitionBudget(PartitionLimits(cluster=10), cache, clock=clock)
    cache.topics["old"] = 3
    assert budget.reserve("new", 5) == 5
    assert budget.counted() == 8
    with pytest.raises(PolicyViolationError, match="max.partitions"):
        budget.reserve("other", 3)
    cache.topics["new"] = 5  # the metadata caught up: counted once, not twice
    assert budget.counted() == 8
    assert budget.reserve("other", 2) == 2
    assert budget.counted() == 10


def test_a_failed_creation_releases_and_a_forgotten_one_lapses():
    cache, clock = FakeCache(), Clock()
    budget = PartitionBudget(PartitionLimits(cluster=10), cache, clock=clock)
    budget.reserve("failed", 6)
    budget.release("failed")
    assert budget.counted() == 0
    budget.reserve("stuck", 6)
    clock.now += RESERVATION_HOLD_S + 1
    assert budget.counted() == 0


def test_growing_a_topic_counts_only_what_it_adds():
    cache = FakeCache()
    cache.topics["t"] = 8
    budget = PartitionBudget(PartitionLimits(cluster=10), cache)
    with pytest.raises(PolicyViolationError):
        budget.reserve("t", 11)
    assert budget.reserve("t", 10) == 2
    assert budget.reserve("t", 10) == 0  # asked again before the metadata shows it
    assert budget.counted() == 10
    # validate-only: nothing held, the request's earlier topics counted alongside
    assert budget.reserve("u", 0, hold=False) == 0
    with pytest.raises(PolicyViolationError):
        budget.reserve("v", 1, hold=False)


def test_limits_from_config_and_the_raw_count_of_a_create_topics():
    config = SimpleNamespace(
        max_partitions_per_request=7, max_partitions_per_topic=5, max_partitions=9
    )
    assert PartitionLimits.of(config) == PartitionLimits(7, 5, 9)
    assert PartitionLimits.of(SimpleNamespace()) == PartitionLimits(10_000, 10_000, 20_000)
    topic = SimpleNamespace
    topics = [
        topic(num_partitions=-1, assignments=[]),  # the default
        topic(num_partitions=8_388_610, assignments=[]),
        topic(num_partitions=-1, assignments=[1, 2, 3]),  # a manual assignment's entries
        topic(num_partitions=0, assignments=[]),  # refused on its own
        topic(num_partitions=-5, assignments=[]),
    ]
    assert requested_partitions(topics, default_partitions=4) == 4 + 8_388_610 + 3


@pytest.mark.parametrize(
    "key", ["max.partitions.per.request", "max.partitions.per.topic", "max.partitions"]
)
def test_a_bad_ceiling_stops_start_up_naming_the_key(key):
    from kafkalite.config import BrokerConfig, ConfigError

    assert getattr(BrokerConfig.load(environ={}), key.replace(".", "_")) > 0
    for bad in ("0", "-1", "many"):
        with pytest.raises(ConfigError, match=key) as raised:
            BrokerConfig.load(overrides={key: bad}, environ={})
        assert raised.value.key == key
