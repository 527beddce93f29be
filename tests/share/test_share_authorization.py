"""Authorisation of the share-group APIs, as Kafka: READ on the group (GROUP_AUTHORIZATION_FAILED
for the whole request), READ on each fetched topic (TOPIC_AUTHORIZATION_FAILED for its
partitions; an unknown topic id is answered the same, revealing nothing), DESCRIBE on the topics a
heartbeat subscribes to, CLUSTER_ACTION for the share-group state APIs."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.apis.authorization import BrokerAuthorizer, guard
from kafkalite.apis.base import build
from kafkalite.apis.dispatcher import HANDLERS
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclEntry, PermissionType, ResourcePattern
from kafkalite.share.manager import ShareGroupService

ALICE = "User:alice"
SECRET, MINE = uuid.UUID(int=1), uuid.UUID(int=2)

SHARE_KEYS = (
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.READ_SHARE_GROUP_STATE,
    ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
)


class FakeCache:
    def get_topic_name(self, topic_id):
        return {SECRET: "secret", MINE: "mine"}.get(topic_id)


def allow(authorizer, rtype, name, op):
    pattern = ResourcePattern(rtype, name)
    entries = set(authorizer.cache.get(pattern))
    entries.add(AclEntry(ALICE, "*", op, PermissionType.ALLOW))
    authorizer.cache.set(pattern, entries)


@pytest.fixture
def auth(call, services):
    authorizer = BrokerAuthorizer()
    allow(authorizer, ResourceType.TOPIC, "mine", AclOperation.ALL)
    allow(authorizer, ResourceType.GROUP, "g", AclOperation.ALL)
    services.extra["authorizer"] = authorizer
    services.metadata_cache = FakeCache()
    services.extra["share_groups"] = ShareGroupService(
        0, None, FakeCache(), persister=None, time_ms=lambda: 0
    )
    call.connection.principal = ALICE
    call.dispatcher.handlers = {k: guard(k, HANDLERS[k]) for k in SHARE_KEYS}
    return authorizer


def req(api_key, version, **values):
    return build(request_class(api_key, version), values)


async def test_a_heartbeat_needs_read_on_the_group_and_describe_on_its_topics(call, auth):
    k = ApiKey.SHARE_GROUP_HEARTBEAT
    hb = dict(member_id="m", member_epoch=0, subscribed_topic_names=["mine"])
    response = await call(k, 1, req(k, 1, group_id="other", **hb))
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    hb["subscribed_topic_names"] = ["secret"]
    response = await call(k, 1, req(k, 1, group_id="g", **hb))
    assert response.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_a_describe_needs_describe_on_each_group(call, auth):
    k = ApiKey.SHARE_GROUP_DESCRIBE
    response = await call(k, 1, req(k, 1, group_ids=["other"]))
    assert response.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_a_fetch_needs_read_on_the_group_and_on_each_topic(call, auth):
    k = ApiKey.SHARE_FETCH
    fetch = dict(
        member_id="m",
        share_session_epoch=0,
        max_wait=0,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=10,
        batch_size=10,
        topics=[
            {"topic_id": SECRET, "partitions": [{"partition_index": 0}]},
            {"topic_id": uuid.UUID(int=99), "partitions": [{"partition_index": 0}]},
        ],
    )
    response = await call(k, 1, req(k, 1, group_id="other", **fetch))
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    response = await call(k, 1, req(k, 1, group_id="g", **fetch))
    assert response.error_code == ErrorCode.NONE
    codes = {r.topic_id: r.partitions[0].error_code for r in response.responses}
    # the unknown id is refused as the forbidden one: nothing tells them apart
    assert codes == {
        SECRET: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        uuid.UUID(int=99): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    assert not any(r.partitions[0].acquired_records for r in response.responses)


async def test_an_acknowledge_needs_read_on_the_group(call, auth):
    k = ApiKey.SHARE_ACKNOWLEDGE
    response = await call(
        k, 1, req(k, 1, group_id="other", member_id="m", share_session_epoch=1, topics=[])
    )
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_the_state_apis_need_cluster_action(call, auth):
    k = ApiKey.READ_SHARE_GROUP_STATE
    response = await call(
        k,
        0,
        req(
            k,
            0,
            group_id="g",
            topics=[{"topic_id": MINE, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
        ),
    )
    assert response.results[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def test_the_offsets_apis_need_the_group_and_topic_acls(call, auth):
    k = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
    response = await call(k, 0, req(k, 0, groups=[{"group_id": "other", "topics": None}]))
    assert response.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    k = ApiKey.ALTER_SHARE_GROUP_OFFSETS
    response = await call(k, 0, req(k, 0, group_id="other", topics=[]))
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    k = ApiKey.DELETE_SHARE_GROUP_OFFSETS
    response = await call(k, 0, req(k, 0, group_id="other", topics=[]))
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_group_config_resources_need_the_configs_operations_on_the_group(call, auth):
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the GROUP resource (type 32): refused ones get
    GROUP_AUTHORIZATION_FAILED and nothing of their configs; allowed ones are answered."""
    from kafkalite.coord.embedded import EmbeddedStore
    from kafkalite.share.group_configs import GroupConfigStore, defaults_from

    store = EmbeddedStore(None)
    session = await store.open_session()
    try:
        call.dispatcher.handlers.update(
            {
                k: guard(k, HANDLERS[k])
                for k in (ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)
            }
        )
        call.dispatcher.services.extra["group_configs"] = GroupConfigStore(
            session, defaults_from(call.dispatcher.services.config)
        )
        k = ApiKey.INCREMENTAL_ALTER_CONFIGS
        op = {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}
        resources = [
            {"resource_type": 32, "resource_name": name, "configs": [op]} for name in ("other", "g")
        ]
        response = await call(k, 1, req(k, 1, resources=resources, validate_only=False))
        codes = {r.resource_name: r.error_code for r in response.responses}
        assert codes["other"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert codes["g"] == ErrorCode.NONE
        k = ApiKey.DESCRIBE_CONFIGS
        resources = [
            {"resource_type": 32, "resource_name": name, "configuration_keys": None}
            for name in ("other", "g")
        ]
        response = await call(k, 4, req(k, 4, resources=resources))
        results = {r.resource_name: r for r in response.results}
        assert results["other"].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert not results["other"].configs
        assert results["g"].error_code == ErrorCode.NONE
    finally:
        await store.close()
