"""With the authorizer on, requests naming several topics are answered topic by topic as
Kafka's KafkaApis does: the authorised ones reach the handler, the others get their
authorization error in the same response (and their existence is not looked at)."""

import datetime
import uuid

import pytest

from kafkalite.apis.authorization import BrokerAuthorizer, guard
from kafkalite.apis.base import build
from kafkalite.apis.client_quotas import throttle
from kafkalite.apis.dispatcher import HANDLERS
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.error_response import error_response
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclEntry, PermissionType, ResourcePattern
from kafkalite.security.quotas import QuotaManager

from .support import fetch_request

ALICE = "User:alice"
TOPIC_DENIED = 29
GROUP_DENIED = 30
CLUSTER_DENIED = 31


class FakeCache:
    def get_topic_name(self, topic_id):
        return {uuid.UUID(int=1): "secret", uuid.UUID(int=2): "mine"}.get(topic_id)


@pytest.fixture
def auth(call, services):
    authorizer = BrokerAuthorizer()
    for name, op in [("mine", AclOperation.ALL)]:
        allow(authorizer, ResourceType.TOPIC, name, op)
    allow(authorizer, ResourceType.GROUP, "g", AclOperation.ALL)
    services.extra["authorizer"] = authorizer
    services.metadata_cache = FakeCache()
    call.connection.principal = ALICE
    seen = []

    def echo(ctx, request):
        seen.append(request)
        return error_response(ctx.header.api_key, request, ctx.response_class, 0)

    handlers = {k: guard(k, echo) for k in HANDLERS}
    # as the broker wraps it: the client quotas' wrapper inside the authorizer's
    services.extra["quotas"] = QuotaManager(11, 1.0)
    handlers[ApiKey.FETCH] = guard(ApiKey.FETCH, throttle(ApiKey.FETCH, HANDLERS[ApiKey.FETCH]))
    call.dispatcher.handlers = handlers
    authorizer.seen = seen
    return authorizer


def allow(authorizer, rtype, name, op):
    pattern = ResourcePattern(rtype, name)
    entries = set(authorizer.cache.get(pattern))
    entries.add(AclEntry(ALICE, "*", op, PermissionType.ALLOW))
    authorizer.cache.set(pattern, entries)


def req(api_key, version, **values):
    return build(request_class(api_key, version), values)


def codes(items, key="name"):
    return {getattr(i, key): int(i.error_code) for i in items}


async def test_fetch_consumer_and_follower(call, auth, services):
    for version in (4, 12):
        response = await call(
            ApiKey.FETCH, version, fetch_request(version, [("mine", [0]), ("secret", [0, 1])])
        )
        parts = {
            (t.topic, p.partition_index): p.error_code
            for t in response.responses
            for p in t.partitions
        }
        assert parts == {("mine", 0): 0, ("secret", 0): TOPIC_DENIED, ("secret", 1): TOPIC_DENIED}
        if version >= 7:
            assert response.error_code == 0
    fetched = services.replica_manager.fetches[-1][1]
    assert [tp.topic for tp in fetched] == ["mine"]
    # nothing authorised: answered at once, without asking the log
    before = len(services.replica_manager.fetches)
    response = await call(ApiKey.FETCH, 12, fetch_request(12, [("secret", [0])]))
    assert response.error_code == 0
    assert response.responses[0].partitions[0].error_code == TOPIC_DENIED
    assert len(services.replica_manager.fetches) == before
    # a follower without CLUSTER_ACTION: every partition TOPIC_AUTHORIZATION_FAILED
    follower = fetch_request(12, [("mine", [0])])
    import dataclasses

    response = await call(ApiKey.FETCH, 12, dataclasses.replace(follower, replica_id=1))
    assert response.responses[0].partitions[0].error_code == TOPIC_DENIED
    allow(auth, ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
    response = await call(ApiKey.FETCH, 12, dataclasses.replace(follower, replica_id=1))
    assert response.responses[0].partitions[0].error_code == 0


async def test_create_topics_needs_create_on_the_topic_or_cluster(call, auth):
    def topic(name):
        return {"name": name, "num_partitions": 1, "replication_factor": 1}

    allow(auth, ResourceType.TOPIC, "other", AclOperation.CREATE)
    request = req(
        ApiKey.CREATE_TOPICS,
        7,
        topics=[topic("mine"), topic("secret"), topic("other")],
        timeout=datetime.timedelta(seconds=1),
        validate_only=False,
    )
    response = await call(ApiKey.CREATE_TOPICS, 7, request)
    assert codes(response.topics) == {"mine": 0, "secret": TOPIC_DENIED, "other": 0}
    assert [t.name for t in auth.seen[-1].topics] == ["mine", "other"]
    # configs only with DESCRIBE_CONFIGS (ALL implies it on "mine")
    assert {t.name: t.topic_config_error_code for t in response.topics} == {
        "mine": 0,
        "secret": TOPIC_DENIED,
        "other": TOPIC_DENIED,
    }
    secret = next(t for t in response.topics if t.name == "secret")
    assert secret.error_message == "Authorization failed."
    allow(auth, ResourceType.CLUSTER, "kafka-cluster", AclOperation.CREATE)
    response = await call(ApiKey.CREATE_TOPICS, 7, request)
    assert set(codes(response.topics).values()) == {0}


async def test_delete_topics_by_name_and_id(call, auth):
    timeout = datetime.timedelta(seconds=1)
    names = ["mine", "secret", "absent"]
    request = req(ApiKey.DELETE_TOPICS, 5, topic_names=names, timeout=timeout)
    response = await call(ApiKey.DELETE_TOPICS, 5, request)
    assert codes(response.responses) == {"mine": 0, "secret": TOPIC_DENIED, "absent": TOPIC_DENIED}
    assert list(auth.seen[-1].topic_names) == ["mine"]
    ids = [{"name": None, "topic_id": uuid.UUID(int=i)} for i in (1, 2)]
    request = req(ApiKey.DELETE_TOPICS, 6, topics=ids, timeout=timeout)
    response = await call(ApiKey.DELETE_TOPICS, 6, request)
    assert codes(response.responses, "topic_id") == {
        uuid.UUID(int=2): 0,
        uuid.UUID(int=1): TOPIC_DENIED,
    }
    # the name of a topic refused by id is told only to who may describe it
    denied = next(r for r in response.responses if r.error_code == TOPIC_DENIED)
    assert denied.name is None
    allow(auth, ResourceType.TOPIC, "secret", AclOperation.DESCRIBE)
    response = await call(ApiKey.DELETE_TOPICS, 6, request)
    denied = next(r for r in response.responses if r.error_code == TOPIC_DENIED)
    assert denied.name == "secret"


async def test_offset_fetch_named_and_all_topics(call, auth):
    topics = [
        {"name": "mine", "partition_indexes": [0]},
        {"name": "secret", "partition_indexes": [0]},
    ]
    response = await call(
        ApiKey.OFFSET_FETCH,
        7,
        req(ApiKey.OFFSET_FETCH, 7, group_id="g", topics=topics, require_stable=False),
    )
    assert response.error_code == 0
    assert {t.name: [int(p.error_code) for p in t.partitions] for t in response.topics} == {
        "mine": [0],
        "secret": [TOPIC_DENIED],
    }
    secret = next(t for t in response.topics if t.name == "secret").partitions[0]
    assert secret.committed_offset == -1 and secret.metadata == ""
    assert [t.name for t in auth.seen[-1].topics] == ["mine"]
    group = {"group_id": "g", "topics": topics}
    response = await call(
        ApiKey.OFFSET_FETCH, 8, req(ApiKey.OFFSET_FETCH, 8, groups=[group], require_stable=False)
    )
    assert {
        t.name: [int(p.error_code) for p in t.partitions] for t in response.groups[0].topics
    } == {"mine": [0], "secret": [TOPIC_DENIED]}
    # v8: a group it may not describe is answered alone
    other = {"group_id": "other", "topics": topics}
    request = req(ApiKey.OFFSET_FETCH, 8, groups=[other, group], require_stable=False)
    response = await call(ApiKey.OFFSET_FETCH, 8, request)
    assert [(g.group_id, g.error_code, len(g.topics)) for g in response.groups] == [
        ("other", GROUP_DENIED, 0),
        ("g", 0, 2),
    ]
    # v0-v7: a group it may not describe is refused as a whole
    response = await call(
        ApiKey.OFFSET_FETCH,
        7,
        req(ApiKey.OFFSET_FETCH, 7, group_id="other", topics=topics, require_stable=False),
    )
    assert response.error_code == GROUP_DENIED


@pytest.mark.parametrize(
    "api_key", [ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS]
)
async def test_configs_topic_by_topic(call, auth, api_key):
    resources = [
        {"resource_type": 2, "resource_name": "mine", "configuration_keys": None, "configs": []},
        {"resource_type": 2, "resource_name": "secret", "configuration_keys": None, "configs": []},
        {"resource_type": 4, "resource_name": "0", "configuration_keys": None, "configs": []},
    ]
    fields = {"resources": resources}
    if api_key == ApiKey.DESCRIBE_CONFIGS:
        fields.update(include_synonyms=False, include_documentation=False)
    else:
        fields["validate_only"] = False
    version = {
        ApiKey.DESCRIBE_CONFIGS: 4,
        ApiKey.ALTER_CONFIGS: 2,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    }[api_key]
    response = await call(api_key, version, req(api_key, version, **fields))
    items = response.results if api_key == ApiKey.DESCRIBE_CONFIGS else response.responses
    assert codes(items, "resource_name") == {"mine": 0, "secret": TOPIC_DENIED, "0": CLUSTER_DENIED}
    secret = next(i for i in items if i.resource_name == "secret")
    # Kafka: the error's message for DescribeConfigs, none for the alters
    assert secret.error_message == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED.message if api_key == ApiKey.DESCRIBE_CONFIGS else None
    )
    assert [r.resource_name for r in auth.seen[-1].resources] == ["mine"]


async def test_fetch_session_stops_when_the_acl_goes(call, auth, services):
    from kafkalite.broker.fetch_session import FetchSessionCache

    services.fetch_sessions = FetchSessionCache()
    full = await call(ApiKey.FETCH, 12, fetch_request(12, [("mine", [0])], session_epoch=0))
    assert full.session_id != 0 and full.responses[0].partitions[0].error_code == 0
    auth.cache.set(ResourcePattern(ResourceType.TOPIC, "mine"), [])
    incremental = fetch_request(12, [], session_id=full.session_id, session_epoch=1)
    response = await call(ApiKey.FETCH, 12, incremental)
    assert response.error_code == 0
    assert [(t.topic, p.error_code) for t in response.responses for p in t.partitions] == [
        ("mine", TOPIC_DENIED)
    ]
