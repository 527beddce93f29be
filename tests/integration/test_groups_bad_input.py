"""Bad group requests against a real broker get Kafka's error codes and corrupt nothing.

Through the project's client (raw requests): a member forms a group and commits; then commits
from unknown members, from an old generation, with oversized metadata and for unknown topics,
joins without protocols or with another protocol type, a too short session timeout, heartbeats
and syncs that do not match. The group stays Stable with its member, the committed offset and
metadata stay as they were, also after the broker is killed and restarted (``__consumer_offsets``
reloads without unreadable records).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.consumer_protocol import encode_subscription
from kafkalite.protocol.errors import ErrorCode
from tests.integration.common import wait_for
from tests.integration.support import create_topic

GROUP, TOPIC = "strict", "bad-input"
SUBSCRIPTION = encode_subscription([TOPIC])


def run(coro):
    return asyncio.run(coro)


async def send(bootstrap, api_key, version, **values):
    client = KafkaClient(bootstrap, client_id="bad-input")
    try:
        await client.start()
        return await client.send(api_key, request_builder(api_key, **values), version=version)
    finally:
        await client.close()


def join(bootstrap, member_id="", **overrides):
    values = dict(
        group_id=GROUP,
        session_timeout=timedelta(milliseconds=30_000),
        rebalance_timeout=timedelta(milliseconds=30_000),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": SUBSCRIPTION}],
    )
    values.update(overrides)
    return run(send(bootstrap, ApiKey.JOIN_GROUP, 5, **values))


def commit(bootstrap, member_id, generation, offset, metadata, topic=TOPIC):
    r = run(
        send(
            bootstrap,
            ApiKey.OFFSET_COMMIT,
            7,
            group_id=GROUP,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=None,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": metadata,
                        }
                    ],
                }
            ],
        )
    )
    return r.topics[0].partitions[0].error_code


def committed(bootstrap):
    r = run(
        send(
            bootstrap,
            ApiKey.OFFSET_FETCH,
            6,
            group_id=GROUP,
            topics=[{"name": TOPIC, "partition_indexes": [0]}],
        )
    )
    if r.error_code != ErrorCode.NONE:
        return r.error_code
    p = r.topics[0].partitions[0]
    return p.committed_offset, p.metadata


def describe(bootstrap):
    r = run(send(bootstrap, ApiKey.DESCRIBE_GROUPS, 5, groups=[GROUP]))
    g = r.groups[0]
    return g.group_state, [m.member_id for m in g.members]


@pytest.mark.timeout(120)
def test_bad_group_requests_get_kafka_codes_and_corrupt_nothing(start_broker):
    # Kafka's default replication factor for the offsets topic (3) on one broker: capped at the
    # live brokers, so a single broker with default settings serves groups
    broker = start_broker(
        {"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3"}
    )
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, TOPIC)
    wait_for(
        lambda: (
            run(send(bootstrap, ApiKey.FIND_COORDINATOR, 3, key=GROUP, key_type=0)).error_code
            == ErrorCode.NONE
        ),
        "the coordinator (creates __consumer_offsets)",
    )

    first = join(bootstrap)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = join(bootstrap, first.member_id)
    assert joined.error_code == ErrorCode.NONE
    member, generation = joined.member_id, joined.generation_id
    sync = run(
        send(
            bootstrap,
            ApiKey.SYNC_GROUP,
            3,
            group_id=GROUP,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            assignments=[{"member_id": member, "assignment": b"p0"}],
        )
    )
    assert (sync.error_code, sync.assignment) == (ErrorCode.NONE, b"p0")
    assert commit(bootstrap, member, generation, 5, "ok") == ErrorCode.NONE

    # commits that must be refused
    assert commit(bootstrap, "stranger", generation, 9, "x") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(bootstrap, member, generation - 1, 9, "x") == ErrorCode.ILLEGAL_GENERATION
    assert commit(bootstrap, member, generation + 1, 9, "x") == ErrorCode.ILLEGAL_GENERATION
    assert (
        commit(bootstrap, member, generation, 9, "m" * 4097) == ErrorCode.OFFSET_METADATA_TOO_LARGE
    )
    assert commit(bootstrap, "", -1, 9, "x") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(bootstrap, member, generation, 9, "x", topic="no-such-topic") == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )

    # joins that must be refused
    assert join(bootstrap, protocols=[]).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (
        join(bootstrap, session_timeout=timedelta(milliseconds=1)).error_code
        == ErrorCode.INVALID_SESSION_TIMEOUT
    )
    assert join(bootstrap, group_id="").error_code == ErrorCode.INVALID_GROUP_ID
    assert join(bootstrap, "not-a-member").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    other_type = join(bootstrap, member, protocol_type="connect")
    assert other_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    # heartbeats and syncs that do not match the group
    def heartbeat(member_id, gen):
        r = run(
            send(
                bootstrap,
                ApiKey.HEARTBEAT,
                3,
                group_id=GROUP,
                generation_id=gen,
                member_id=member_id,
                group_instance_id=None,
            )
        )
        return r.error_code

    assert heartbeat("stranger", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(member, generation + 7) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(member, generation) == ErrorCode.NONE
    stale_sync = run(
        send(
            bootstrap,
            ApiKey.SYNC_GROUP,
            3,
            group_id=GROUP,
            generation_id=generation + 1,
            member_id=member,
            group_instance_id=None,
            assignments=[],
        )
    )
    assert stale_sync.error_code == ErrorCode.ILLEGAL_GENERATION

    # nothing changed
    assert describe(bootstrap) == ("Stable", [member])
    assert committed(bootstrap) == (5, "ok")

    # and the offsets topic reloads cleanly
    broker.restart(hard=True)
    wait_for(lambda: committed(bootstrap) == (5, "ok"), "offsets reloaded after SIGKILL")
    assert "unreadable" not in broker.log_text()
    # the group metadata record brings the member back (its session timer restarts)
    assert describe(bootstrap) == ("Stable", [member])
