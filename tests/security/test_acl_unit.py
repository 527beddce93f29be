"""AclAuthorizer's decision and ZooKeeper encoding (security/acl.py), no sockets."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.acl import ResourceType as T
from kafkalite.security.acl import (
    AclCache,
    AclEntry,
    PatternType,
    PermissionType,
    ResourcePattern,
    change_notification,
    decode_acls,
    decode_change,
    encode_acls,
    node_path,
)

ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY


def entry(principal="User:alice", op=Op.READ, permission=ALLOW, host="*"):
    return AclEntry(principal, host, op, permission)


def test_literal_prefixed_wildcard_deny_and_implied_describe():
    cache = AclCache(super_users=["User:admin"])
    cache.set(ResourcePattern(T.TOPIC, "orders"), [entry(op=Op.WRITE)])
    cache.set(ResourcePattern(T.TOPIC, "logs-", PatternType.PREFIXED), [entry(op=Op.READ)])
    cache.set(ResourcePattern(T.TOPIC, "*"), [entry("User:*", Op.DESCRIBE)])
    cache.set(ResourcePattern(T.TOPIC, "logs-secret"), [entry(op=Op.ALL, permission=DENY)])
    cache.set(ResourcePattern(T.GROUP, "g"), [entry(op=Op.READ, host="10.0.0.1")])
    auth = cache.authorize
    assert auth("User:alice", "h", Op.WRITE, T.TOPIC, "orders")
    assert auth("User:alice", "h", Op.DESCRIBE, T.TOPIC, "orders")  # implied by WRITE
    assert not auth("User:alice", "h", Op.READ, T.TOPIC, "orders")
    assert auth("User:alice", "h", Op.READ, T.TOPIC, "logs-app")  # prefixed
    assert not auth("User:alice", "h", Op.READ, T.TOPIC, "logs")
    assert not auth("User:alice", "h", Op.READ, T.TOPIC, "logs-secret")  # DENY wins
    assert auth("User:bob", "h", Op.DESCRIBE, T.TOPIC, "anything")  # wildcard name+principal
    assert not auth("User:bob", "h", Op.READ, T.TOPIC, "anything")
    assert auth("User:admin", "h", Op.DELETE, T.CLUSTER, "kafka-cluster")  # super user
    assert auth("User:alice", "10.0.0.1", Op.READ, T.GROUP, "g")
    assert not auth("User:alice", "10.0.0.2", Op.READ, T.GROUP, "g")
    # no ACL on the resource: allow.everyone.if.no.acl.found decides
    assert not auth("User:alice", "h", Op.READ, T.GROUP, "other")
    assert AclCache(allow_if_no_acl=True).authorize("User:x", "h", Op.READ, T.GROUP, "other")
    cache.set(ResourcePattern(T.TOPIC, "orders"), [])
    assert not auth("User:alice", "h", Op.WRITE, T.TOPIC, "orders")
    cache.set(ResourcePattern(T.TOPIC, "logs-", PatternType.PREFIXED), [])
    assert not auth("User:alice", "h", Op.READ, T.TOPIC, "logs-app")
    assert len(cache) == 3


def test_zookeeper_layout_is_kafkas():
    literal = ResourcePattern(T.TOPIC, "orders")
    prefixed = ResourcePattern(T.GROUP, "team-", PatternType.PREFIXED)
    assert node_path(literal) == "/kafka-acl/Topic/orders"
    assert node_path(prefixed) == "/kafka-acl-extended/prefixed/Group/team-"
    data = encode_acls([entry(op=Op.DESCRIBE_CONFIGS)])
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "DescribeConfigs",
                "host": "*",
            }
        ],
    }
    assert decode_acls(data) == {entry(op=Op.DESCRIBE_CONFIGS)}
    assert change_notification(literal) == ("/kafka-acl-changes/acl_changes_", b"Topic:orders")
    for pattern in (literal, prefixed):
        assert decode_change(change_notification(pattern)[1]) == pattern


@settings(max_examples=200, deadline=None)
@given(
    acls=st.lists(
        st.tuples(
            st.sampled_from(["a", "ab", "abc", "b", "*"]),
            st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
            st.sampled_from(["User:u", "User:*", "User:v"]),
            st.sampled_from([Op.READ, Op.WRITE, Op.ALL, Op.DESCRIBE]),
            st.sampled_from([ALLOW, DENY]),
        ),
        max_size=8,
    ),
    name=st.sampled_from(["a", "ab", "abc", "abd", "b", "c"]),
    op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE]),
)
def test_the_indexed_lookup_agrees_with_a_scan_of_every_acl(acls, name, op):
    cache = AclCache()
    grouped: dict[ResourcePattern, set[AclEntry]] = {}
    for pname, ptype, principal, operation, permission in acls:
        if ptype == PatternType.PREFIXED and pname == "*":
            continue
        grouped.setdefault(ResourcePattern(T.TOPIC, pname, ptype), set()).add(
            AclEntry(principal, "*", operation, permission)
        )
    for pattern, entries in grouped.items():
        cache.set(pattern, entries)

    def matches(p: ResourcePattern) -> bool:
        if p.pattern_type == PatternType.PREFIXED:
            return name.startswith(p.name)
        return p.name in (name, "*")

    relevant = [e for p, es in grouped.items() if matches(p) for e in es]
    mine = [e for e in relevant if e.principal in ("User:u", "User:*")]
    implied = {Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL} if op == Op.DESCRIBE else {op, Op.ALL}
    if not relevant:
        expected = False
    elif any(e.permission == DENY and e.operation in (op, Op.ALL) for e in mine):
        expected = False
    else:
        expected = any(e.permission == ALLOW and e.operation in implied for e in mine)
    assert cache.authorize("User:u", "h", op, T.TOPIC, name) == expected
