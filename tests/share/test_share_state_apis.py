"""The share-group state APIs (83-87) and ShareGroupHeartbeat/Describe on the wire, against one
broker: the share coordinator initialises, reads, writes (with epoch fencing), summarises and
deletes a share-partition's state; a heartbeat's member shows in ShareGroupDescribe."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import Broker, wait_for

pytestmark = pytest.mark.integration

TOPIC_ID = uuid.UUID(int=42)
NOT_YET = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


@pytest.fixture(scope="module")
def broker():
    with Broker(
        {"offsets.topic.num.partitions": 1, "share.coordinator.state.topic.num.partitions": 1}
    ) as b:
        b.create_topic("described", partitions=2)
        # as a client does first: FindCoordinator creates __consumer_offsets
        wait_for(
            lambda: (
                call(b, ApiKey.FIND_COORDINATOR, coordinator_keys=["g"], key_type=0)
                .coordinators[0]
                .error_code
                == 0
            ),
            "the group coordinator",
        )
        yield b


async def send(bootstrap, api_key, **fields):
    client = KafkaClient(bootstrap, client_id="share-test")
    try:
        await client.start()
        return await client.send(api_key, request_builder(api_key, **fields))
    finally:
        await client.close()


def call(broker, api_key, **fields):
    return asyncio.run(send(broker.bootstrap_servers, api_key, **fields))


def heartbeat(broker, group, member, epoch, topics):
    return call(
        broker,
        ApiKey.SHARE_GROUP_HEARTBEAT,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        subscribed_topic_names=topics,
    )


def partition_of(response):
    return response.results[0].partitions[0]


def test_heartbeat_and_describe(broker):
    r = heartbeat(broker, "g-describe", "member-1", 0, ["described"])
    assert r.error_code == ErrorCode.NONE
    assert r.member_id == "member-1" and r.member_epoch >= 1
    assert [tuple(t.partitions) for t in r.assignment.topic_partitions] == [(0, 1)]
    d = call(broker, ApiKey.SHARE_GROUP_DESCRIBE, group_ids=["g-describe", "nobody"])
    group, missing = d.groups
    assert group.error_code == ErrorCode.NONE and group.group_state == "Stable"
    assert [m.member_id for m in group.members] == ["member-1"]
    assert group.members[0].assignment.topic_partitions[0].topic_name == "described"
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    r = heartbeat(broker, "g-describe", "member-1", -1, None)
    assert r.error_code == ErrorCode.NONE and r.member_epoch == -1


def test_the_state_apis(broker):
    heartbeat(broker, "g-state", "m", 0, ["described"])  # creates __share_group_state

    def initialize():
        return partition_of(
            call(
                broker,
                ApiKey.INITIALIZE_SHARE_GROUP_STATE,
                group_id="g-state",
                topics=[
                    {
                        "topic_id": TOPIC_ID,
                        "partitions": [{"partition": 0, "state_epoch": 0, "start_offset": 5}],
                    }
                ],
            )
        )

    result = wait_for(
        lambda: (r := initialize()).error_code not in NOT_YET and r, "the share coordinator"
    )
    assert result.error_code == ErrorCode.NONE

    def read(leader_epoch=0):
        return partition_of(
            call(
                broker,
                ApiKey.READ_SHARE_GROUP_STATE,
                group_id="g-state",
                topics=[
                    {
                        "topic_id": TOPIC_ID,
                        "partitions": [{"partition": 0, "leader_epoch": leader_epoch}],
                    }
                ],
            )
        )

    assert read().start_offset == 5

    def write(state_epoch, leader_epoch, start):
        return partition_of(
            call(
                broker,
                ApiKey.WRITE_SHARE_GROUP_STATE,
                group_id="g-state",
                topics=[
                    {
                        "topic_id": TOPIC_ID,
                        "partitions": [
                            {
                                "partition": 0,
                                "state_epoch": state_epoch,
                                "leader_epoch": leader_epoch,
                                "start_offset": start,
                                "state_batches": [
                                    {
                                        "first_offset": start,
                                        "last_offset": start + 3,
                                        "delivery_state": 0,
                                        "delivery_count": 2,
                                    }
                                ],
                            }
                        ],
                    }
                ],
            )
        ).error_code

    assert write(1, 3, 7) == ErrorCode.NONE
    assert write(0, 3, 8) == ErrorCode.FENCED_STATE_EPOCH
    assert write(1, 2, 8) == ErrorCode.FENCED_LEADER_EPOCH
    state = read(3)
    assert (state.state_epoch, state.start_offset) == (1, 7)
    assert [(b.first_offset, b.last_offset, b.delivery_count) for b in state.state_batches] == [
        (7, 10, 2)
    ]
    summary = partition_of(
        call(
            broker,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            group_id="g-state",
            topics=[{"topic_id": TOPIC_ID, "partitions": [{"partition": 0, "leader_epoch": 3}]}],
        )
    )
    assert (summary.state_epoch, summary.leader_epoch, summary.start_offset) == (1, 3, 7)
    deleted = partition_of(
        call(
            broker,
            ApiKey.DELETE_SHARE_GROUP_STATE,
            group_id="g-state",
            topics=[{"topic_id": TOPIC_ID, "partitions": [{"partition": 0}]}],
        )
    )
    assert deleted.error_code == ErrorCode.NONE
    assert read().start_offset == -1


def test_share_group_offsets_admin(broker):
    group = "g-offsets"
    r = heartbeat(broker, group, "m", 0, ["described"])  # also creates __share_group_state
    assert r.error_code == ErrorCode.NONE

    def describe():
        response = call(
            broker,
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            groups=[
                {"group_id": group, "topics": [{"topic_name": "described", "partitions": [0, 1]}]}
            ],
        )
        return {
            p.partition_index: (p.error_code, p.start_offset)
            for p in response.groups[0].topics[0].partitions
        }

    def alter(offset):
        return call(
            broker,
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            group_id=group,
            topics=[
                {
                    "topic_name": "described",
                    "partitions": [{"partition_index": 0, "start_offset": offset}],
                }
            ],
        )

    assert alter(3).error_code == ErrorCode.NON_EMPTY_GROUP, "a member is in the group"
    heartbeat(broker, group, "m", -1, None)
    altered = wait_for(
        lambda: (
            (a := alter(3)).responses[0].partitions[0].error_code
            not in (*NOT_YET, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            and a
        ),
        "the share coordinator",
    )
    assert altered.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert describe() == {0: (ErrorCode.NONE, 3), 1: (ErrorCode.NONE, -1)}
    deleted = call(
        broker,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        group_id=group,
        topics=[{"topic_name": "described"}],
    )
    assert deleted.responses[0].error_code == ErrorCode.NONE
    assert describe() == {0: (ErrorCode.NONE, -1), 1: (ErrorCode.NONE, -1)}


def test_list_groups_shows_share_groups(broker):
    r = heartbeat(broker, "g-listed", "m", 0, ["described"])
    assert r.error_code == ErrorCode.NONE
    listed = call(broker, ApiKey.LIST_GROUPS, states_filter=[], types_filter=["share"])
    found = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in listed.groups}
    assert found["g-listed"] == ("share", "Stable", "share")
    classic_only = call(broker, ApiKey.LIST_GROUPS, states_filter=[], types_filter=["classic"])
    assert "g-listed" not in {g.group_id for g in classic_only.groups}
    heartbeat(broker, "g-listed", "m", -1, None)


def test_a_consumer_group_name_is_not_a_share_group(broker):
    from confluent_kafka import Consumer

    broker.produce("described", [b"x"])
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g-classic",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["described"])
    try:
        wait_for(lambda: c.poll(0.3) is not None, "a record through the classic group")
        c.commit(asynchronous=False)
    finally:
        c.close()
    r = heartbeat(broker, "g-classic", "m", 0, ["described"])
    assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND
