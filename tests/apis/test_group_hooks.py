"""LeaderAndIsr and StopReplica tell the group coordinator about ``__consumer_offsets``.

LeaderAndIsr (Kafka's onLeadershipChange): partitions this broker now leads are loaded, those it
follows are unloaded, partitions the ReplicaManager refused are left alone, and nothing happens
when the whole request failed (stale controller epoch). StopReplica with delete: an offsets
partition resigns its groups; other deleted partitions lose their committed offsets.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kafkalite.apis.base import BrokerServices, build
from kafkalite.broker.clock import SYSTEM_TIME
from kafkalite.broker.types import LeaderAndIsrResult, StopReplicaResult
from kafkalite.config import BrokerConfig
from kafkalite.group import GroupCoordinator, OffsetAndMetadata
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME, GroupConfig, OffsetConfig
from kafkalite.group.core import PartitionStatus
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from tests.apis.support import MemoryWriter

OFFSETS = GROUP_METADATA_TOPIC_NAME


class FakeReplicaManager:
    def __init__(self) -> None:
        self.errors: dict[TopicPartition, ErrorCode] = {}
        self.top_error = ErrorCode.NONE

    def become_leader_or_follower(self, controller_id, controller_epoch, states):
        return LeaderAndIsrResult(
            self.top_error,
            {
                TopicPartition(s.topic, s.partition): self.errors.get(
                    TopicPartition(s.topic, s.partition), ErrorCode.NONE
                )
                for s in states
            },
        )

    async def become_leader_or_follower_async(self, controller_id, controller_epoch, states):
        return self.become_leader_or_follower(controller_id, controller_epoch, states)

    def stop_replicas(self, controller_id, controller_epoch, states):
        return StopReplicaResult(
            self.top_error, {TopicPartition(s.topic, s.partition): ErrorCode.NONE for s in states}
        )

    async def stop_replicas_async(self, controller_id, controller_epoch, states):
        return self.stop_replicas(controller_id, controller_epoch, states)


@pytest.fixture
async def coordinator():
    c = GroupCoordinator(
        0,
        MemoryWriter(),
        GroupConfig(group_initial_rebalance_delay_ms=0),
        OffsetConfig(offsets_topic_num_partitions=4),
        SYSTEM_TIME,
    )
    c.startup()
    yield c
    await c.shutdown()


@pytest.fixture
def services(coordinator):
    return BrokerServices(
        config=BrokerConfig.load(environ={}),
        broker_id=0,
        replica_manager=FakeReplicaManager(),
        group_coordinator=coordinator,
    )


def leader_and_isr(partitions: dict[int, int], topic: str = OFFSETS, epoch: int = 1):
    """partition -> leader."""
    return build(
        request_class(ApiKey.LEADER_AND_ISR, 5),
        {
            "controller_id": 0,
            "controller_epoch": 1,
            "broker_epoch": 1,
            "type": 0,
            "topic_states": [
                {
                    "topic_name": topic,
                    "topic_id": uuid.uuid4(),
                    "partition_states": [
                        {
                            "partition_index": p,
                            "controller_epoch": 1,
                            "leader": leader,
                            "leader_epoch": epoch,
                            "isr": [0, 1],
                            "zk_version": 0,
                            "replicas": [0, 1],
                            "is_new": False,
                        }
                        for p, leader in partitions.items()
                    ],
                }
            ],
            "live_leaders": [],
        },
    )


def stop_replica(topic: str, partitions: list[int], delete: bool = True, epoch: int = 2):
    return build(
        request_class(ApiKey.STOP_REPLICA, 3),
        {
            "controller_id": 0,
            "controller_epoch": 1,
            "broker_epoch": 1,
            "topic_states": [
                {
                    "topic_name": topic,
                    "partition_states": [
                        {"partition_index": p, "leader_epoch": epoch, "delete_partition": delete}
                        for p in partitions
                    ],
                }
            ],
        },
    )


async def loaded(coordinator):
    """The offsets partitions loaded here, once no load is in progress (deadline 5 s)."""
    async with asyncio.timeout(5):
        while any(
            s is PartitionStatus.LOADING for s in coordinator.core.owned_partitions().values()
        ):
            await asyncio.sleep(0)  # polling: the loop runs until loaded or the timeout
    return sorted(
        p for p, s in coordinator.core.owned_partitions().items() if s is PartitionStatus.LOADED
    )


async def test_leader_and_isr_loads_led_offsets_partitions_only(call, services, coordinator):
    services.replica_manager.errors[TopicPartition(OFFSETS, 3)] = ErrorCode.KAFKA_STORAGE_ERROR
    r = await call(ApiKey.LEADER_AND_ISR, 5, leader_and_isr({0: 0, 1: 1, 2: 0, 3: 0}))
    assert r.error_code == ErrorCode.NONE
    assert await loaded(coordinator) == [0, 2]  # 1 is led elsewhere, 3 failed here
    # leadership of 2 moves to broker 1: its groups are unloaded
    await call(ApiKey.LEADER_AND_ISR, 5, leader_and_isr({2: 1}, epoch=2))
    assert await loaded(coordinator) == [0]
    # other topics do not concern the coordinator
    await call(ApiKey.LEADER_AND_ISR, 5, leader_and_isr({1: 0}, topic="orders", epoch=3))
    assert await loaded(coordinator) == [0]


async def test_failed_leader_and_isr_changes_nothing(call, services, coordinator):
    services.replica_manager.top_error = ErrorCode.STALE_CONTROLLER_EPOCH
    r = await call(ApiKey.LEADER_AND_ISR, 5, leader_and_isr({0: 0}))
    assert r.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert await loaded(coordinator) == []


async def test_stop_replica_resigns_offsets_partitions_and_drops_deleted_offsets(call, coordinator):
    await call(ApiKey.LEADER_AND_ISR, 5, leader_and_isr({p: 0 for p in range(4)}))
    assert await loaded(coordinator) == [0, 1, 2, 3]
    group = "g"
    tps = [TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("kept", 0)]
    errors = await coordinator.commit_offsets(
        group, "", None, -1, {tp: OffsetAndMetadata(5) for tp in tps}
    )
    assert set(errors.values()) == {ErrorCode.NONE}

    # stopping without delete (controlled shutdown) leaves the groups; deleting resigns them
    await call(ApiKey.STOP_REPLICA, 3, stop_replica(OFFSETS, [1], delete=False))
    assert await loaded(coordinator) == [0, 1, 2, 3]
    await call(ApiKey.STOP_REPLICA, 3, stop_replica(OFFSETS, [1]))
    assert await loaded(coordinator) == [0, 2, 3]

    # a deleted topic's partitions lose their committed offsets
    await call(ApiKey.STOP_REPLICA, 3, stop_replica("orders", [0, 1], epoch=-2))
    error, offsets = coordinator.fetch_offsets(group)
    assert error == ErrorCode.NONE
    assert sorted(offsets) == [TopicPartition("kept", 0)]


async def test_requests_for_an_earlier_registration_are_stale(call, services, coordinator):
    """KIP-380: LeaderAndIsr and StopReplica carrying a broker epoch older than this broker's
    registration (queued before a restart or a session renewal) change nothing and answer
    STALE_BROKER_EPOCH; a newer epoch is accepted."""
    services.extra["broker_epoch"] = 5  # registered again since the requests were built
    r = await call(ApiKey.LEADER_AND_ISR, 5, leader_and_isr({0: 0}))
    assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert {p.error_code for t in r.topics for p in t.partition_errors} == {
        ErrorCode.STALE_BROKER_EPOCH
    }
    assert await loaded(coordinator) == []
    r = await call(ApiKey.STOP_REPLICA, 3, stop_replica(OFFSETS, [0]))
    assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
    services.extra["broker_epoch"] = 1
    r = await call(ApiKey.LEADER_AND_ISR, 5, leader_and_isr({0: 0}))
    assert r.error_code == ErrorCode.NONE and await loaded(coordinator) == [0]
