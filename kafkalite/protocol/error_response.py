"""The error response of any request: Kafka's ``AbstractRequest.getErrorResponse``.

When a request cannot be served as a whole (its body breaks the schema or a range, or its handler
fails unexpectedly), Kafka answers it with the API's own response in which every topic,
partition, group or resource the request named carries the error (``FetchRequest``,
``ProduceRequest``, ``OffsetCommitRequest``... each have a ``getErrorResponse``), plus the
top-level error code where the version has one. A client then sees an error for exactly what it
asked about, instead of a closed connection it would retry blindly.

``error_response(api_key, request, response_cls, error)`` builds that answer for any API from
one table, ``SOURCES``: which request array each response array mirrors (``"topics"`` answers
``"topics"``; a dotted source such as ``"topic_states.partition_states"`` flattens a nested
array, the way StopReplica answers one flat list of partitions; ``"a+b"`` answers the items of
both request arrays, the way AlterUserScramCredentials answers its deletions and upsertions).
An API whose response has no such array carries the error in its top-level ``error_code``
(DescribeLogDirs v0-v2 has neither and is answered with no result, as Kafka does): never an
empty list where the request named items (librdkafka aborts on a refused CreateAcls answered
with no result). An item's error goes in ``error_code`` (AddPartitionsToTxn v0-v3:
``partition_error_code``). Key fields (topic name, partition index, group id, resource name,
...) are copied from the request item of the same or
an aliased name; a request item that is a plain value (a group id in DescribeGroups, a partition
index in OffsetFetch) fills the response item's first key field. Other fields get Kafka's
"unknown" values (-1 for offsets, epochs, ids and ports; Int.MinValue for authorized operations;
empty otherwise). A null where the request should have had an array answers nothing for it;
a null key where the response cannot carry one gets the empty value.

Pure: no I/O, no handler state; works on kio request classes and on any object with the same
attribute names (the hand-written Produce decoder's).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import uuid
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .api import ApiKey
from .errors import ErrorCode

SOURCES: dict[int, dict[str, tuple[str, ...]]] = {
    ApiKey.PRODUCE: {
        "responses": ("topic_data",),
        "responses.partition_responses": ("partition_data",),
    },
    ApiKey.FETCH: {"responses": ("topics",), "responses.partitions": ("partitions",)},
    ApiKey.LIST_OFFSETS: {"topics": ("topics",), "topics.partitions": ("partitions",)},
    ApiKey.METADATA: {"topics": ("topics",)},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {"topics": ("topics",), "topics.partitions": ("partitions",)},
    ApiKey.DELETE_RECORDS: {"topics": ("topics",), "topics.partitions": ("partitions",)},
    ApiKey.LEADER_AND_ISR: {
        "topics": ("topic_states",),
        "topics.partition_errors": ("partition_states",),
        "partition_errors": ("topic_states.partition_states", "ungrouped_partition_states"),
    },
    ApiKey.STOP_REPLICA: {
        "partition_errors": (
            "topic_states.partition_states",
            "topics.partition_indexes",
            "ungrouped_partitions",
        )
    },
    ApiKey.CREATE_TOPICS: {"topics": ("topics",)},
    ApiKey.DELETE_TOPICS: {"responses": ("topics", "topic_names")},
    ApiKey.CREATE_PARTITIONS: {"results": ("topics",)},
    ApiKey.DESCRIBE_CONFIGS: {"results": ("resources",)},
    ApiKey.ALTER_CONFIGS: {"responses": ("resources",)},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {"responses": ("resources",)},
    ApiKey.ELECT_LEADERS: {
        "replica_election_results": ("topic_partitions",),
        "replica_election_results.partition_result": ("partitions",),
    },
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: {
        "responses": ("topics",),
        "responses.partitions": ("partitions",),
    },
    ApiKey.FIND_COORDINATOR: {"coordinators": ("coordinator_keys",)},
    ApiKey.LEAVE_GROUP: {"members": ("members",)},
    ApiKey.OFFSET_COMMIT: {"topics": ("topics",), "topics.partitions": ("partitions",)},
    ApiKey.OFFSET_FETCH: {
        "groups": ("groups",),
        "groups.topics": ("topics",),
        "groups.topics.partitions": ("partition_indexes",),
        "topics": ("topics",),
        "topics.partitions": ("partition_indexes",),
    },
    ApiKey.DESCRIBE_GROUPS: {"groups": ("groups",)},
    ApiKey.DELETE_GROUPS: {"results": ("groups_names",)},
    ApiKey.CONSUMER_GROUP_DESCRIBE: {"groups": ("group_ids",)},
    ApiKey.OFFSET_DELETE: {"topics": ("topics",), "topics.partitions": ("partitions",)},
    ApiKey.ADD_PARTITIONS_TO_TXN: {
        "results_by_topic_v3_and_below": ("v3_and_below_topics",),
        "results_by_topic_v3_and_below.results_by_partition": ("partitions",),
    },
    ApiKey.WRITE_TXN_MARKERS: {
        "markers": ("markers",),
        "markers.topics": ("topics",),
        "markers.topics.partitions": ("partition_indexes",),
    },
    ApiKey.TXN_OFFSET_COMMIT: {"topics": ("topics",), "topics.partitions": ("partitions",)},
    ApiKey.CREATE_ACLS: {"results": ("creations",)},
    ApiKey.DELETE_ACLS: {"filter_results": ("filters",)},
    ApiKey.ALTER_CLIENT_QUOTAS: {"entries": ("entries",), "entries.entity": ("entity",)},
    ApiKey.DESCRIBE_PRODUCERS: {
        "topics": ("topics",),
        "topics.partitions": ("partition_indexes",),
    },
    ApiKey.DESCRIBE_TRANSACTIONS: {"transaction_states": ("transactional_ids",)},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: {"results": ("deletions+upsertions",)},
    # share groups
    ApiKey.SHARE_GROUP_DESCRIBE: {"groups": ("group_ids",)},
    **{
        key: {"results": ("topics",), "results.partitions": ("partitions",)}
        for key in (
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            ApiKey.DELETE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        )
    },
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: {
        "groups": ("groups",),
        "groups.topics": ("topics",),
        "groups.topics.partitions": ("partitions",),
    },
}
"""Response array path -> request array paths (the first the request has is used)."""

ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("topic", "topic_name"),
    "topic": ("name", "topic_name"),
    "topic_name": ("name", "topic"),
    "partition_index": ("partition", "index", "partition_id"),
    "partition": ("partition_index", "index"),
    "index": ("partition_index", "partition"),
    "partition_id": ("partition_index", "partition"),
    "user": ("name",),
}
"""Where a response key field is found in a request item that names it differently."""

KEY_FIELDS = frozenset(
    {
        *ALIASES,
        "topic_id",
        "group_id",
        "member_id",
        "group_instance_id",
        "resource_type",
        "resource_name",
        "key",
        "producer_id",
        "transactional_id",
        "entity_type",
        "entity_name",
    }
)
"""The fields an error response copies from the request (what each answer is about)."""

MINUS_ONE = frozenset(
    {
        "base_offset",
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "preferred_read_replica",
        "timestamp",
        "offset",
        "leader_epoch",
        "end_offset",
        "low_watermark",
        "producer_id",
        "producer_epoch",
        "node_id",
        "port",
        "leader_id",
        "controller_id",
        "generation_id",
        "num_partitions",
        "replication_factor",
        "committed_offset",
        "committed_leader_epoch",
    }
)
"""Fields Kafka's error responses fill with -1 (unknown offset, epoch, id, ...)."""

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

_ERROR_FIELDS = ("error_code", "error_message")
_ERROR_CODE_FIELDS = frozenset({"error_code", "partition_error_code"})
"""Where an item carries its error (AddPartitionsToTxn v0-v3 names it partition_error_code)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: str  # "entities" | "primitives" | "entity" | "plain"
    entity: type | None
    optional: bool
    kafka_type: str


@functools.cache
def _fields(cls: type) -> tuple[_Field, ...]:
    out = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        entity = None
        if isinstance(kind, EntityTupleField):
            name, entity = "entities", kind.type_
        elif isinstance(kind, EntityField):
            name, entity = "entity", kind.type_
        elif isinstance(kind, PrimitiveTupleField):
            name = "primitives"
        elif isinstance(kind, PrimitiveField):
            name = "plain"
        else:  # pragma: no cover - kio has no other kinds
            raise NotImplementedError(f.name)
        tagged = get_field_tag(f) is not None
        out.append(
            _Field(
                f.name,
                name,
                entity,
                is_optional(f) and not tagged,
                f.metadata.get("kafka_type", ""),
            )
        )
    return tuple(out)


def _has_default(cls: type, name: str) -> bool:
    f = cls.__dataclass_fields__[name]
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _empty(field: _Field) -> Any:
    """The value a field takes when the request says nothing about it."""
    if field.optional and field.kind != "primitives":
        if field.kind == "plain" and field.kafka_type in ("datetime_i64",):
            return None
        if field.name in MINUS_ONE:
            return -1
        return None
    if field.kind in ("entities", "primitives"):
        return ()
    if field.kind == "entity":
        return _build(field.entity, {}, ErrorCode.NONE, None, {}, "")  # type: ignore[arg-type]
    if field.name in MINUS_ONE:
        return -1
    if field.name.endswith("authorized_operations"):
        return AUTHORIZED_OPERATIONS_OMITTED
    kafka_type = field.kafka_type
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "error_code":
        return ErrorCode.NONE
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    if kafka_type == "float64":
        return 0.0
    if kafka_type == "uuid":
        return None
    return 0


def _compatible(field: _Field, value: Any) -> bool:
    """Whether a request value can be written into this response field as it is."""
    if value is None:
        return field.optional or field.kafka_type == "uuid"
    kafka_type = field.kafka_type
    if kafka_type == "string":
        return isinstance(value, str)
    if kafka_type in ("bytes", "records"):
        return isinstance(value, bytes | bytearray | memoryview)
    if kafka_type == "bool":
        return isinstance(value, bool)
    if kafka_type.startswith(("int", "uint")):
        return isinstance(value, int) and not isinstance(value, bool)
    if kafka_type == "uuid":
        return not isinstance(value, str | int | bytes)
    return False


def _items(source: Any, path: str) -> list[tuple[Any, list[Any]]]:
    """The items at ``path`` below ``source`` (dotted: flattened), each with its ancestors
    (nearest first) for key fields it does not carry itself."""
    level: list[tuple[Any, list[Any]]] = [(source, [])]
    for part in path.split("."):
        nxt: list[tuple[Any, list[Any]]] = []
        for item, parents in level:
            values = getattr(item, part, None)
            if values is None or isinstance(values, str | bytes):
                continue
            ancestors = [item, *parents] if item is not source else parents
            nxt.extend((value, ancestors) for value in values)
        level = nxt
    return level


def _source_path(source: Any, candidates: tuple[str, ...]) -> str | None:
    for path in candidates:
        head = path.split(".", 1)[0]
        if all(hasattr(source, h) for h in head.split("+")):
            return path
    return None


def _joined_items(source: Any, path: str) -> list[tuple[Any, list[Any]]]:
    """``_items`` of each ``+``-joined path, one after the other."""
    return [found for part in path.split("+") for found in _items(source, part)]


def _key_value(field: _Field, item: Any, parents: list[Any]) -> tuple[bool, Any]:
    holders = parents if isinstance(item, str | int | bytes | uuid.UUID) else (item, *parents)
    for holder in holders:
        for name in (field.name, *ALIASES.get(field.name, ())):
            if hasattr(holder, name) and not _is_container(getattr(holder, name)):
                return True, getattr(holder, name)
    return False, None


def _is_container(value: Any) -> bool:
    return isinstance(value, tuple | list) or dataclasses.is_dataclass(value)


def _build(
    cls: type,
    source: Any,
    error: ErrorCode,
    message: str | None,
    sources: dict[str, tuple[str, ...]],
    prefix: str,
    parents: list[Any] | None = None,
) -> Any:
    fields = _fields(cls)
    plain_item = isinstance(source, str | int | bytes | uuid.UUID)
    # A plain request item (a group id, a partition index) is the first key field it fits.
    plain_key = None
    if plain_item:
        plain_key = next(
            (f.name for f in fields if f.name in KEY_FIELDS and _compatible(f, source)), None
        )
    values: dict[str, Any] = {}
    for field in fields:
        if field.name in _ERROR_CODE_FIELDS:
            values[field.name] = error
            continue
        if field.name == "error_message":
            values[field.name] = message if field.optional else (message or "")
            continue
        path = f"{prefix}{field.name}"
        if field.kind == "entities" and path in sources and not plain_item:
            chosen = _source_path(source, sources[path])
            if chosen is not None:
                values[field.name] = tuple(
                    _build(field.entity, item, error, message, sources, path + ".", ancestors)  # type: ignore[arg-type]
                    for item, ancestors in _joined_items(source, chosen)
                )
                continue
        if field.kind == "plain" and prefix and field.name in KEY_FIELDS:
            if field.name == plain_key:
                values[field.name] = source
                continue
            found, value = _key_value(field, source, parents or [])
            if found and _compatible(field, value):
                values[field.name] = value
                continue
        if _has_default(cls, field.name) and field.name not in MINUS_ONE:
            if not field.name.endswith("authorized_operations"):
                continue
        values[field.name] = _empty(field)
    return cls(**values)


def error_response(
    api_key: int,
    request: Any,
    response_cls: type,
    error: ErrorCode,
    message: str | None = None,
) -> Any:
    """``response_cls`` answering ``request`` with ``error`` everywhere it can carry one (see
    the module docstring). ``message`` goes where the response has an error message field
    (Kafka's default message for the code when None)."""
    if message is None and error != ErrorCode.NONE:
        message = error.message
    return _build(response_cls, request, error, message, SOURCES.get(int(api_key), {}), "")


def error_codes_in(response: Any) -> list[int]:
    """Every error code in a response, depth first (tests and logs)."""
    out: list[int] = []
    if not dataclasses.is_dataclass(response):
        return out
    for field in dataclasses.fields(response):
        value = getattr(response, field.name)
        if field.name == "error_code":
            out.append(int(value))
        elif isinstance(value, tuple):
            for item in value:
                out += error_codes_in(item)
        elif dataclasses.is_dataclass(value):
            out += error_codes_in(value)
    return out
