"""The ACL authorizer in front of the request handlers: what each API checks, as KafkaApis does.

Enabled by ``authorizer.class.name`` (Kafka's AclAuthorizer / StandardAuthorizer names are
accepted): ``BrokerAuthorizer`` keeps every ACL of the cluster in memory (security/acl.py's
AclCache), loaded from the coordination store at start-up and refreshed from Kafka's change
notifications (``/kafka-acl-changes``, ``/kafka-acl-extended-changes``) by ``watch``, so an ACL
created on any broker reaches every broker.

``RULES`` says what each API requires (``NO_CHECK`` where Kafka checks nothing: ApiVersions,
SaslHandshake, SaslAuthenticate, DescribeCluster). ``guard(api_key, handler)`` wraps a handler
(the broker wraps every one when an authorizer is set; without one nothing here runs) and
refuses one whose API has no rule, so the broker does not start serving an API unchecked. A
request that fails a check of the request as a
whole (a group, a transactional id, the cluster) raises a KafkaError with Kafka's code and the
dispatcher answers the API's error response with it for everything the request named
(GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Requests naming topics or config resources are
answered item by item as KafkaApis does (``SPLIT`` and ``OWN``): the authorised items go to the
handler, the others are answered TOPIC_AUTHORIZATION_FAILED (CLUSTER_AUTHORIZATION_FAILED for
a broker's configs) in the same response, before their existence is looked at, so a refused
answer never tells whether the topic exists. Produce, Fetch (READ; a follower needs
CLUSTER_ACTION, else every partition is refused), ListOffsets, OffsetForLeaderEpoch,
DeleteRecords, CreatePartitions, OffsetCommit, OffsetFetch (DESCRIBE; asked for all topics,
the unauthorised ones are left out), CreateTopics (CREATE on the cluster or the topic),
DeleteTopics (DELETE, by name or id), DescribeConfigs (DESCRIBE_CONFIGS), AlterConfigs and
IncrementalAlterConfigs (ALTER_CONFIGS), TxnOffsetCommit and DescribeProducers (READ), and
FindCoordinator v4+ key by key (DESCRIBE on each group or transactional id).

Transactions (Kafka's handlers): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit
need WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), AddOffsetsToTxn and
TxnOffsetCommit then READ on the group (GROUP_AUTHORIZATION_FAILED); AddPartitionsToTxn needs
WRITE on each topic (never an internal one) and adds nothing if a partition is refused or
unknown (the others OPERATION_NOT_ATTEMPTED); WriteTxnMarkers needs ALTER or CLUSTER_ACTION on
the cluster; DescribeTransactions answers an id without DESCRIBE on it
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and lists only the topics the principal may DESCRIBE;
ListTransactions lists only the ids it may DESCRIBE; InitProducerId needs WRITE on its
transactional id, or without one IDEMPOTENT_WRITE on the cluster or WRITE on any topic.

Every refusal is logged at INFO ("operation denied": principal, host, operation, resource; no
request content), at most once per ``DENIED_LOG_INTERVAL_S`` per principal, operation and
resource type; filtering a listing and computing authorized operations log nothing.

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

from kafkalite.observability import LogRateLimiter
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

DENIED_LOG_INTERVAL_S = 10.0
"""A principal's refusals of one operation on one resource type are logged once per this many
seconds (with how many were held back), so a client retrying in a loop cannot flood the log."""

Op = AclOperation
T = ResourceType


class BrokerAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.cache = AclCache(super_users, allow_if_no_acl)
        self._denied_log = LogRateLimiter(DENIED_LOG_INTERVAL_S)

    def allowed(
        self,
        connection: Any,
        op: AclOperation,
        rtype: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """Whether the connection's principal may do ``op`` on the resource. A refusal is
        logged (as Kafka's authorizer logs denied operations) unless ``log_denied`` is False:
        filtering a listing and computing authorized-operation bit fields refuse nothing."""
        principal, host = connection.authenticated_principal, connection.client_host
        if self.cache.authorize(principal, host, op, rtype, name):
            return True
        if log_denied:
            self.log_denied(principal, host, op, rtype, name)
        return False

    def log_denied(
        self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str
    ) -> None:
        # keyed without the resource name, which a client chooses: the key set stays bounded
        suppressed = self._denied_log.allow((principal, int(op), int(rtype)))
        if suppressed is not None:
            log.info(
                "operation denied",
                principal=principal,
                host=host,
                operation=AclOperation(op).name,
                resource_type=ResourceType(rtype).name,
                resource_name=name,
                suppressed_since_last=suppressed,
            )

    def authorize_cluster(self, connection: Any, operation: str) -> bool:
        return self.allowed(connection, AclOperation[operation], T.CLUSTER, CLUSTER_NAME)

    def operations(self, connection: Any, rtype: ResourceType, name: str) -> int:
        """The authorized-operations bit field of a resource (KIP-430)."""
        return to_32bit_field(
            op
            for op in SUPPORTED_OPERATIONS[rtype]
            if self.allowed(connection, op, rtype, name, log_denied=False)
        )

    # ------------------------------------------------------------------ the store

    async def load(self, session: Any) -> None:
        from kafkalite.zk.security import load_all_acls

        for pattern, entries in await load_all_acls(session):
            self.cache.set(pattern, entries)
        log.info("ACLs loaded", acls=len(self.cache))

    async def watch(self, session: Any) -> None:
        """Kafka's ZkNodeChangeNotificationListener over both change paths: each new
        notification names a resource pattern whose ACLs are read again."""
        from kafkalite.zk.security import ACL_CHANGES, ACL_EXTENDED_CHANGES

        await asyncio.gather(
            self._watch_changes(session, ACL_CHANGES),
            self._watch_changes(session, ACL_EXTENDED_CHANGES),
        )

    async def _watch_changes(self, session: Any, path: str) -> None:
        from kafkalite.coord.errors import NoNode
        from kafkalite.security.acl import decode_change
        from kafkalite.zk.security import read_acls

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
    return auth.allowed(conn, Op.CREATE, T.CLUSTER, CLUSTER_NAME, log_denied=False) or auth.allowed(
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
    elif api_key == K.OFFSET_FOR_LEADER_EPOCH:
        if getattr(request, "replica_id", -1) >= 0:
            _need_cluster(ctx, auth, Op.CLUSTER_ACTION)
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
        if tid is not None:
            _need_transactional_id(ctx, auth, Op.WRITE, tid)
        elif not _idempotent_write_allowed(ctx, auth):
            raise _refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    elif api_key == K.ADD_PARTITIONS_TO_TXN:
        # the topics are checked by _add_partitions_to_txn
        _need_transactional_id(ctx, auth, Op.WRITE, request.v3_and_below_transactional_id)
    elif api_key in (K.ADD_OFFSETS_TO_TXN, K.TXN_OFFSET_COMMIT):
        # the id first, then the group: Kafka's order (TxnOffsetCommit's topics: SPLIT)
        _need_transactional_id(ctx, auth, Op.WRITE, request.transactional_id)
        _need_group(ctx, auth, Op.READ, request.group_id)
    elif api_key == K.END_TXN:
        _need_transactional_id(ctx, auth, Op.WRITE, request.transactional_id)
    elif api_key == K.WRITE_TXN_MARKERS:
        # a coordinator's request: ALTER on the cluster (not logged when missing) or
        # CLUSTER_ACTION, as Kafka's handleWriteTxnMarkersRequest
        if not auth.allowed(ctx.connection, Op.ALTER, T.CLUSTER, CLUSTER_NAME, log_denied=False):
            _need_cluster(ctx, auth, Op.CLUSTER_ACTION)
    elif api_key == K.FIND_COORDINATOR:
        if not getattr(request, "coordinator_keys", None):  # v0-v3; v4+ key by key: SPLIT
            refused = _coordinator_refusal(ctx, auth, request, getattr(request, "key", ""))
            if refused is not None:
                raise _refuse(refused)
    elif api_key in (K.JOIN_GROUP, K.SYNC_GROUP, K.HEARTBEAT, K.LEAVE_GROUP):
        _need_group(ctx, auth, Op.READ, request.group_id)
    elif api_key == K.OFFSET_COMMIT:
        _need_group(ctx, auth, Op.READ, request.group_id)
    elif api_key == K.OFFSET_DELETE:
        _need_group(ctx, auth, Op.DELETE, request.group_id)
        _need_topics(ctx, auth, Op.READ, _topics(request))
    elif api_key == K.OFFSET_FETCH:
        if getattr(request, "groups", None) is None:  # v8+: group by group (_offset_fetch)
            _need_group(ctx, auth, Op.DESCRIBE, request.group_id)
    elif api_key == K.DESCRIBE_GROUPS:
        for group in request.groups:
            _need_group(ctx, auth, Op.DESCRIBE, group)
    elif api_key == K.CONSUMER_GROUP_HEARTBEAT:
        _need_group(ctx, auth, Op.READ, request.group_id)
        _need_topics(ctx, auth, Op.DESCRIBE, list(request.subscribed_topic_names or ()))
    # ConsumerGroupDescribe: group by group in its handler (apis/consumer_group_describe.py)
    elif api_key == K.DELETE_GROUPS:
        for group in request.groups_names:
            _need_group(ctx, auth, Op.DELETE, group)


def _need_transactional_id(ctx: Any, auth: BrokerAuthorizer, op: AclOperation, tid: Any) -> None:
    if tid is not None and not auth.allowed(ctx.connection, op, T.TRANSACTIONAL_ID, tid):
        raise _refuse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def _idempotent_write_allowed(ctx: Any, auth: BrokerAuthorizer) -> bool:
    """Kafka 3.x: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679), the latter
    as Kafka's Authorizer.authorizeByResourceType decides it: a super user (or no ACL at all
    with ``allow.everyone.if.no.acl.found``) may; a DENY on the literal ``*`` forbids; else any
    ALLOW pattern of the principal not itself denied (the same literal, or a denied prefix of
    it) is enough."""
    conn = ctx.connection
    if auth.allowed(conn, Op.IDEMPOTENT_WRITE, T.CLUSTER, CLUSTER_NAME, log_denied=False):
        return True
    principal, host = conn.authenticated_principal, conn.client_host
    if auth.cache.authorize(principal, host, Op.WRITE, T.TOPIC, "hardcode"):
        return True
    from kafkalite.security.acl import PatternType, PermissionType

    deny: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allow: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    wildcard_allow = False
    for pattern, entries in auth.cache.items():
        if pattern.resource_type != T.TOPIC or pattern.pattern_type not in deny:
            continue
        for e in entries:
            if e.host not in (host, "*") or e.principal not in (principal, "User:*"):
                continue
            if e.operation not in (Op.WRITE, Op.ALL):
                continue
            if e.permission == PermissionType.DENY:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == "*":
                    auth.log_denied(principal, host, Op.IDEMPOTENT_WRITE, T.CLUSTER, CLUSTER_NAME)
                    return False
                deny[pattern.pattern_type].add(pattern.name)
            elif e.permission == PermissionType.ALLOW:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == "*":
                    wildcard_allow = True
                else:
                    allow[pattern.pattern_type].add(pattern.name)
    if wildcard_allow:
        return True
    for kind, names in allow.items():
        for name in names:
            if kind == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                continue
            if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                return True
    auth.log_denied(principal, host, Op.IDEMPOTENT_WRITE, T.CLUSTER, CLUSTER_NAME)
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
        if name is not None and not auth.allowed(
            conn, Op.DESCRIBE, T.TOPIC, name, log_denied=False
        ):
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
    if auth.allowed(ctx.connection, Op.DESCRIBE, T.CLUSTER, CLUSTER_NAME, log_denied=False):
        return response
    return dataclasses.replace(
        response,
        groups=tuple(
            g
            for g in response.groups
            if auth.allowed(ctx.connection, Op.DESCRIBE, T.GROUP, g.group_id, log_denied=False)
        ),
    )


_AFTER: dict[int, Callable[[Any, BrokerAuthorizer, Any], Any]] = {
    ApiKey.CREATE_TOPICS: lambda ctx, auth, r: _create_topics_after(ctx, auth, r),
    ApiKey.DESCRIBE_CLUSTER: _cluster_ops_after,
    ApiKey.DESCRIBE_GROUPS: _groups_ops_after,
    ApiKey.LIST_GROUPS: _list_groups_after,
    ApiKey.LIST_TRANSACTIONS: lambda ctx, auth, r: _list_transactions_after(ctx, auth, r),
}


NO_CHECK = "none, as Kafka"

_INTER_BROKER = "CLUSTER_ACTION on the cluster"

RULES: dict[int, str] = {
    ApiKey.PRODUCE: "WRITE on each topic; WRITE on the transactional id of a transactional one",
    ApiKey.FETCH: "READ on each topic; CLUSTER_ACTION on the cluster for a follower",
    ApiKey.LIST_OFFSETS: "DESCRIBE on each topic",
    ApiKey.METADATA: "DESCRIBE on each topic (others left out); CREATE to auto-create",
    ApiKey.LEADER_AND_ISR: _INTER_BROKER,
    ApiKey.STOP_REPLICA: _INTER_BROKER,
    ApiKey.UPDATE_METADATA: _INTER_BROKER,
    ApiKey.CONTROLLED_SHUTDOWN: _INTER_BROKER,
    ApiKey.OFFSET_COMMIT: "READ on the group; READ on each topic",
    ApiKey.OFFSET_FETCH: "DESCRIBE on the group; DESCRIBE on each topic",
    ApiKey.FIND_COORDINATOR: "DESCRIBE on the group or the transactional id",
    ApiKey.JOIN_GROUP: "READ on the group",
    ApiKey.HEARTBEAT: "READ on the group",
    ApiKey.LEAVE_GROUP: "READ on the group",
    ApiKey.SYNC_GROUP: "READ on the group",
    ApiKey.DESCRIBE_GROUPS: "DESCRIBE on each group",
    ApiKey.LIST_GROUPS: "DESCRIBE on the cluster, else the groups it may DESCRIBE",
    ApiKey.SASL_HANDSHAKE: NO_CHECK,
    ApiKey.API_VERSIONS: NO_CHECK,
    ApiKey.CREATE_TOPICS: "CREATE on the cluster or on each topic",
    ApiKey.DELETE_TOPICS: "DELETE on each topic",
    ApiKey.DELETE_RECORDS: "DELETE on each topic",
    ApiKey.INIT_PRODUCER_ID: (
        "WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster "
        "or WRITE on any topic"
    ),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "DESCRIBE on each topic; CLUSTER_ACTION for a follower",
    ApiKey.ADD_PARTITIONS_TO_TXN: "WRITE on the transactional id; WRITE on each topic",
    ApiKey.ADD_OFFSETS_TO_TXN: "WRITE on the transactional id; READ on the group",
    ApiKey.END_TXN: "WRITE on the transactional id",
    ApiKey.WRITE_TXN_MARKERS: "ALTER or CLUSTER_ACTION on the cluster",
    ApiKey.TXN_OFFSET_COMMIT: (
        "WRITE on the transactional id; READ on the group; READ on each topic"
    ),
    ApiKey.DESCRIBE_ACLS: "DESCRIBE on the cluster",
    ApiKey.CREATE_ACLS: "ALTER on the cluster",
    ApiKey.DELETE_ACLS: "ALTER on the cluster",
    ApiKey.DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS on each topic and group, on the cluster for a broker",
    ApiKey.ALTER_CONFIGS: "ALTER_CONFIGS on each topic and group, on the cluster for a broker",
    ApiKey.DESCRIBE_LOG_DIRS: "DESCRIBE on the cluster",
    ApiKey.SASL_AUTHENTICATE: NO_CHECK,
    ApiKey.CREATE_PARTITIONS: "ALTER on each topic",
    ApiKey.DELETE_GROUPS: "DELETE on each group",
    ApiKey.ELECT_LEADERS: "ALTER on the cluster",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "ALTER_CONFIGS on each topic and group, on the cluster for a broker",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "ALTER on the cluster",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "DESCRIBE on the cluster",
    ApiKey.OFFSET_DELETE: "DELETE on the group; READ on each topic",
    ApiKey.DESCRIBE_CLIENT_QUOTAS: "DESCRIBE_CONFIGS on the cluster",
    ApiKey.ALTER_CLIENT_QUOTAS: "ALTER_CONFIGS on the cluster",
    # checked by the handler (apis/scram_credentials.py), per user
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DESCRIBE on the cluster",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "ALTER on the cluster",
    ApiKey.DESCRIBE_CLUSTER: NO_CHECK + " (cluster_authorized_operations from the ACLs)",
    ApiKey.DESCRIBE_PRODUCERS: "READ on each topic, before its existence",
    ApiKey.DESCRIBE_TRANSACTIONS: "DESCRIBE on each transactional id; topics it may DESCRIBE",
    ApiKey.LIST_TRANSACTIONS: "the transactional ids it may DESCRIBE",
    # share groups: checked by their handlers (apis/share_group.py, share_fetch.py, share_state.py)
    ApiKey.SHARE_GROUP_HEARTBEAT: "READ on the group; DESCRIBE on each subscribed topic",
    ApiKey.SHARE_GROUP_DESCRIBE: "DESCRIBE on each group",
    ApiKey.SHARE_FETCH: "READ on the group; READ on each topic",
    ApiKey.SHARE_ACKNOWLEDGE: "READ on the group; READ on each topic",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: _INTER_BROKER,
    ApiKey.READ_SHARE_GROUP_STATE: _INTER_BROKER,
    ApiKey.WRITE_SHARE_GROUP_STATE: _INTER_BROKER,
    ApiKey.DELETE_SHARE_GROUP_STATE: _INTER_BROKER,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _INTER_BROKER,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: "DESCRIBE on the group; DESCRIBE on each topic",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: "READ on the group; READ on each topic",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: "DELETE on the group; READ on each topic",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "READ on the group; DESCRIBE on each subscribed topic",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "DESCRIBE on each group (checked by the handler)",
}
"""What each API requires, as Kafka's KafkaApis (the checks are ``check``, ``SPLIT``, ``OWN``
and ``_AFTER``). Every API the broker serves must be here, ``NO_CHECK`` included where Kafka
checks nothing: ``guard`` refuses to wrap a handler without a rule, so with an authorizer the
broker does not start with an API nobody decided about."""


class MissingRuleError(LookupError):
    """An API has a handler but no authorization rule (RULES)."""


def guard(api_key: int, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The handler behind the authorizer's checks (see the module docstring)."""
    if api_key not in RULES:
        raise MissingRuleError(
            f"API key {api_key} has a handler but no authorization rule "
            "(kafkalite/apis/authorization.py RULES)"
        )
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
    own = OWN.get(api_key)

    def guarded(ctx: Any, request: Any) -> Any:
        auth = ctx.services.extra["authorizer"]
        check(ctx, auth, api_key, request)
        if own is not None:
            return own(ctx, auth, handler, request)
        if split is not None:
            result = _split_by_topic(ctx, auth, api_key, split, handler, request)
        else:
            result = handler(ctx, request)
        if after is None:
            return result
        if inspect.isawaitable(result):
            return _then(result, lambda r: after(ctx, auth, r))
        return after(ctx, auth, result)

    return guarded


async def _then(result: Any, fn: Callable[[Any], Any]) -> Any:
    return fn(await result)


Refusal = Callable[[Any, BrokerAuthorizer, Any, Any], "ErrorCode | None"]
"""(ctx, authorizer, request, one item of the request's list) -> the error code the item is
answered with, or None when it goes to the handler."""


def _topic_op(op: AclOperation, name_attr: str = "name") -> Refusal:
    def refusal(ctx: Any, auth: BrokerAuthorizer, request: Any, item: Any) -> ErrorCode | None:
        if auth.allowed(ctx.connection, op, T.TOPIC, getattr(item, name_attr)):
            return None
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED

    return refusal


def _describe_producers_refusal(
    ctx: Any, auth: BrokerAuthorizer, request: Any, item: Any
) -> ErrorCode | None:
    """READ on the topic, as Kafka's handleDescribeProducersRequest: after the name's validity
    (an illegal name goes to the handler, which answers INVALID_TOPIC_EXCEPTION; that says
    nothing about any topic) and before its existence."""
    from kafkalite.apis.topic_names import invalid_topic_reason

    if invalid_topic_reason(item.name) is not None:
        return None
    if auth.allowed(ctx.connection, Op.READ, T.TOPIC, item.name):
        return None
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _coordinator_refusal(
    ctx: Any, auth: BrokerAuthorizer, request: Any, key: str
) -> ErrorCode | None:
    """DESCRIBE on the transactional id (key type 1) or the group, as Kafka's getCoordinator;
    v4+ answers each key of the batch on its own."""
    if getattr(request, "key_type", 0) == 1:
        if auth.allowed(ctx.connection, Op.DESCRIBE, T.TRANSACTIONAL_ID, key):
            return None
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if auth.allowed(ctx.connection, Op.DESCRIBE, T.GROUP, key):
        return None
    return ErrorCode.GROUP_AUTHORIZATION_FAILED


def _create_refusal(ctx: Any, auth: BrokerAuthorizer, request: Any, item: Any) -> ErrorCode | None:
    """CREATE on the cluster or on the topic; asked before the topic's existence, so a topic
    that exists is not revealed to a principal that may not create it."""
    return None if _may_create(ctx, auth, item.name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _delete_refusal(ctx: Any, auth: BrokerAuthorizer, request: Any, item: Any) -> ErrorCode | None:
    """DELETE on the topic (v0-v5 name strings, v6 names or ids; an id is resolved first and
    one no broker knows goes to the handler, which answers UNKNOWN_TOPIC_ID)."""
    name = item if isinstance(item, str) else item.name
    if name is None:
        cache = ctx.services.metadata_cache
        name = cache.get_topic_name(item.topic_id) if cache is not None else None
        if name is None:
            return None
    if auth.allowed(ctx.connection, Op.DELETE, T.TOPIC, name):
        return None
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _config_refusal(op: AclOperation) -> Refusal:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), on the group
    for GROUP resources (GROUP_AUTHORIZATION_FAILED), or on the cluster for BROKER and BROKER_LOGGER resources (CLUSTER_AUTHORIZATION_FAILED)."""

    def refusal(ctx: Any, auth: BrokerAuthorizer, request: Any, item: Any) -> ErrorCode | None:
        if int(item.resource_type) == 2:  # TOPIC
            if auth.allowed(ctx.connection, op, T.TOPIC, item.resource_name):
                return None
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if int(item.resource_type) == 32:  # GROUP
            if auth.allowed(ctx.connection, op, T.GROUP, item.resource_name):
                return None
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        if auth.allowed(ctx.connection, op, T.CLUSTER, CLUSTER_NAME):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    return refusal


SPLIT: dict[int, tuple[str, str, Refusal]] = {
    # api: (request's list, response's list, what refuses one item)
    ApiKey.PRODUCE: ("topic_data", "responses", _topic_op(Op.WRITE)),
    ApiKey.LIST_OFFSETS: ("topics", "topics", _topic_op(Op.DESCRIBE)),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ("topics", "topics", _topic_op(Op.DESCRIBE, "topic")),
    ApiKey.DELETE_RECORDS: ("topics", "topics", _topic_op(Op.DELETE)),
    ApiKey.CREATE_PARTITIONS: ("topics", "results", _topic_op(Op.ALTER)),
    ApiKey.OFFSET_COMMIT: ("topics", "topics", _topic_op(Op.READ)),
    ApiKey.TXN_OFFSET_COMMIT: ("topics", "topics", _topic_op(Op.READ)),
    ApiKey.DESCRIBE_PRODUCERS: ("topics", "topics", _describe_producers_refusal),
    ApiKey.CREATE_TOPICS: ("topics", "topics", _create_refusal),
    ApiKey.FIND_COORDINATOR: ("coordinator_keys", "coordinators", _coordinator_refusal),
    ApiKey.DESCRIBE_CONFIGS: ("resources", "results", _config_refusal(Op.DESCRIBE_CONFIGS)),
    ApiKey.ALTER_CONFIGS: ("resources", "responses", _config_refusal(Op.ALTER_CONFIGS)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        "resources",
        "responses",
        _config_refusal(Op.ALTER_CONFIGS),
    ),
}
"""APIs answered item by item as Kafka does: the authorised topics (resources) go to the
handler, the others are answered with their error in the same response. DeleteTopics, Fetch
and OffsetFetch have their own functions below (a second request list, an encoded response,
groups)."""


def _split_by_topic(
    ctx: Any,
    auth: BrokerAuthorizer,
    api_key: int,
    split: tuple[str, str, Refusal],
    handler: Callable[[Any, Any], Any],
    request: Any,
) -> Any:
    req_field, resp_field, refusal = split
    if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH and getattr(request, "replica_id", -1) >= 0:
        return handler(ctx, request)
    if api_key == ApiKey.DELETE_TOPICS and getattr(request, "topic_names", None) is not None:
        req_field = "topic_names"  # v0-v5
    return _answer_split(ctx, auth, api_key, req_field, resp_field, refusal, handler, request)


def _answer_split(
    ctx: Any,
    auth: BrokerAuthorizer,
    api_key: int,
    req_field: str,
    resp_field: str,
    refusal: Refusal,
    handler: Callable[[Any, Any], Any],
    request: Any,
) -> Any:
    items = list(getattr(request, req_field, None) or ())
    kept: list[Any] = []
    refused: dict[ErrorCode, list[Any]] = {}
    for item in items:
        code = refusal(ctx, auth, request, item)
        if code is None:
            kept.append(item)
        else:
            refused.setdefault(code, []).append(item)
    if not refused:
        return handler(ctx, request)
    from kafkalite.protocol.error_response import error_response

    message = _MESSAGES.get(api_key, "")
    answered = tuple(
        dataclasses.replace(entry, error_message=message)
        if message != "" and hasattr(entry, "error_message")
        else entry
        for code, some in refused.items()
        for entry in getattr(
            error_response(
                api_key, _with_topics(request, req_field, some), ctx.response_class, code
            ),
            resp_field,
        )
    )
    if not kept:
        if api_key == ApiKey.PRODUCE and len(refused) == 1:
            # the dispatcher's error answer (it also knows acks=0)
            raise _refuse(next(iter(refused)))
        errors = error_response(api_key, request, ctx.response_class, ErrorCode.NONE)
        return dataclasses.replace(errors, **{resp_field: answered})
    result = handler(ctx, _with_topics(request, req_field, kept))

    def merge(response: Any) -> Any:
        if not dataclasses.is_dataclass(response):
            return response  # NO_RESPONSE (acks=0)
        return dataclasses.replace(
            response, **{resp_field: tuple(getattr(response, resp_field)) + answered}
        )

    if inspect.isawaitable(result):
        return _then(result, merge)
    return merge(result)


_MESSAGES: dict[int, str | None] = {
    ApiKey.CREATE_TOPICS: "Authorization failed.",
    ApiKey.ALTER_CONFIGS: None,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: None,
    ApiKey.FIND_COORDINATOR: None,
}
"""The error message of a refused item where Kafka's is not the error's default one."""


def _create_topics_after(ctx: Any, auth: BrokerAuthorizer, response: Any) -> Any:
    """CreateTopics v5+ returns a topic's configs, partitions and replication factor only with
    DESCRIBE_CONFIGS on it; without, ``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED
    (a topic refused for CREATE included, one whose creation failed excepted)."""
    topics = []
    for topic in response.topics:
        if hasattr(topic, "topic_config_error_code") and not auth.allowed(
            ctx.connection, Op.DESCRIBE_CONFIGS, T.TOPIC, topic.name, log_denied=False
        ):
            if topic.error_code == ErrorCode.NONE:
                topic = dataclasses.replace(
                    topic,
                    topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None if topic.configs is None else (),
                )
            elif topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                topic = dataclasses.replace(
                    topic, topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
        topics.append(topic)
    return dataclasses.replace(response, topics=tuple(topics))


def _delete_topics(
    ctx: Any, auth: BrokerAuthorizer, handler: Callable[[Any, Any], Any], request: Any
) -> Any:
    """DELETE on each topic; one named by id is answered with its name only to a principal
    that may DESCRIBE it (Kafka hides the name, not the id)."""
    field = "topic_names" if getattr(request, "topic_names", None) is not None else "topics"
    result = _answer_split(
        ctx, auth, ApiKey.DELETE_TOPICS, field, "responses", _delete_refusal, handler, request
    )
    cache = ctx.services.metadata_cache
    if field == "topic_names" or cache is None:
        return result
    names = {}
    for item in request.topics:
        if item.name is None and item.topic_id is not None:
            name = cache.get_topic_name(item.topic_id)
            if name is not None and auth.allowed(
                ctx.connection, Op.DESCRIBE, T.TOPIC, name, log_denied=False
            ):
                names[item.topic_id] = name

    def named(response: Any) -> Any:
        if not names:
            return response
        return dataclasses.replace(
            response,
            responses=tuple(
                dataclasses.replace(r, name=names[r.topic_id])
                if r.name is None and r.topic_id in names
                else r
                for r in response.responses
            ),
        )

    if inspect.isawaitable(result):
        return _then(result, named)
    return named(result)


def _fetch(ctx: Any, auth: BrokerAuthorizer, handler: Callable[..., Any], request: Any) -> Any:
    """Kafka's handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster, else every
    partition it fetches is answered TOPIC_AUTHORIZATION_FAILED; a consumer needs READ on each
    topic, and the partitions of the others are answered TOPIC_AUTHORIZATION_FAILED (before
    their existence is looked at) next to the data of the authorised ones. The handler asks
    ``may_read`` about every partition of its fetch context, a session's included."""
    conn = ctx.connection
    if getattr(request, "replica_id", -1) >= 0:
        if auth.allowed(conn, Op.CLUSTER_ACTION, T.CLUSTER, CLUSTER_NAME):
            return handler(ctx, request)
        return handler(ctx, request, may_read=lambda topic: False)
    return handler(ctx, request, may_read=lambda topic: auth.allowed(conn, Op.READ, T.TOPIC, topic))


def _offset_fetch(
    ctx: Any, auth: BrokerAuthorizer, handler: Callable[[Any, Any], Any], request: Any
) -> Any:
    """Kafka's handleOffsetFetchRequest (the group's DESCRIBE is checked by ``check``): the
    partitions of a named topic the principal may not DESCRIBE are answered
    TOPIC_AUTHORIZATION_FAILED (offset -1, no metadata); asked for every topic (null), the
    group's unauthorised topics are left out."""
    conn = ctx.connection

    def allowed(name: str) -> bool:
        return auth.allowed(conn, Op.DESCRIBE, T.TOPIC, name)

    def split(holder: Any) -> tuple[Any, list[Any]]:
        topics = getattr(holder, "topics", None)
        if topics is None:
            return holder, []
        kept = [t for t in topics if allowed(t.name)]
        refused = [t for t in topics if not allowed(t.name)]
        if not refused:
            return holder, []
        return _with_topics(holder, "topics", kept), refused

    def answered(refused: list[Any], entry_cls: type) -> tuple[Any, ...]:
        from kafkalite.apis.base import build

        return tuple(
            build(
                entry_cls,
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": -1,
                            "committed_leader_epoch": -1,
                            "metadata": "",
                            "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        }
                        for p in t.partition_indexes
                    ],
                },
            )
            for t in refused
        )

    def fix_topics(topics: tuple[Any, ...], refused: list[Any], everything: bool) -> tuple:
        if everything:
            return tuple(t for t in topics if allowed(t.name))
        if not refused:
            return tuple(topics)
        entry_cls = _entry_class(ctx.response_class, ctx.api_version)
        return tuple(topics) + answered(refused, entry_cls)

    groups = getattr(request, "groups", None)
    if groups is not None:  # v8+: a group it may not DESCRIBE is answered alone
        order = [g.group_id for g in groups]
        denied = [
            g.group_id for g in groups if not auth.allowed(conn, Op.DESCRIBE, T.GROUP, g.group_id)
        ]
        split_groups = [split(g) for g in groups if g.group_id not in denied]
        request = _with_topics(request, "groups", [g for g, _ in split_groups])
        refused_of = {g.group_id: r for g, r in split_groups}
        everything = {g.group_id: g.topics is None for g, _ in split_groups}

        def after(response: Any) -> Any:
            from kafkalite.apis.base import build

            out = [
                build(
                    _list_class(ctx.response_class, "groups"),
                    {
                        "group_id": g,
                        "topics": [],
                        "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    },
                )
                for g in denied
            ]
            for group in response.groups:
                refused = refused_of.get(group.group_id, [])
                if group.error_code == ErrorCode.NONE and (refused or everything[group.group_id]):
                    group = dataclasses.replace(
                        group,
                        topics=fix_topics(group.topics, refused, everything[group.group_id]),
                    )
                out.append(group)
            out.sort(key=lambda g: order.index(g.group_id) if g.group_id in order else len(order))
            return dataclasses.replace(response, groups=tuple(out))

    else:
        everything_v = getattr(request, "topics", None) is None
        request, refused = split(request)

        def after(response: Any) -> Any:
            if not (refused or everything_v):
                return response
            if response.error_code != ErrorCode.NONE and ctx.api_version >= 2:
                return response  # a group-level error answers no partitions
            return dataclasses.replace(
                response, topics=fix_topics(response.topics, refused, everything_v)
            )

    result = handler(ctx, request)
    if inspect.isawaitable(result):
        return _then(result, after)
    return after(result)


def _entry_class(response_cls: Any, version: int) -> type:
    """The topic entry class of an OffsetFetch response (v0-v7 top level, v8+ per group)."""
    cls = response_cls
    if version >= 8:
        cls = _list_class(cls, "groups")
    return _list_class(cls, "topics")


def _list_class(cls: Any, field: str) -> type:
    import typing

    for f in dataclasses.fields(cls):
        if f.name == field:
            return typing.get_args(f.type)[0]
    raise TypeError(f"no {field} field")


# ---------------------------------------------------------------------- transactions


def _add_partitions_to_txn(
    ctx: Any, auth: BrokerAuthorizer, handler: Callable[[Any, Any], Any], request: Any
) -> Any:
    """Kafka's handleAddPartitionsToTxnRequest (v0-v3; the transactional id's WRITE is checked
    by ``check``): WRITE on each topic, an internal topic never (``__consumer_offsets`` joins a
    transaction through AddOffsetsToTxn). If any partition is refused (or, for an authorised
    topic, unknown) nothing is added: the refused ones get TOPIC_AUTHORIZATION_FAILED, the
    unknown ones UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED."""
    from kafkalite.apis.topic_names import is_internal

    conn = ctx.connection
    topics = request.v3_and_below_topics
    denied = {
        t.name
        for t in topics
        if is_internal(t.name) or not auth.allowed(conn, Op.WRITE, T.TOPIC, t.name)
    }
    if not denied:
        return handler(ctx, request)
    cache = ctx.services.metadata_cache

    def code(topic: str, partition: int) -> ErrorCode:
        if topic in denied:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if cache is None or cache.get_partition_info(topic, partition) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.OPERATION_NOT_ATTEMPTED

    by_topic: dict[str, dict[int, ErrorCode]] = {}
    for t in topics:
        for p in t.partitions:
            by_topic.setdefault(t.name, {})[p] = code(t.name, p)
    return ctx.response(
        results_by_topic_v3_and_below=[
            {
                "name": name,
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": e} for p, e in parts.items()
                ],
            }
            for name, parts in by_topic.items()
        ]
    )


def _describe_transactions(
    ctx: Any, auth: BrokerAuthorizer, handler: Callable[[Any, Any], Any], request: Any
) -> Any:
    """Kafka's handleDescribeTransactionsRequest: an id the principal may not DESCRIBE is
    answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED alone (nothing about it is looked up); the
    partitions of a described transaction are listed only for topics it may DESCRIBE."""
    from kafkalite.protocol.error_response import error_response

    conn = ctx.connection
    ids = list(request.transactional_ids)
    allowed = [i for i in ids if auth.allowed(conn, Op.DESCRIBE, T.TRANSACTIONAL_ID, i)]
    refused = error_response(
        ApiKey.DESCRIBE_TRANSACTIONS,
        dataclasses.replace(request, transactional_ids=tuple(i for i in ids if i not in allowed)),
        ctx.response_class,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    )

    def merge(response: Any) -> Any:
        described = list(response.transaction_states) if response is not None else []
        denied = list(refused.transaction_states)
        states = []
        for i in ids:
            state = (described if i in allowed else denied).pop(0)
            topics = tuple(
                t
                for t in state.topics
                if auth.allowed(conn, Op.DESCRIBE, T.TOPIC, t.topic, log_denied=False)
            )
            states.append(dataclasses.replace(state, topics=topics))
        return dataclasses.replace(refused, transaction_states=tuple(states))

    if not allowed:
        return merge(None)
    result = handler(ctx, dataclasses.replace(request, transactional_ids=tuple(allowed)))
    if inspect.isawaitable(result):
        return _then(result, merge)
    return merge(result)


def _list_transactions_after(ctx: Any, auth: BrokerAuthorizer, response: Any) -> Any:
    """Kafka's handleListTransactionsRequest: only the ids the principal may DESCRIBE."""
    return dataclasses.replace(
        response,
        transaction_states=tuple(
            t
            for t in response.transaction_states
            if auth.allowed(
                ctx.connection,
                Op.DESCRIBE,
                T.TRANSACTIONAL_ID,
                t.transactional_id,
                log_denied=False,
            )
        ),
    )


OWN: dict[int, Callable[..., Any]] = {
    ApiKey.FETCH: _fetch,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
}


def _has_field(cls: Any, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def _with_topics(request: Any, field: str, topics: list[Any]) -> Any:
    value = tuple(topics) if isinstance(getattr(request, field), tuple) else list(topics)
    return dataclasses.replace(request, **{field: value})
