"""Kafka's ACL model and AclAuthorizer decision, with the ZooKeeper encoding it uses.

Pure (layer 0): the store I/O is in zk/security.py, the per-API checks in apis/.

- A ``ResourcePattern`` (type, name, LITERAL or PREFIXED; the literal name ``*`` matches every
  resource of its type) carries ``AclEntry``s (principal, host, operation, ALLOW/DENY).
- ``AclCache.authorize`` is AclAuthorizer.authorize: super users are allowed everything; a
  matching DENY wins; otherwise a matching ALLOW allows (ALLOW of READ, WRITE, DELETE or ALTER
  implies DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL is every operation);
  a resource with no ACL at all is allowed iff ``allow.everyone.if.no.acl.found``. Principals
  match exactly or by the wildcard ``User:*``, hosts exactly or by ``*``.
- The lookup costs O(len(name)) dictionary probes, whatever the number of ACLs: literal ACLs
  are found by (type, name) and (type, "*"), prefixed ones by probing each prefix of the name.

ZooKeeper layout (AclAuthorizer / ZkAclStore): literal ACLs in ``/kafka-acl/<Type>/<name>``,
prefixed ones in ``/kafka-acl-extended/prefixed/<Type>/<name>``, each node
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",
"host":"*"}]}``; a change is announced by a sequential node
``/kafka-acl-changes/acl_changes_<seq>`` holding ``<Type>:<name>`` (literal) or
``/kafka-acl-extended-changes/acl_changes_<seq>`` holding
``{"version":1,"resourceType":"Topic","name":"x","patternType":"PREFIXED"}``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass

from kafkalite.protocol.acl import AclOperation, ResourceType

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


RESOURCE_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
RESOURCE_TYPES_BY_NAME = {v: k for k, v in RESOURCE_TYPE_NAMES.items()}
OPERATION_NAMES: dict[AclOperation, str] = {
    op: "".join(part.capitalize() for part in op.name.split("_"))
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
OPERATIONS_BY_NAME = {v.lower(): k for k, v in OPERATION_NAMES.items()}
PERMISSION_NAMES = {PermissionType.ALLOW: "Allow", PermissionType.DENY: "Deny"}
PERMISSIONS_BY_NAME = {v.lower(): k for k, v in PERMISSION_NAMES.items()}

_IMPLIES_DESCRIBE = frozenset(
    int(op)
    for op in (
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    )
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset(
    int(op) for op in (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
)


class AclError(ValueError):
    """An invalid ACL binding or stored node."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AclEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry


def validate_binding(binding: AclBinding) -> None:
    """Kafka's checks of a CreateAcls entry (AclAuthorizer / AclControlManager)."""
    pattern, entry = binding.pattern, binding.entry
    try:
        ResourceType(pattern.resource_type)
    except ValueError:
        raise AclError(f"unknown resource type {pattern.resource_type}") from None
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError("resource pattern type must be LITERAL or PREFIXED")
    if not pattern.name:
        raise AclError("resource name must not be empty")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}")
    if pattern.pattern_type == PatternType.PREFIXED and pattern.name == WILDCARD:
        raise AclError("a PREFIXED pattern cannot be the wildcard '*'")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or entry.operation not in (
        OPERATION_NAMES
    ):
        raise AclError(f"invalid operation {entry.operation}")
    if entry.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        raise AclError("permission type must be ALLOW or DENY")
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"invalid principal {entry.principal!r}: expected Type:name")
    if not entry.host:
        raise AclError("host must not be empty")


# ---------------------------------------------------------------------- ZooKeeper encoding


def node_path(pattern: ResourcePattern) -> str:
    type_name = RESOURCE_TYPE_NAMES[ResourceType(pattern.resource_type)]
    if pattern.pattern_type == PatternType.PREFIXED:
        return f"/kafka-acl-extended/prefixed/{type_name}/{pattern.name}"
    return f"/kafka-acl/{type_name}/{pattern.name}"


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": PERMISSION_NAMES[e.permission],
            "operation": OPERATION_NAMES[e.operation],
            "host": e.host,
        }
        for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> set[AclEntry]:
    if not data:
        return set()
    try:
        obj = json.loads(data)
        return {
            AclEntry(
                str(a["principal"]),
                str(a["host"]),
                OPERATIONS_BY_NAME[str(a["operation"]).lower()],
                PERMISSIONS_BY_NAME[str(a["permissionType"]).lower()],
            )
            for a in obj.get("acls", [])
        }
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise AclError(f"bad ACL node: {e!r}") from None


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(path prefix of the sequential node, its data) announcing a change of `pattern`."""
    type_name = RESOURCE_TYPE_NAMES[ResourceType(pattern.resource_type)]
    if pattern.pattern_type == PatternType.PREFIXED:
        data = {
            "version": 1,
            "resourceType": type_name,
            "name": pattern.name,
            "patternType": "PREFIXED",
        }
        return "/kafka-acl-extended-changes/acl_changes_", json.dumps(data).encode()
    return "/kafka-acl-changes/acl_changes_", f"{type_name}:{pattern.name}".encode()


def decode_change(data: bytes) -> ResourcePattern:
    text = data.decode()
    if text.startswith("{"):
        obj = json.loads(text)
        return ResourcePattern(
            RESOURCE_TYPES_BY_NAME[obj["resourceType"]],
            obj["name"],
            PatternType[obj["patternType"].upper()],
        )
    type_name, _, name = text.partition(":")
    return ResourcePattern(RESOURCE_TYPES_BY_NAME[type_name], name, PatternType.LITERAL)


# ---------------------------------------------------------------------- the decision


class AclCache:
    """Every ACL of the cluster, in memory on each broker (see the module docstring).

    Indexed for the hot path: literal and prefixed ACLs in dicts keyed by (type, name)
    tuples, each pattern's entries grouped by principal as (host, operation, permission)
    tuples, so a check hashes a few tuples and reads the principal's own entries only."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: dict[ResourcePattern, frozenset[AclEntry]] = {}
        self._literal: dict[tuple[int, str], dict[str, tuple[tuple[str, int, int], ...]]] = {}
        self._prefixed: dict[tuple[int, str], dict[str, tuple[tuple[str, int, int], ...]]] = {}
        self._prefixed_lengths: dict[int, tuple[int, ...]] = {}
        self._length_counts: dict[int, dict[int, int]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._acls.values())

    def set(self, pattern: ResourcePattern, entries: Iterable[AclEntry]) -> None:
        entries = frozenset(entries)
        key = (int(pattern.resource_type), pattern.name)
        prefixed = pattern.pattern_type == PatternType.PREFIXED
        index = self._prefixed if prefixed else self._literal
        if prefixed and (key in index) != bool(entries):
            counts = self._length_counts.setdefault(key[0], {})
            counts[len(pattern.name)] = counts.get(len(pattern.name), 0) + (1 if entries else -1)
            if not counts[len(pattern.name)]:
                del counts[len(pattern.name)]
            self._prefixed_lengths[key[0]] = tuple(sorted(counts))
        if entries:
            self._acls[pattern] = entries
            by_principal: dict[str, list[tuple[str, int, int]]] = {}
            for e in entries:
                by_principal.setdefault(e.principal, []).append(
                    (e.host, int(e.operation), int(e.permission))
                )
            index[key] = {p: tuple(v) for p, v in by_principal.items()}
        else:
            self._acls.pop(pattern, None)
            index.pop(key, None)

    def get(self, pattern: ResourcePattern) -> frozenset[AclEntry]:
        return self._acls.get(pattern, frozenset())

    def items(self) -> list[tuple[ResourcePattern, frozenset[AclEntry]]]:
        return list(self._acls.items())

    def _matching(self, rtype: int, name: str) -> list[dict[str, tuple[tuple[str, int, int], ...]]]:
        literal = self._literal
        out = []
        found = literal.get((rtype, name))
        if found is not None:
            out.append(found)
        found = literal.get((rtype, WILDCARD))
        if found is not None:
            out.append(found)
        lengths = self._prefixed_lengths.get(rtype)
        if lengths:
            prefixed = self._prefixed
            for length in lengths:
                if length > len(name):
                    break
                found = prefixed.get((rtype, name[:length]))
                if found is not None:
                    out.append(found)
        return out

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        groups = self._matching(int(resource_type), name)
        if not groups:
            return self.allow_if_no_acl
        op = int(operation)
        allowed = False
        for group in groups:
            for who in (principal, WILDCARD_PRINCIPAL):
                for e_host, e_op, permission in group.get(who, ()):
                    if e_host != host and e_host != WILDCARD:
                        continue
                    if permission == _DENY:
                        if e_op == op or e_op == _ALL:
                            return False
                    elif not allowed and (
                        e_op == op
                        or e_op == _ALL
                        or (op == _DESCRIBE and e_op in _IMPLIES_DESCRIBE)
                        or (op == _DESCRIBE_CONFIGS and e_op in _IMPLIES_DESCRIBE_CONFIGS)
                    ):
                        allowed = True
        return allowed


_DENY = int(PermissionType.DENY)
_ALL = int(AclOperation.ALL)
_DESCRIBE = int(AclOperation.DESCRIBE)
_DESCRIBE_CONFIGS = int(AclOperation.DESCRIBE_CONFIGS)


def filter_matches(
    pattern: ResourcePattern,
    entry: AclEntry,
    *,
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> bool:
    """Kafka's AclBindingFilter.matches (DescribeAcls / DeleteAcls filters)."""
    if resource_type != 1 and resource_type != pattern.resource_type:  # 1 = ANY
        return False
    if pattern_type == PatternType.MATCH:
        if name is not None:
            if pattern.pattern_type == PatternType.LITERAL:
                if pattern.name not in (name, WILDCARD):
                    return False
            elif not name.startswith(pattern.name):
                return False
    elif pattern_type not in (PatternType.ANY,) and pattern_type != pattern.pattern_type:
        return False
    elif name is not None and pattern.name != name:
        return False
    if principal is not None and entry.principal != principal:
        return False
    if host is not None and entry.host != host:
        return False
    if operation != AclOperation.ANY and operation != entry.operation:
        return False
    if permission != PermissionType.ANY and permission != entry.permission:
        return False
    return True
