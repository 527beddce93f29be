"""Kafka's ACL operation codes and the authorized-operations bit sets (KIP-430).

Metadata (v8+) and DescribeCluster answer ``*_authorized_operations`` as a 32-bit field with bit
``code`` set for each ``AclOperation`` the client may perform on the resource
(``Utils.to32BitField``). Kafka's AuthHelper.authorizedOperations, with no authorizer
configured, answers every operation the resource type supports (``AclEntry.supportedOperations``);
kafkalite has no authorizer, so those sets are the answer. ``AUTHORIZED_OPERATIONS_OMITTED``
(Int.MinValue, the schema default) is what a client that did not ask for them gets.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class AclOperation(enum.IntEnum):
    """org.apache.kafka.common.acl.AclOperation codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(enum.IntEnum):
    """org.apache.kafka.common.resource.ResourceType codes (the concrete ones)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER}
        | {_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
        | {_O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}
"""Kafka's AclEntry.supportedOperations."""

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def to_32bit_field(operations: Iterable[AclOperation]) -> int:
    """Utils.to32BitField: bit ``op`` set for each operation, as a signed int32."""
    field = 0
    for op in operations:
        if not 0 <= op < 32:
            raise ValueError(f"operation code {int(op)} does not fit a 32-bit field")
        field |= 1 << op
    return field - (1 << 32) if field >= 1 << 31 else field


def from_32bit_field(field: int) -> set[AclOperation]:
    """The operations whose bits are set (Utils.from32BitField, unknown bits dropped)."""
    return {op for op in AclOperation if field & (1 << op)} if field >= 0 else set()


def authorized_operations(resource_type: ResourceType) -> int:
    """What a broker without an authorizer answers for a resource of this type."""
    return to_32bit_field(SUPPORTED_OPERATIONS[resource_type])
