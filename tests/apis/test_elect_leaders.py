"""ElectLeaders through the dispatcher: a fake controller, this broker's real MetadataCache."""

import datetime
from dataclasses import dataclass, field

import pytest

from kafkalite.broker.metadata_cache import MetadataCache, PartitionInfo
from kafkalite.controller.kafka_controller import ElectionOutcome
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode, NotControllerError
from kafkalite.protocol.types import TopicPartition as TP

NOT_NEEDED = "Leader election not needed for topic partition."


@dataclass
class FakeController:
    cache: MetadataCache
    outcomes: dict
    publish: bool = True  # show elected leaders in the cache, like UpdateMetadata would
    is_active: bool = True
    calls: list = field(default_factory=list)
    fail: Exception | None = None

    async def elect_leaders(self, partitions, *, unclean=False):
        self.calls.append((list(partitions), unclean))
        if self.fail is not None:
            raise self.fail
        answer = {
            tp: self.outcomes.get(tp, ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED))
            for tp in partitions
        }
        if self.publish:
            for tp, outcome in answer.items():
                if outcome.error_code == ErrorCode.NONE:
                    old = self.cache.get_partition_info(tp.topic, tp.partition)
                    self.cache.update_partition(
                        PartitionInfo(
                            tp.topic, tp.partition, outcome.leader, 1, old.isr, old.replicas
                        )
                    )
        return answer


@pytest.fixture
def cache(services):
    cache = MetadataCache(0)
    for topic, partition, leader in (("t", 0, 1), ("t", 1, 0), ("u", 0, 0)):
        cache.update_partition(PartitionInfo(topic, partition, leader, 0, (0, 1), (0, 1)))
    services.metadata_cache = cache
    return cache


@pytest.fixture
def controller(services, cache):
    services.controller = FakeController(
        cache,
        {
            TP("t", 0): ElectionOutcome(ErrorCode.NONE, 0),
            TP("nope", 0): ElectionOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            TP("u", 0): ElectionOutcome(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE),
        },
    )
    return services.controller


def elect(version, partitions, election_type=0, timeout_ms=5000):
    cls = request_class(ApiKey.ELECT_LEADERS, version)
    topic_cls = cls.__dataclass_fields__["topic_partitions"].type.__args__[0].__args__[0]
    topics = None
    if partitions is not None:
        grouped = {}
        for topic, p in partitions:
            grouped.setdefault(topic, []).append(p)
        topics = tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in grouped.items())
    fields = {"topic_partitions": topics, "timeout": datetime.timedelta(milliseconds=timeout_ms)}
    if version >= 1:
        fields["election_type"] = election_type
    return cls(**fields)


def answers(response):
    return {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }


async def test_named_partitions_each_answered_after_the_leader_shows(call, controller):
    response = await call(
        ApiKey.ELECT_LEADERS, 2, elect(2, [("t", 0), ("t", 1), ("nope", 0), ("u", 0), ("t", 0)])
    )
    assert response.error_code == ErrorCode.NONE
    assert controller.calls == [([TP("t", 0), TP("t", 1), TP("nope", 0), TP("u", 0)], False)]
    assert answers(response) == {
        ("t", 0): (ErrorCode.NONE, None),
        ("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED),
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
        ("u", 0): (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Failed to elect leader for partition u-0 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        ),
    }
    assert [r.topic for r in response.replica_election_results] == ["t", "nope", "u"]


async def test_all_partitions_leave_out_the_ones_not_needing_an_election(call, controller):
    response = await call(ApiKey.ELECT_LEADERS, 1, elect(1, None, election_type=1))
    assert controller.calls == [([TP("t", 0), TP("t", 1), TP("u", 0)], True)]
    assert answers(response) == {
        ("t", 0): (ErrorCode.NONE, None),
        ("u", 0): (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Failed to elect leader for partition u-0 under strategy "
            "OfflinePartitionLeaderElectionStrategy(true)",
        ),
    }


async def test_v0_is_preferred(call, controller):
    response = await call(ApiKey.ELECT_LEADERS, 0, elect(0, [("t", 0)]))
    assert controller.calls == [([TP("t", 0)], False)]
    assert answers(response) == {("t", 0): (ErrorCode.NONE, None)}


async def test_leader_not_shown_in_time_is_request_timed_out(call, controller, cache):
    controller.publish = False
    response = await call(ApiKey.ELECT_LEADERS, 2, elect(2, [("t", 0), ("t", 1)], timeout_ms=50))
    assert answers(response) == {
        ("t", 0): (ErrorCode.REQUEST_TIMED_OUT, None),
        ("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED),
    }


async def test_unknown_election_type_fails_the_request(call, controller):
    response = await call(ApiKey.ELECT_LEADERS, 2, elect(2, [("t", 0)], election_type=7))
    assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert answers(response)[("t", 0)][0] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert controller.calls == []


async def test_not_controller_without_a_controller_to_forward_to(call, controller):
    controller.is_active = False  # and the metadata names no controller
    response = await call(ApiKey.ELECT_LEADERS, 2, elect(2, [("t", 0), ("nope", 3)]))
    assert answers(response) == {
        ("t", 0): (ErrorCode.NOT_CONTROLLER, None),
        ("nope", 3): (ErrorCode.NOT_CONTROLLER, None),
    }
    response = await call(ApiKey.ELECT_LEADERS, 2, elect(2, None))
    assert {k: v[0] for k, v in answers(response).items()} == {
        ("t", 0): ErrorCode.NOT_CONTROLLER,
        ("t", 1): ErrorCode.NOT_CONTROLLER,
        ("u", 0): ErrorCode.NOT_CONTROLLER,
    }
    assert controller.calls == []


async def test_controller_moved_during_the_election(call, controller):
    controller.fail = NotControllerError("moved")
    response = await call(ApiKey.ELECT_LEADERS, 2, elect(2, [("t", 0)]))
    assert answers(response) == {("t", 0): (ErrorCode.NOT_CONTROLLER, None)}
