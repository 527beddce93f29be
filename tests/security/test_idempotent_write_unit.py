"""InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE on any
topic, decided as Kafka's ``Authorizer.authorizeByResourceType`` (KIP-679), no sockets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalite.apis.authorization import BrokerAuthorizer, _idempotent_write_allowed
from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.acl import ResourceType as T
from kafkalite.security.acl import AclEntry, PatternType, PermissionType, ResourcePattern

ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def decide(acls, principal="User:alice", **options) -> bool:
    auth = BrokerAuthorizer(**options)
    for (rtype, name, kind), entries in acls.items():
        auth.cache.set(ResourcePattern(rtype, name, kind), entries)
    ctx = SimpleNamespace(
        connection=SimpleNamespace(authenticated_principal=principal, client_host="10.0.0.9")
    )
    return _idempotent_write_allowed(ctx, auth)


def acl(op=Op.WRITE, permission=ALLOW, principal="User:alice", host="*"):
    return AclEntry(principal, host, op, permission)


@pytest.mark.parametrize(
    ("acls", "expected"),
    [
        ({}, False),
        ({(T.CLUSTER, "kafka-cluster", LITERAL): [acl(Op.IDEMPOTENT_WRITE)]}, True),
        ({(T.TOPIC, "orders", LITERAL): [acl()]}, True),
        ({(T.TOPIC, "orders", LITERAL): [acl(Op.ALL)]}, True),
        ({(T.TOPIC, "orders", LITERAL): [acl(Op.READ)]}, False),
        ({(T.TOPIC, "orders", LITERAL): [acl(principal="User:*")]}, True),
        ({(T.TOPIC, "orders", LITERAL): [acl(principal="User:bob")]}, False),
        ({(T.TOPIC, "orders", LITERAL): [acl(host="10.0.0.1")]}, False),
        ({(T.TOPIC, "orders-", PREFIXED): [acl()]}, True),
        # a DENY on the same literal, on a prefix of it, or on every topic takes it away
        ({(T.TOPIC, "orders", LITERAL): [acl(), acl(permission=DENY)]}, False),
        (
            {
                (T.TOPIC, "orders", LITERAL): [acl()],
                (T.TOPIC, "ord", PREFIXED): [acl(permission=DENY)],
            },
            False,
        ),
        (
            {
                (T.TOPIC, "orders-", PREFIXED): [acl()],
                (T.TOPIC, "*", LITERAL): [acl(Op.ALL, DENY)],
            },
            False,
        ),
        # ...but a DENY of another topic does not
        (
            {
                (T.TOPIC, "orders", LITERAL): [acl()],
                (T.TOPIC, "payments", LITERAL): [acl(permission=DENY)],
            },
            True,
        ),
    ],
)
def test_write_on_any_topic(acls, expected):
    assert decide(acls) is expected


def test_super_user_and_allow_everyone_if_no_acl_found():
    deny_all = {(T.TOPIC, "*", LITERAL): [acl(Op.ALL, DENY)]}
    assert decide(deny_all, "User:admin", super_users=["User:admin"])
    assert decide({}, allow_if_no_acl=True)
    # no ACL on the cluster: IDEMPOTENT_WRITE allowed to everyone
    assert decide(deny_all, allow_if_no_acl=True)
    # one there (for someone else), and an ACL matching every topic: no "no ACL found" left
    bobs = {(T.CLUSTER, "kafka-cluster", LITERAL): [acl(Op.ALTER, principal="User:bob")]}
    assert not decide({**deny_all, **bobs}, allow_if_no_acl=True)
    assert decide(bobs, allow_if_no_acl=True)
