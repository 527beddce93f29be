"""Kafka API keys, the versions kafkalite can speak, and the versions it advertises.

Three tables, each keyed by ``ApiKey``:

- ``CODEC_VERSIONS``: what the codec can encode and decode: kio's schemas (Kafka 4.x; old versions
  Kafka 4 removed, such as Produce v0-v2, are absent) plus the project-defined inter-broker
  messages for keys 4-7 (``kafkalite.protocol.messages``).
- ``FLEXIBLE_SINCE``: the first version whose messages are "flexible" (KIP-482: compact strings and
  arrays, tagged fields; request header v2 and response header v1). ``None``: never flexible.
  Taken from each schema's ``flexibleVersions``; a version above the codec's range of an API
  with flexible versions is flexible too (Kafka does the same when it parses the header of an
  ApiVersions request from a newer client).
- ``ADVERTISED_VERSIONS``: what ApiVersions tells clients, per key, when that key is enabled. The
  ranges are those of a Kafka 3.9 ZooKeeper-mode broker, clipped to the codec, and stopping
  below versions that need KRaft-only or unimplemented features:
  Fetch stops at v12 (v13+ address topics by topic id only), Produce at v11, ListOffsets at v9,
  Metadata at v12, OffsetCommit/OffsetFetch at v9 (v9: member epochs of KIP-848's consumer
  groups; v10 is KIP-848's topic-id form, not implemented),
  FindCoordinator at v4, InitProducerId at v4.
  These ranges work with librdkafka 2.x (confluent-kafka 2.16, kcat), kafka-python 3.0 (which
  infers "broker 3.x" from them) and aiokafka 0.14 (whose newest versions, e.g. Produce v7,
  Fetch v11, Metadata v5, fall inside them, and whose oldest needed, e.g. OffsetCommit v2, too).

The broker enables APIs as it implements them: ``supported_versions(enabled_keys)`` builds the
ApiVersions table for a set of keys. ``SUPPORTED_VERSIONS`` is the default table (every designed
key except the consumer-group APIs, which are enabled with the group coordinator).

``request_class`` / ``response_class`` return the message dataclass for a key and version.
"""

from __future__ import annotations

import enum
import functools
import importlib
from collections.abc import Iterable

from kio.index import load_request_schema, load_response_schema

from .errors import UnsupportedVersionError


class ApiKey(enum.IntEnum):
    """Kafka API keys (``org.apache.kafka.common.protocol.ApiKeys``)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


CODEC_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (0, 13),
    ApiKey.LEADER_AND_ISR: (4, 7),
    ApiKey.STOP_REPLICA: (2, 4),
    ApiKey.UPDATE_METADATA: (6, 7),
    ApiKey.CONTROLLED_SHUTDOWN: (3, 3),
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 6),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.WRITE_TXN_MARKERS: (1, 2),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.CREATE_DELEGATION_TOKEN: (1, 3),
    ApiKey.RENEW_DELEGATION_TOKEN: (1, 2),
    ApiKey.EXPIRE_DELEGATION_TOKEN: (1, 2),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: (1, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.VOTE: (0, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 1),
    ApiKey.END_QUORUM_EPOCH: (0, 1),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.ALTER_PARTITION: (2, 3),
    ApiKey.UPDATE_FEATURES: (0, 2),
    ApiKey.ENVELOPE: (0, 0),
    ApiKey.FETCH_SNAPSHOT: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.BROKER_REGISTRATION: (0, 4),
    ApiKey.BROKER_HEARTBEAT: (0, 2),
    ApiKey.UNREGISTER_BROKER: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.CONTROLLER_REGISTRATION: (0, 0),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: (0, 0),
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.ADD_RAFT_VOTER: (0, 1),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
    ApiKey.UPDATE_RAFT_VOTER: (0, 0),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
    ApiKey.STREAMS_GROUP_HEARTBEAT: (0, 0),
    ApiKey.STREAMS_GROUP_DESCRIBE: (0, 0),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}

FLEXIBLE_SINCE: dict[ApiKey, int | None] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 6,
    ApiKey.METADATA: 9,
    ApiKey.LEADER_AND_ISR: 4,
    ApiKey.STOP_REPLICA: 2,
    ApiKey.UPDATE_METADATA: 6,
    ApiKey.CONTROLLED_SHUTDOWN: 3,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 6,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 6,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.SYNC_GROUP: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 3,
    ApiKey.SASL_HANDSHAKE: None,
    ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 5,
    ApiKey.DELETE_TOPICS: 4,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.INIT_PRODUCER_ID: 2,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.DESCRIBE_ACLS: 2,
    ApiKey.CREATE_ACLS: 2,
    ApiKey.DELETE_ACLS: 2,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 2,
    ApiKey.DESCRIBE_LOG_DIRS: 2,
    ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.CREATE_PARTITIONS: 2,
    ApiKey.CREATE_DELEGATION_TOKEN: 2,
    ApiKey.RENEW_DELEGATION_TOKEN: 2,
    ApiKey.EXPIRE_DELEGATION_TOKEN: 2,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: 2,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.ELECT_LEADERS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.OFFSET_DELETE: None,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
    ApiKey.ALTER_CLIENT_QUOTAS: 1,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.VOTE: 0,
    ApiKey.BEGIN_QUORUM_EPOCH: 1,
    ApiKey.END_QUORUM_EPOCH: 1,
    ApiKey.DESCRIBE_QUORUM: 0,
    ApiKey.ALTER_PARTITION: 2,
    ApiKey.UPDATE_FEATURES: 0,
    ApiKey.ENVELOPE: 0,
    ApiKey.FETCH_SNAPSHOT: 0,
    ApiKey.DESCRIBE_CLUSTER: 0,
    ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.BROKER_REGISTRATION: 0,
    ApiKey.BROKER_HEARTBEAT: 0,
    ApiKey.UNREGISTER_BROKER: 0,
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.LIST_TRANSACTIONS: 0,
    ApiKey.ALLOCATE_PRODUCER_IDS: 0,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 0,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
    ApiKey.CONTROLLER_REGISTRATION: 0,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: 0,
    ApiKey.PUSH_TELEMETRY: 0,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: 0,
    ApiKey.LIST_CONFIG_RESOURCES: 0,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
    ApiKey.SHARE_GROUP_HEARTBEAT: 1,
    ApiKey.SHARE_GROUP_DESCRIBE: 1,
    ApiKey.SHARE_FETCH: 1,
    ApiKey.SHARE_ACKNOWLEDGE: 1,
    ApiKey.ADD_RAFT_VOTER: 0,
    ApiKey.REMOVE_RAFT_VOTER: 0,
    ApiKey.UPDATE_RAFT_VOTER: 0,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0,
    ApiKey.READ_SHARE_GROUP_STATE: 0,
    ApiKey.WRITE_SHARE_GROUP_STATE: 0,
    ApiKey.DELETE_SHARE_GROUP_STATE: 0,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 0,
    ApiKey.STREAMS_GROUP_HEARTBEAT: 0,
    ApiKey.STREAMS_GROUP_DESCRIBE: 0,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: 0,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: 0,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: 0,
}

ADVERTISED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    # data plane
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    # security
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    # inter-broker (controller -> broker, broker -> controller)
    ApiKey.LEADER_AND_ISR: (4, 7),
    ApiKey.STOP_REPLICA: (2, 4),
    ApiKey.UPDATE_METADATA: (6, 7),
    ApiKey.CONTROLLED_SHUTDOWN: (3, 3),
    # admin
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    # consumer groups
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # transactions: the versions librdkafka 2.x, aiokafka 0.14 and kafka-python 3.0 use
    # (v4+ of AddPartitionsToTxn and EndTxn are KIP-890's, not implemented)
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # share groups (KIP-932, Kafka 4.1's versions)
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 1),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 1),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 0),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}

DATA_KEYS: frozenset[ApiKey] = frozenset(
    {
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.API_VERSIONS,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        ApiKey.DELETE_RECORDS,
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    }
)
INTER_BROKER_KEYS: frozenset[ApiKey] = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
    }
)
ADMIN_KEYS: frozenset[ApiKey] = frozenset(
    {
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.ALTER_CONFIGS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.DESCRIBE_CLUSTER,
        ApiKey.ELECT_LEADERS,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ApiKey.DESCRIBE_LOG_DIRS,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        ApiKey.DESCRIBE_ACLS,
        ApiKey.CREATE_ACLS,
        ApiKey.DELETE_ACLS,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        ApiKey.ALTER_CLIENT_QUOTAS,
    }
)
GROUP_KEYS: frozenset[ApiKey] = frozenset(
    {
        ApiKey.FIND_COORDINATOR,
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.LIST_GROUPS,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
    }
)
DEFAULT_ENABLED_KEYS: frozenset[ApiKey] = DATA_KEYS | INTER_BROKER_KEYS | ADMIN_KEYS


def supported_versions(
    enabled_keys: Iterable[int],
    overrides: dict[int, tuple[int, int]] | None = None,
) -> dict[ApiKey, tuple[int, int]]:
    """The ApiVersions table for ``enabled_keys`` (ApiVersions itself is always included).

    ``overrides`` narrows a key's advertised range (e.g. to test a client against an older
    broker); it may not leave the codec's range. Raises ValueError for a key without an
    advertised range or an override outside the codec.
    """
    table: dict[ApiKey, tuple[int, int]] = {}
    for raw in {*enabled_keys, ApiKey.API_VERSIONS}:
        key = ApiKey(raw)
        if key not in ADVERTISED_VERSIONS:
            raise ValueError(f"{key.name} has no advertised version range")
        table[key] = ADVERTISED_VERSIONS[key]
    for raw, (low, high) in (overrides or {}).items():
        key = ApiKey(raw)
        codec_low, codec_high = CODEC_VERSIONS[key]
        if not codec_low <= low <= high <= codec_high:
            raise ValueError(
                f"{key.name} v{low}-v{high} is outside the codec's v{codec_low}-v{codec_high}"
            )
        table[key] = (low, high)
    return dict(sorted(table.items()))


SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = supported_versions(DEFAULT_ENABLED_KEYS)


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this (key, version) uses the flexible encoding (header v2 / response header v1)."""
    since = FLEXIBLE_SINCE.get(api_key)  # type: ignore[call-overload]
    return since is not None and api_version >= since


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header v2 (with tagged fields) for flexible versions, else v1."""
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header v1 for flexible versions, else v0. ApiVersions responses always use v0:
    a client must be able to read the response before it knows which versions the broker has
    (KIP-511)."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


_PROJECT_MESSAGES = {
    ApiKey.LEADER_AND_ISR: ("leader_and_isr", "LeaderAndIsr"),
    ApiKey.STOP_REPLICA: ("stop_replica", "StopReplica"),
    ApiKey.UPDATE_METADATA: ("update_metadata", "UpdateMetadata"),
    ApiKey.CONTROLLED_SHUTDOWN: ("controlled_shutdown", "ControlledShutdown"),
}


def _check_version(api_key: int, api_version: int) -> ApiKey:
    try:
        key = ApiKey(api_key)
    except ValueError:
        raise UnsupportedVersionError(f"unknown API key {api_key}") from None
    low, high = CODEC_VERSIONS[key]
    if not low <= api_version <= high:
        raise UnsupportedVersionError(
            f"{key.name} v{api_version} is not supported (v{low}-v{high})"
        )
    return key


@functools.cache
def _message_class(api_key: int, api_version: int, kind: str) -> type:
    key = _check_version(api_key, api_version)
    if key in _PROJECT_MESSAGES:
        package, stem = _PROJECT_MESSAGES[key]
        module = importlib.import_module(f"{__package__}.messages.{package}.v{api_version}.{kind}")
        return getattr(module, stem + kind.capitalize())
    if kind == "request":
        return load_request_schema(key, api_version)
    return load_response_schema(key, api_version)


def request_class(api_key: int, api_version: int) -> type:
    """The request dataclass for this key and version; UnsupportedVersionError if the codec
    has none."""
    return _message_class(api_key, api_version, "request")


def response_class(api_key: int, api_version: int) -> type:
    """The response dataclass for this key and version; UnsupportedVersionError if the codec
    has none."""
    return _message_class(api_key, api_version, "response")
