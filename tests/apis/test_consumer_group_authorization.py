"""With the authorizer on, the consumer group protocol's APIs check what Kafka's KafkaApis
checks: ConsumerGroupHeartbeat READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on
every subscribed topic (TOPIC_AUTHORIZATION_FAILED), ConsumerGroupDescribe DESCRIBE on the
group."""

import datetime

import pytest

from kafkalite.apis.authorization import BrokerAuthorizer, guard
from kafkalite.apis.base import build
from kafkalite.apis.dispatcher import HANDLERS
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.error_response import error_response
from kafkalite.security.acl import AclEntry, PermissionType, ResourcePattern

ALICE = "User:alice"
TOPIC_DENIED = 29
GROUP_DENIED = 30
GROUP_NOT_FOUND = 69


def allow(authorizer, rtype, name, op):
    pattern = ResourcePattern(rtype, name)
    entries = set(authorizer.cache.get(pattern))
    entries.add(AclEntry(ALICE, "*", op, PermissionType.ALLOW))
    authorizer.cache.set(pattern, entries)


def req(api_key, version, **values):
    return build(request_class(api_key, version), values)


@pytest.fixture
def auth(call, services):
    """ALICE may do everything on topic "mine" and group "g"; every handler an echo."""
    authorizer = BrokerAuthorizer()
    allow(authorizer, ResourceType.TOPIC, "mine", AclOperation.ALL)
    allow(authorizer, ResourceType.GROUP, "g", AclOperation.ALL)
    services.extra["authorizer"] = authorizer
    call.connection.principal = ALICE

    def echo(ctx, request):
        return error_response(ctx.header.api_key, request, ctx.response_class, 0)

    call.dispatcher.handlers = {k: guard(k, echo) for k in HANDLERS}
    return authorizer


def heartbeat(group, topics):
    return req(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=group,
        member_id="m",
        member_epoch=0,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=topics,
        topic_partitions=[],
    )


async def test_heartbeat_needs_read_on_the_group_and_describe_on_its_topics(call, auth):
    response = await call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat("g", ["mine"]))
    assert response.error_code == 0  # reached the handler (an echo here)
    response = await call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat("g", ["mine", "secret"]))
    assert response.error_code == TOPIC_DENIED
    response = await call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat("other", ["mine"]))
    assert response.error_code == GROUP_DENIED


async def test_describe_needs_describe_on_each_group(call, auth, services):  # noqa: F811
    from kafkalite.apis.authorization import guard
    from kafkalite.apis.consumer_group_describe import handle_consumer_group_describe

    class Coordinator:
        def consumer_group_describe(self, group_id):
            return GROUP_NOT_FOUND, "not found", None

    services.group_coordinator = Coordinator()
    handler = guard(ApiKey.CONSUMER_GROUP_DESCRIBE, handle_consumer_group_describe)
    call.dispatcher.handlers[ApiKey.CONSUMER_GROUP_DESCRIBE] = handler
    request = req(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        1,
        group_ids=["other", "g"],
        include_authorized_operations=False,
    )
    response = await call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, request)
    # the refused group says nothing of itself; the allowed one reached the coordinator
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("other", GROUP_DENIED),
        ("g", GROUP_NOT_FOUND),
    ]
