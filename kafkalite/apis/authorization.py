"""The ACL authorizer in front of the request handlers: what each API checks, as KafkaApis does.

Enabled by ``authorizer.class.name`` (Kafka's AclAuthorizer / StandardAuthorizer names are
accepted): ``BrokerAuthorizer`` keeps every ACL of the cluster in memory (security/acl.py's
AclCache), loaded from the coordination store at start-up and refreshed from Kafka's change
notifications (``/kafka-acl-changes``, ``/kafka-acl-extended-changes``) by ``watch``, so an ACL
created on any broker reaches every broker.

``guard(api_key, handler)`` wraps a handler (the dispatcher wraps every one when an authorizer
is set; without one nothing here runs). A request that fails its check raises a KafkaError
with Kafka's code and the dispatcher answers the API's error response with it for every
topic, partition or group the request named (TOPIC_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Kafka answers a request that names several topics
topic by topic; here a request with one unauthorised topic is refused for all of its topics
(clients name one topic per request in practice, and no data is served either way).

Metadata is filtered instead: topics the principal may not DESCRIBE are left out of an
all-topics answer, named ones are answered TOPIC_AUTHORIZATION_FAILED, a topic is auto-created
only with CREATE on the cluster or the topic, and the ``*_authorized_operations`` fields
reflect the ACLs (DescribeCluster and DescribeGroups too).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from kafkalite.protocol.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    to_32bit_field,
)
from kafkalite.protocol.api import INTER_BROKER_KEYS, ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.security.acl import CLUSTER_NAME, AclCache

log = structlog.get_logger("kafkalite.authorizer")

Op = AclOperation
T = ResourceType


class BrokerAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.cache = AclCache(super_users, allow_if_no_acl)

    def allowed(self, connection: Any, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        return self.cache.authorize(
            connection.authenticated_principal, connection.client_host, op, rtype, name
        )

    def authorize_cluster(self, connection: Any, operation: str) -> bool:
        return self.allowed(connection, AclOperation[operation], T.CLUSTER, CLUSTER_NAME)

    def operations(self, connection: Any, rtype: ResourceType, name: str) -> int:
        """The authorized-operations bit field of a resource (KIP-430)."""
        return to_32bit_field(
            op for op in SUPPORTED_OPERATIONS[rtype] if self.allowed(connection, op, rtype, name)
        )

    # ------------------------------------------------------------------ the store

    async def load(self, session: Any) -> None:
        from kafkalite.coord.security import load_all_acls

        for pattern, entries in await load_all_acls(session):
            self.cache.set(pattern, entries)
        log.info("ACLs loaded", acls=len(self.cache))

    async def watch(self, session: Any) -> None:
        """Kafka's ZkNodeChangeNotificationListener over both change paths: each new
        notification names a resource pattern whose ACLs are read again."""
        from kafkalite.coord.security import ACL_CHANGES, ACL_EXTENDED_CHANGES

        await asyncio.gather(
            self._watch_changes(session, ACL_CHANGES),
            self._watch_changes(session, ACL_EXTENDED_CHANGES),
        )

    async def _watch_changes(self, session: Any, path: str) -> None:
        from kafkalite.coord.errors import NoNode
        from kafkalite.coord.security import read_acls
        from kafkalite.security.acl import decode_change

        await session.ensure_path(path)
        seen: set[str] | None = None
        async for children in session.watch_children(path):
            if children is None:
                continue
            new = sorted(set(children) - (seen or set())) if seen is not None else []
            seen = set(children)
            for child in new:
                try:
                    data, _ = await session.get_data(f"{path}/{child}")
                    pattern = decode_change(data)
                    self.cache.set(pattern, await read_acls(session, pattern))
                except NoNode:
                    continue
                except Exception as e:  # a notification we cannot read: reload everything
                    log.warning("bad ACL change notification", node=child, error=repr(e))
                    await self.load(session)


# ---------------------------------------------------------------------- the checks


def _refuse(code: ErrorCode) -> KafkaError:
    return KafkaError(error_code=code)


def _topics(request: Any, field: str = "topics", name: str = "name") -> list[str]:
    items = getattr(request, field, None) or ()
    return [getattr(t, name) for t in items if getattr(t, name, None) is not None]


def _need_topics(ctx: Any, auth: BrokerAuthorizer, op: AclOperation, names: list[str]) -> None:
    conn = ctx.connection
    for name in names:
        if not auth.allowed(conn, op, T.TOPIC, name):
            raise _refuse(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _need_group(ctx: Any, auth: BrokerAuthorizer, op: AclOperation, group: str | None) -> None:
    if group is not None and not auth.allowed(ctx.connection, op, T.GROUP, group):
        raise _refuse(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _need_cluster(ctx: Any, auth: BrokerAuthorizer, op: AclOperation) -> None:
    if not auth.allowed(ctx.connection, op, T.CLUSTER, CLUSTER_NAME):
        raise _refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def _may_create(ctx: Any, auth: BrokerAuthorizer, topic: str) -> bool:
    conn = ctx.connection
    return auth.allowed(conn, Op.CREATE, T.CLUSTER, CLUSTER_NAME) or auth.allowed(
        conn, Op.CREATE, T.TOPIC, topic
    )


def check(ctx: Any, auth: BrokerAuthorizer, api_key: int, request: Any) -> None:
    """Raise the KafkaError Kafka answers when the principal may not make this request."""
    K = ApiKey
    if api_key in INTER_BROKER_KEYS:
        _need_cluster(ctx, auth, Op.CLUSTER_ACTION)
    elif api_key == K.PRODUCE:
        if getattr(request, "transactional_id", None):
            if not auth.allowed(
                ctx.connection, Op.WRITE, T.TRANSACTIONAL_ID, request.transactional_id
            ):
                raise _refuse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif api_key == K.FETCH:
        if getattr(request, "replica_id", -1) >= 0:
            _need_cluster(ctx, auth, Op.CLUSTER_ACTION)
        else:
            _need_topics(ctx, auth, Op.READ, _topics(request, name="topic"))
    elif api_key == K.OFFSET_FOR_LEADER_EPOCH:
        if getattr(request, "replica_id", -1) >= 0:
            _need_cluster(ctx, auth, Op.CLUSTER_ACTION)
    elif api_key == K.CREATE_TOPICS:
        for name in _topics(request):
            if not _may_create(ctx, auth, name):
                raise _refuse(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    elif api_key == K.DELETE_TOPICS:
        names = list(getattr(request, "topic_names", None) or ()) + _topics(request)
        _need_topics(ctx, auth, Op.DELETE, names)
    elif api_key in (K.DESCRIBE_CONFIGS, K.ALTER_CONFIGS, K.INCREMENTAL_ALTER_CONFIGS):
        op = Op.DESCRIBE_CONFIGS if api_key == K.DESCRIBE_CONFIGS else Op.ALTER_CONFIGS
        for resource in request.resources:
            if int(resource.resource_type) == 2:  # TOPIC
                _need_topics(ctx, auth, op, [resource.resource_name])
            else:  # BROKER, BROKER_LOGGER
                _need_cluster(ctx, auth, op)
    elif api_key in (K.ELECT_LEADERS, K.ALTER_PARTITION_REASSIGNMENTS):
        _need_cluster(ctx, auth, Op.ALTER)
    elif api_key in (K.LIST_PARTITION_REASSIGNMENTS, K.DESCRIBE_LOG_DIRS):
        _need_cluster(ctx, auth, Op.DESCRIBE)
    elif api_key in (K.CREATE_ACLS, K.DELETE_ACLS):
        _need_cluster(ctx, auth, Op.ALTER)
    elif api_key == K.DESCRIBE_ACLS:
        _need_cluster(ctx, auth, Op.DESCRIBE)
    elif api_key == K.DESCRIBE_CLIENT_QUOTAS:
        _need_cluster(ctx, auth, Op.DESCRIBE_CONFIGS)
    elif api_key == K.ALTER_CLIENT_QUOTAS:
        _need_cluster(ctx, auth, Op.ALTER_CONFIGS)
    elif api_key == K.INIT_PRODUCER_ID:
        tid = getattr(request, "transactional_id", None)
        if tid:
            if not auth.allowed(ctx.connection, Op.WRITE, T.TRANSACTIONAL_ID, tid):
                raise _refuse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif not _idempotent_write_allowed(ctx, auth):
            raise _refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    elif api_key == K.FIND_COORDINATOR:
        key_type = getattr(request, "key_type", 0)
        keys = list(getattr(request, "coordinator_keys", None) or ()) or [
            getattr(request, "key", "")
        ]
        for key in keys:
            if key_type == 1:
                if not auth.allowed(ctx.connection, Op.DESCRIBE, T.TRANSACTIONAL_ID, key):
                    raise _refuse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            else:
                _need_group(ctx, auth, Op.DESCRIBE, key)
    elif api_key in (K.JOIN_GROUP, K.SYNC_GROUP, K.HEARTBEAT, K.LEAVE_GROUP):
        _need_group(ctx, auth, Op.READ, request.group_id)
    elif api_key == K.OFFSET_COMMIT:
        _need_group(ctx, auth, Op.READ, request.group_id)
    elif api_key == K.OFFSET_DELETE:
        _need_group(ctx, auth, Op.DELETE, request.group_id)
        _need_topics(ctx, auth, Op.READ, _topics(request))
    elif api_key == K.OFFSET_FETCH:
        groups = getattr(request, "groups", None)
        if groups:
            for group in groups:
                _need_group(ctx, auth, Op.DESCRIBE, group.group_id)
                _need_topics(ctx, auth, Op.DESCRIBE, _topics(group))
        else:
            _need_group(ctx, auth, Op.DESCRIBE, request.group_id)
            _need_topics(ctx, auth, Op.DESCRIBE, _topics(request))
    elif api_key == K.DESCRIBE_GROUPS:
        for group in request.groups:
            _need_group(ctx, auth, Op.DESCRIBE, group)
    elif api_key == K.DELETE_GROUPS:
        for group in request.groups_names:
            _need_group(ctx, auth, Op.DELETE, group)


def _idempotent_write_allowed(ctx: Any, auth: BrokerAuthorizer) -> bool:
    """Kafka 3.x: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679)."""
    conn = ctx.connection
    if auth.allowed(conn, Op.IDEMPOTENT_WRITE, T.CLUSTER, CLUSTER_NAME):
        return True
    principal, host = conn.authenticated_principal, conn.client_host
    if principal in auth.cache.super_users:
        return True
    for pattern, entries in auth.cache.items():
        if pattern.resource_type != T.TOPIC:
            continue
        for e in entries:
            if (
                e.permission == 3
                and e.operation in (Op.WRITE, Op.ALL)
                and (e.principal in (principal, "User:*") and e.host in (host, "*"))
            ):
                return True
    return False


# ---------------------------------------------------------------------- Metadata and friends


def _metadata_before(ctx: Any, auth: BrokerAuthorizer, request: Any) -> tuple[Any, list[str]]:
    topics = getattr(request, "topics", None)
    if not topics:
        return request, []
    conn = ctx.connection
    kept, refused = [], []
    for topic in topics:
        name = getattr(topic, "name", None)
        if name is None or auth.allowed(conn, Op.DESCRIBE, T.TOPIC, name):
            kept.append(topic)
        else:
            refused.append(name)
    changes: dict[str, Any] = {"topics": tuple(kept)}
    if getattr(request, "allow_auto_topic_creation", False) and not all(
        _may_create(ctx, auth, t.name) for t in kept if getattr(t, "name", None)
    ):
        changes["allow_auto_topic_creation"] = False
    if not kept and refused:
        # an empty list would mean "no topic" in v1+ and be answered with every topic in v0
        changes["topics"] = ()
    return dataclasses.replace(request, **changes), refused


def _metadata_after(ctx: Any, auth: BrokerAuthorizer, response: Any, refused: list[str]) -> Any:
    conn = ctx.connection
    topic_cls = None
    topics = []
    for topic in response.topics:
        topic_cls = type(topic)
        name = topic.name
        if name is not None and not auth.allowed(conn, Op.DESCRIBE, T.TOPIC, name):
            continue
        ops = getattr(topic, "topic_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED)
        if ops != AUTHORIZED_OPERATIONS_OMITTED and name is not None:
            topic = dataclasses.replace(
                topic, topic_authorized_operations=auth.operations(conn, T.TOPIC, name)
            )
        topics.append(topic)
    if refused:
        from kafkalite.apis.base import build

        cls = topic_cls or _topic_entry_class(response)
        for name in refused:
            topics.append(
                build(
                    cls,
                    {
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        "name": name,
                        "is_internal": False,
                        "partitions": [],
                        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                    },
                )
            )
    changes: dict[str, Any] = {"topics": tuple(topics)}
    ops = getattr(response, "cluster_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED)
    if ops != AUTHORIZED_OPERATIONS_OMITTED:
        changes["cluster_authorized_operations"] = auth.operations(conn, T.CLUSTER, CLUSTER_NAME)
    return dataclasses.replace(response, **changes)


def _topic_entry_class(response: Any) -> type:
    import typing

    for f in dataclasses.fields(response):
        if f.name == "topics":
            return typing.get_args(f.type)[0]
    raise TypeError("no topics field")


def _cluster_ops_after(ctx: Any, auth: BrokerAuthorizer, response: Any) -> Any:
    ops = getattr(response, "cluster_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED)
    if ops == AUTHORIZED_OPERATIONS_OMITTED:
        return response
    return dataclasses.replace(
        response,
        cluster_authorized_operations=auth.operations(ctx.connection, T.CLUSTER, CLUSTER_NAME),
    )


def _groups_ops_after(ctx: Any, auth: BrokerAuthorizer, response: Any) -> Any:
    groups = []
    for group in response.groups:
        ops = getattr(group, "authorized_operations", AUTHORIZED_OPERATIONS_OMITTED)
        if ops != AUTHORIZED_OPERATIONS_OMITTED:
            group = dataclasses.replace(
                group,
                authorized_operations=auth.operations(ctx.connection, T.GROUP, group.group_id),
            )
        groups.append(group)
    return dataclasses.replace(response, groups=tuple(groups))


def _list_groups_after(ctx: Any, auth: BrokerAuthorizer, response: Any) -> Any:
    if auth.allowed(ctx.connection, Op.DESCRIBE, T.CLUSTER, CLUSTER_NAME):
        return response
    return dataclasses.replace(
        response,
        groups=tuple(
            g
            for g in response.groups
            if auth.allowed(ctx.connection, Op.DESCRIBE, T.GROUP, g.group_id)
        ),
    )


_AFTER: dict[int, Callable[[Any, BrokerAuthorizer, Any], Any]] = {
    ApiKey.DESCRIBE_CLUSTER: _cluster_ops_after,
    ApiKey.DESCRIBE_GROUPS: _groups_ops_after,
    ApiKey.LIST_GROUPS: _list_groups_after,
}


def guard(api_key: int, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The handler behind the authorizer's checks (see the module docstring)."""
    if api_key == ApiKey.METADATA:

        def metadata(ctx: Any, request: Any) -> Any:
            auth = ctx.services.extra["authorizer"]
            request, refused = _metadata_before(ctx, auth, request)
            result = handler(ctx, request)
            if inspect.isawaitable(result):
                return _then(result, lambda r: _metadata_after(ctx, auth, r, refused))
            return _metadata_after(ctx, auth, result, refused)

        return metadata
    after = _AFTER.get(api_key)
    split = SPLIT.get(api_key)

    def guarded(ctx: Any, request: Any) -> Any:
        auth = ctx.services.extra["authorizer"]
        check(ctx, auth, api_key, request)
        if split is not None:
            return _split_by_topic(ctx, auth, api_key, split, handler, request)
        result = handler(ctx, request)
        if after is None:
            return result
        if inspect.isawaitable(result):
            return _then(result, lambda r: after(ctx, auth, r))
        return after(ctx, auth, result)

    return guarded


async def _then(result: Any, fn: Callable[[Any], Any]) -> Any:
    return fn(await result)


SPLIT: dict[int, tuple[str, str, str, AclOperation]] = {
    # api: (request's topic list, its name attribute, response's topic list, operation)
    ApiKey.PRODUCE: ("topic_data", "name", "responses", Op.WRITE),
    ApiKey.LIST_OFFSETS: ("topics", "name", "topics", Op.DESCRIBE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ("topics", "topic", "topics", Op.DESCRIBE),
    ApiKey.DELETE_RECORDS: ("topics", "name", "topics", Op.DELETE),
    ApiKey.CREATE_PARTITIONS: ("topics", "name", "results", Op.ALTER),
    ApiKey.OFFSET_COMMIT: ("topics", "name", "topics", Op.READ),
}
"""APIs answered topic by topic as Kafka does: the authorised topics go to the handler, the
others are answered TOPIC_AUTHORIZATION_FAILED in the same response."""


def _split_by_topic(
    ctx: Any,
    auth: BrokerAuthorizer,
    api_key: int,
    split: tuple[str, str, str, AclOperation],
    handler: Callable[[Any, Any], Any],
    request: Any,
) -> Any:
    req_field, name_attr, resp_field, op = split
    if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH and getattr(request, "replica_id", -1) >= 0:
        return handler(ctx, request)
    topics = list(getattr(request, req_field, None) or ())
    refused = [
        t for t in topics if not auth.allowed(ctx.connection, op, T.TOPIC, getattr(t, name_attr))
    ]
    if not refused:
        return handler(ctx, request)
    if len(refused) == len(topics):
        raise _refuse(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    from kafkalite.protocol.error_response import error_response

    kept = [t for t in topics if t not in refused]
    errors = error_response(
        api_key,
        _with_topics(request, req_field, refused),
        ctx.response_class,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    )
    result = handler(ctx, _with_topics(request, req_field, kept))

    def merge(response: Any) -> Any:
        if not dataclasses.is_dataclass(response):
            return response  # NO_RESPONSE (acks=0)
        return dataclasses.replace(
            response,
            **{
                resp_field: tuple(getattr(response, resp_field))
                + tuple(getattr(errors, resp_field))
            },
        )

    if inspect.isawaitable(result):
        return _then(result, merge)
    return merge(result)


def _with_topics(request: Any, field: str, topics: list[Any]) -> Any:
    value = tuple(topics) if isinstance(getattr(request, field), tuple) else list(topics)
    return dataclasses.replace(request, **{field: value})
