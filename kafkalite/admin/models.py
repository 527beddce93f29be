"""The admin API's request and response bodies, declared once as pydantic models.

Every route in routes/ names its body, query and answer models (`routing.route`); the route
wrapper validates requests with them (strictly: a JSON number is not a string, `"3"` is not an
integer) and checks every answer against its model before it is sent, and openapi.py builds the
OpenAPI document from their JSON schemas. What the document says is therefore what the server
enforces and what it answers; a field added to an answer without its model is a 500 in the tests,
not a silent drift.

Field names are the snake_case ones the API has always answered. Topic configs keep Kafka's
dotted names (`retention.ms`) as aliases of generated fields, one per known config, each with
the form of value Kafka's validation accepts (storage/config.py's own tables).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    create_model,
    field_validator,
)

from kafkalite.schema_registry.models import Level as RegistryLevel
from kafkalite.schema_registry.models import SchemaType

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _integral(value: Any) -> Any:
    """JSON Schema's integer: 3.0 is one (a float with no fraction); "3" and true are not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def json_int(**bounds: Any) -> Any:
    """An integer field of a JSON body within ``bounds`` (the bounds first: pydantic states
    them in the schema only when they come before the validator)."""
    return Annotated[int, Field(**bounds), BeforeValidator(_integral)]


Int32 = json_int(ge=INT32_MIN, le=INT32_MAX)
Int64 = json_int(ge=INT64_MIN, le=INT64_MAX)
NonNegInt32 = json_int(ge=0, le=INT32_MAX)
NonNegInt64 = json_int(ge=0, le=INT64_MAX)
BrokerId = Int32

# JSON Schema patterns are searched, not matched, and '$' also matches before a final newline:
# END is an end anchor with no such exception (a topic named "t\n" is illegal).
END = r"(?![\s\S])"
TOPIC_NAME_PATTERN = rf"^(?!\.\.?{END})[a-zA-Z0-9._-]{{1,249}}{END}"
TopicName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=249,
        pattern=TOPIC_NAME_PATTERN,
        description="Kafka's legal topic names: 1 to 249 of [a-zA-Z0-9._-], not '.' or '..'",
    ),
]


class Body(BaseModel):
    """A request body: strict types; fields the API does not know are ignored."""

    model_config = ConfigDict(strict=True, regex_engine="python-re", extra="ignore")


class Answer(BaseModel):
    """A response body: exactly the declared fields (a handler answering more is a bug)."""

    model_config = ConfigDict(extra="forbid", regex_engine="python-re")


class Query(BaseModel):
    """Query parameters: strings converted (an integer parameter must be a decimal integer)."""

    model_config = ConfigDict(extra="ignore", regex_engine="python-re")


# ---------------------------------------------------------------------- topic configs


def integer_pattern(low: int, high: int) -> str:
    """A regular expression matching exactly the decimal integers from ``low`` to ``high``
    (``low`` >= -1), without sign or leading zeros, anchored at both ends."""

    def same_length(a: str, b: str) -> list[str]:
        # the numbers from a to b, both with len(a) digits
        if not a:
            return [""]
        rest = len(a) - 1
        if a[1:] == "0" * rest and b[1:] == "9" * rest:
            first = a[0] if a[0] == b[0] else f"[{a[0]}-{b[0]}]"
            return [first + ("[0-9]" * rest if rest < 3 else f"[0-9]{{{rest}}}")]
        if a[0] == b[0]:
            return [a[0] + tail for tail in same_length(a[1:], b[1:])]
        out = [a[0] + tail for tail in same_length(a[1:], "9" * rest)]
        if int(a[0]) + 1 <= int(b[0]) - 1:
            out += same_length(str(int(a[0]) + 1) + "0" * rest, str(int(b[0]) - 1) + "9" * rest)
        out += [b[0] + tail for tail in same_length("0" * rest, b[1:])]
        return out

    alternatives = ["-1"] if low < 0 else []
    low = max(low, 0)
    for digits in range(len(str(low)), len(str(high)) + 1):
        a = max(low, 10 ** (digits - 1) if digits > 1 else 0)
        b = min(high, 10**digits - 1)
        if a <= b:
            alternatives += same_length(str(a), str(b))
    return f"^({'|'.join(alternatives)}){END}"


def _config_value_forms() -> dict[str, dict[str, Any]]:
    """Topic config name -> the form of the values Kafka's validation accepts for it, as Field
    arguments (`pattern` + description, or the `enum` of a Literal). Read from storage's own
    validation tables (types, minimums, INT or LONG range), not a copy of them, plus Kafka 3.9's
    deprecated configs the Kafka API accepts."""
    from kafkalite.storage.config import (
        _INT_FIELDS,
        _METADATA_VERSION,
        _MINIMUMS,
        DEPRECATED_TOPIC_CONFIGS,
        INT_MAX,
        LONG_MAX,
        SUBJECT_NAME_STRATEGIES,
        TOPIC_CONFIG_FIELDS,
    )

    special: dict[str, dict[str, Any]] = {
        "unclean_leader_election_enable": {"enum": ["true", "false"]},
        "preallocate": {"enum": ["true", "false"]},
        "min_cleanable_dirty_ratio": {
            "pattern": rf"^(0(\.[0-9]*)?|1(\.0*)?|\.[0-9]+){END}",
            "description": "a decimal number from 0 to 1",
        },
        "message_timestamp_type": {"enum": ["CreateTime", "LogAppendTime"]},
        "cleanup_policy": {"enum": ["delete", "compact", "compact,delete", "delete,compact"]},
        "compression_type": {"enum": ["uncompressed", "gzip", "snappy", "lz4", "zstd", "producer"]},
        "confluent_key_schema_validation": {"enum": ["true", "false"]},
        "confluent_value_schema_validation": {"enum": ["true", "false"]},
        "confluent_key_subject_name_strategy": {"enum": list(SUBJECT_NAME_STRATEGIES)},
        "confluent_value_subject_name_strategy": {"enum": list(SUBJECT_NAME_STRATEGIES)},
    }
    out: dict[str, dict[str, Any]] = {}
    for name, field in TOPIC_CONFIG_FIELDS.items():
        if field in special:
            out[name] = special[field]
            continue
        low = _MINIMUMS.get(field, 0)
        high = INT_MAX if field in _INT_FIELDS else LONG_MAX
        out[name] = {
            "pattern": integer_pattern(low, high),
            "description": f"a decimal integer from {low} to {high}",
        }
    assert set(DEPRECATED_TOPIC_CONFIGS) == {
        "message.format.version",
        "message.downconversion.enable",
    }
    out["message.format.version"] = {
        "pattern": f"^{_METADATA_VERSION.pattern}{END}",
        "description": "deprecated (accepted and ignored, as Kafka 3.9): a Kafka version",
    }
    out["message.downconversion.enable"] = {
        "enum": ["true", "false"],
        "description": "deprecated (accepted and ignored, as Kafka 3.9)",
    }
    return out


CONFIG_VALUE_FORMS = _config_value_forms()
"""Topic config name -> the form of its value in a request."""


def _config_model(name: str, *, removable: bool, doc: str) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for config, form in sorted(CONFIG_VALUE_FORMS.items()):
        if "enum" in form:
            kind: Any = Literal[tuple(form["enum"])]  # type: ignore[valid-type]
            extra = {k: v for k, v in form.items() if k == "description"}
        else:
            kind = Annotated[str, Field(pattern=form["pattern"])]
            extra = {"description": form["description"]}
        if removable:
            kind = kind | None
        fields[re.sub(r"\W", "_", config)] = (kind, Field(default=None, alias=config, **extra))
    return create_model(  # type: ignore[call-overload]
        name,
        __config__=ConfigDict(
            strict=True,
            regex_engine="python-re",
            extra="forbid",
            json_schema_extra=_no_defaults,
        ),
        __doc__=doc,
        **fields,
    )


def _no_defaults(schema: dict[str, Any]) -> None:
    """An absent config is not a null one: the schema states no default."""
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)


ConfigValues = _config_model(
    "ConfigValues",
    removable=False,
    doc="Topic config overrides: known config names only, each value a string in its form.",
)
ConfigChanges = _config_model(
    "ConfigChanges",
    removable=True,
    doc="Config name -> new value (a string in its form); null removes the override.",
)


def configs_of(model: BaseModel | None) -> dict[str, str | None]:
    """The configs a request named, by Kafka name (None: remove the override)."""
    if model is None:
        return {}
    return model.model_dump(by_alias=True, exclude_unset=True)


Configs = dict[str, str]
"""Topic configs as answered (whatever Kafka's own validation let through)."""


# ---------------------------------------------------------------------- requests


class NewTopic(Body):
    """A topic to create. Omitted (or null) partitions and replication factor take the broker's
    num.partitions and default.replication.factor."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "name": "orders",
                "partitions": 3,
                "replication_factor": 1,
                "configs": {"retention.ms": "86400000"},
            }
        }
    )

    name: TopicName
    partitions: json_int(ge=1, le=100_000) | None = None
    replication_factor: (
        Annotated[
            int, Field(ge=1, le=32767, description="at most the number of registered brokers")
        ]
        | None
    ) = None
    configs: ConfigValues | None = None  # type: ignore[valid-type]


class ConfigChange(Body):
    """Set (a string) or remove (null) topic config overrides."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {"configs": {"retention.ms": "3600000", "cleanup.policy": None}}
        }
    )

    configs: ConfigChanges  # type: ignore[valid-type]


class PartitionCount(Body):
    """The new total number of partitions: partitions may only be added, so it must be larger
    than the topic's current count (409 INVALID_PARTITIONS otherwise)."""

    partitions: json_int(ge=1, le=100_000)


class TopicPartitionRef(Body):
    topic: TopicName
    partition: NonNegInt32


class OffsetTarget(Body):
    topic: TopicName
    partition: NonNegInt32
    offset: NonNegInt64


TopicList = Annotated[list[TopicName], Field(min_length=1)]


class ResetToEnd(Body):
    to: Literal["earliest", "latest"]
    topics: TopicList | None = None
    dry_run: bool = False


class ResetToTimestamp(Body):
    to: Literal["timestamp"]
    timestamp: NonNegInt64
    topics: TopicList | None = None
    dry_run: bool = False


class ResetToOffsets(Body):
    to: Literal["explicit"]
    offsets: Annotated[list[OffsetTarget], Field(min_length=1)]
    dry_run: bool = False


class OffsetReset(RootModel):
    """earliest/latest/timestamp apply to `topics` (default: the topics the group committed,
    or a share group's topics; 404 when there are none); explicit takes `offsets`. Refused
    (409 NON_EMPTY_GROUP) while the group has members. `dry_run` answers the new positions
    without committing them. A share group's offsets are its share-partitions' start offsets
    (AlterShareGroupOffsets)."""

    model_config = ConfigDict(strict=True, regex_engine="python-re")

    root: Annotated[ResetToEnd | ResetToTimestamp | ResetToOffsets, Field(discriminator="to")]


class ReassignEntry(Body):
    topic: TopicName
    partition: NonNegInt32
    replicas: Annotated[
        list[BrokerId],
        Field(
            min_length=1,
            description="registered brokers (404 otherwise), each once",
            json_schema_extra={"uniqueItems": True},
        ),
    ]

    @field_validator("replicas")
    @classmethod
    def _once_each(cls, replicas: list[int]) -> list[int]:
        if len(set(replicas)) != len(replicas):
            raise ValueError("lists a broker twice")
        return replicas


class Reassignment(Body):
    partitions: Annotated[list[ReassignEntry], Field(min_length=1)]


class Election(Body):
    """partitions omitted or null: every partition."""

    election_type: Literal["preferred", "unclean"] = "preferred"
    partitions: Annotated[list[TopicPartitionRef], Field(min_length=1)] | None = None


# ---------------------------------------------------------------------- query parameters


class TopicsQuery(Query):
    """Server-side filtering and paging of the topic list (all topics when none is given; the
    total before paging is in the X-Total-Count header)."""

    search: Annotated[
        str | None, Field(max_length=249, description="a substring of the topic's name")
    ] = None
    internal: Annotated[
        bool, Field(description="include internal topics (names starting with __)")
    ] = True
    offset: Annotated[int, Field(ge=0, le=INT32_MAX, description="topics to skip")] = 0
    limit: Annotated[int | None, Field(ge=1, le=100_000, description="at most this many")] = None


class RecordsQuery(Query):
    """Where to start reading: `offset`, else the first record at or after `timestamp`
    (milliseconds since the epoch), else the last `limit` records before the high watermark."""

    partition: Annotated[
        int | None, Field(ge=0, le=INT32_MAX, description="one partition; absent: all of them")
    ] = None
    offset: Annotated[
        int | None, Field(ge=0, le=INT64_MAX, description="from this offset (of each partition)")
    ] = None
    timestamp: Annotated[
        int | None, Field(ge=0, le=INT64_MAX, description="from the first record at this time (ms)")
    ] = None
    limit: Annotated[int, Field(ge=1, le=500)] = 50
    filter: Annotated[
        str | None,
        Field(
            max_length=200,
            description="only records whose key, value, or a header's key or value contains "
            "this text (case-insensitive)",
        ),
    ] = None


class HistoryQuery(Query):
    topic: Annotated[str | None, Field(max_length=249, description="only this topic's series")] = (
        None
    )


# ---------------------------------------------------------------------- answers


class Error(Answer):
    error: str = Field(description="Kafka error name or HTTP-level code")
    message: str
    field: str | None = Field(default=None, description="the request field at fault")


class Health(Answer):
    status: Literal["ok"]
    broker_id: BrokerId


class Ready(Answer):
    ready: bool
    checks: dict[str, bool]


class Endpoint(Answer):
    listener: str
    host: str
    port: Int32
    security_protocol: str


class Broker(Answer):
    id: BrokerId
    host: str | None
    port: int | None
    rack: str | None
    endpoints: list[Endpoint]
    broker_epoch: Int64
    is_controller: bool
    offline_log_dirs: list[str] | None = Field(
        description="Log directories offline after a failure; null for a broker other than "
        "the one answering (each broker knows only its own)"
    )
    offline_partitions: Int32 | None = Field(
        description="Hosted partitions offline because of storage; null as above"
    )


class ControllerRef(Answer):
    broker_id: BrokerId
    epoch: Int32


class Cluster(Answer):
    cluster_id: str
    controller: ControllerRef
    brokers: list[Broker]
    this_broker: BrokerId


class TopicSummary(Answer):
    name: str
    topic_id: str | None
    partitions: Int32
    replication_factor: Int32
    internal: bool
    marked_for_deletion: bool
    under_replicated: Int32 = Field(
        description="partitions whose ISR is smaller than their replicas (this broker's metadata)"
    )
    offline: Int32 = Field(description="partitions without a live leader")
    size_bytes: Int64 | None = Field(
        description="bytes on this broker's disks (null: no replica here)"
    )


class CreatedTopic(Answer):
    name: str
    topic_id: str
    partitions: Int32
    replication_factor: Int32
    configs: Configs


class Partition(Answer):
    """Offsets and size are null when the partition has no replica on this broker."""

    partition: Int32
    leader: BrokerId
    replicas: list[BrokerId]
    isr: list[BrokerId]
    leader_epoch: Int32
    log_start_offset: Int64 | None
    high_watermark: Int64 | None
    log_end_offset: Int64 | None
    size_bytes: Int64 | None
    adding_replicas: list[BrokerId]
    removing_replicas: list[BrokerId]


class Topic(Answer):
    name: str
    topic_id: str | None
    internal: bool
    marked_for_deletion: bool
    configs: Configs
    partitions: list[Partition]
    message_count: Int64 | None = Field(
        description="the sum of high watermark - log start offset of every partition (null "
        "when a partition's leader cannot say)"
    )
    message_count_is_estimate: bool = Field(
        description="the topic is compacted: offsets removed by compaction are still counted"
    )


class EffectiveConfig(Answer):
    name: str
    value: str | None = Field(description="null for a secret")
    source: str = Field(
        description="Kafka's config source: DYNAMIC_TOPIC_CONFIG (an override of this topic), "
        "STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ..."
    )
    read_only: bool
    sensitive: bool


class EffectiveConfigs(Answer):
    name: str
    configs: list[EffectiveConfig]


class TopicGroup(Answer):
    group_id: str
    state: str
    members: Int32 = Field(description="members with partitions of the topic assigned")
    partitions: Int32 = Field(description="partitions of the topic committed or assigned")
    lag: Int64 = Field(description="the group's lag on this topic")


class TopicConfigs(Answer):
    name: str
    configs: Configs


class NewPartition(Answer):
    partition: Int32
    replicas: list[BrokerId]


class AddedPartitions(Answer):
    name: str
    partitions: Int32
    new_partitions: list[NewPartition]


class DeletedTopic(Answer):
    """200: the topic is gone; 202: marked for deletion, not gone within the wait (a replica is
    offline, or deletion is slow)."""

    name: str
    deleted: bool
    marked_for_deletion: bool


class GroupsQuery(Query):
    """GET /groups: with `lag` (the default) each group is described by its coordinator for
    its members, topics and total lag."""

    lag: bool = True
    type: Literal["classic", "consumer", "share"] | None = Field(
        None, description="only groups of this type (ListGroups v5's types filter)"
    )


class GroupSummary(Answer):
    group_id: str
    group_type: Literal["classic", "consumer", "share"] = Field(
        description="classic (JoinGroup), consumer (KIP-848) or share (KIP-932)"
    )
    protocol_type: str
    state: str
    coordinator: BrokerId = Field(description="the broker coordinating the group")
    members: Int32 | None = Field(description="null when not asked (lag=false) or not described")
    topics: list[str] | None = Field(description="topics committed or assigned")
    total_lag: Int64 | None = Field(
        description="sum of the lag of every partition committed or assigned"
    )


class MemberAssignment(Answer):
    topic: str
    partitions: list[Int32]


class GroupMember(Answer):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[MemberAssignment] = Field(
        description="the partitions it owns (a consumer or share group: its current assignment)"
    )
    member_epoch: Int32 | None = Field(
        None, description="consumer and share groups: the member's epoch"
    )
    subscribed_topics: list[str] | None = Field(
        None, description="consumer and share groups: the topics it subscribes to"
    )
    subscribed_topic_regex: str | None = Field(
        None, description="consumer groups: its regex subscription, if any"
    )
    target_assignment: list[MemberAssignment] | None = Field(
        None, description="consumer groups: the assignment it is reconciling towards"
    )


class InFlightRange(Answer):
    """Consecutive offsets of a share-partition's window alike in state, delivery count, owner
    and lock expiry."""

    first_offset: Int64
    last_offset: Int64
    state: str = Field(
        description="AVAILABLE, ACQUIRED (held by member_id until lock_expires_ms), "
        "ACKNOWLEDGED or ARCHIVED (rejected, or past the delivery-count limit)"
    )
    delivery_count: Int32 = Field(description="how many times its records were acquired")
    member_id: str | None = Field(description="ACQUIRED: the member holding them")
    lock_expires_ms: Int64 | None = Field(
        description="ACQUIRED: when the acquisition lock expires (ms since the epoch); the "
        "records go back to AVAILABLE (or ARCHIVED at the delivery-count limit) then"
    )


class ShareGroupOffset(Answer):
    """A share-partition of a share group: its start offset (DescribeShareGroupOffsets) and its
    tracked window of in-flight records."""

    topic: str
    partition: Int32
    start_offset: Int64 | None = Field(
        description="the first offset not yet acknowledged (of `view` when there is one); "
        "null when never read"
    )
    error: str | None = Field(description="Kafka's error code name when it could not be read")
    leader: BrokerId | None = Field(None, description="the partition's leader, when known")
    view: Literal["live", "persisted"] | None = Field(
        None,
        description="live: the leader's in-memory state (this broker leads the partition and "
        "has loaded it; acquisitions, owners and lock expiries are known); persisted: the "
        "share coordinator's state (ReadShareGroupState, LeaderEpoch -1), where an acquired "
        "record reads AVAILABLE; null when the state could not be read",
    )
    end_offset: Int64 | None = Field(
        None, description="one past the last offset of the tracked window"
    )
    in_flight: list[InFlightRange] | None = Field(
        None, description="the window [start_offset, end_offset) as ranges, by offset"
    )


class GroupOffset(Answer):
    """A partition the group committed or has assigned to a member."""

    topic: str
    partition: Int32
    committed_offset: Int64 | None = Field(description="null: assigned but never committed")
    log_start_offset: Int64 | None
    high_watermark: Int64 | None
    lag: Int64 | None = Field(
        description="high watermark - committed (or - log start when never committed)"
    )
    member_id: str | None = Field(description="the member it is assigned to")


class Group(Answer):
    group_id: str
    group_type: Literal["classic", "consumer", "share"]
    state: str
    protocol_type: str
    protocol: str = Field(description="classic: the protocol chosen; consumer, share: assignor")
    coordinator: BrokerId
    group_epoch: Int32 | None = Field(None, description="consumer and share groups")
    assignment_epoch: Int32 | None = Field(None, description="consumer and share groups")
    assignor: str | None = Field(None, description="consumer and share groups")
    members: list[GroupMember]
    offsets: list[GroupOffset] = Field(description="committed offsets and lag; [] for share")
    total_lag: Int64
    share_offsets: list[ShareGroupOffset] | None = Field(
        None,
        description="share groups: each share-partition's start offset and in-flight records",
    )


class DeletedGroup(Answer):
    group_id: str
    deleted: bool


class TransactionSummary(Answer):
    transactional_id: str
    producer_id: Int64
    state: str


class TransactionPartition(Answer):
    topic: str
    partition: Int32


class Transaction(Answer):
    transactional_id: str
    coordinator: BrokerId
    state: str
    producer_id: Int64
    producer_epoch: Int32
    timeout_ms: Int32
    start_time_ms: Int64
    last_update_time_ms: Int64
    partitions: list[TransactionPartition]


class TransactionAborted(Answer):
    transactional_id: str
    aborted: bool


class NewOffset(Answer):
    topic: str
    partition: Int32
    offset: Int64


class OffsetResetResult(Answer):
    group_id: str
    group_type: Literal["classic", "consumer", "share"] = Field(
        description="a share group's offsets are its share-partitions' start offsets "
        "(AlterShareGroupOffsets); the others' are committed offsets (OffsetCommit)"
    )
    dry_run: bool
    offsets: list[NewOffset]


class OffsetsDeleteQuery(Query):
    """DELETE /groups/{id}/offsets: the topics whose offsets go, every partition of each."""

    topic: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4000,  # the request line must fit the server's 8190 bytes
            pattern=r"^[a-zA-Z0-9._-]{1,249}(,[a-zA-Z0-9._-]{1,249})*$",
            description="topic names separated by commas (up to 4000 characters)",
        ),
    ]

    def topics(self) -> list[str]:
        return list(dict.fromkeys(self.topic.split(",")))


class DeletedOffsets(Answer):
    group_id: str
    group_type: Literal["classic", "consumer", "share"]
    topics: list[str] = Field(
        description="the topics whose offsets were deleted: a share group starts on them again "
        "at share.auto.offset.reset, a consumer group at auto.offset.reset"
    )


class PartitionReplicas(Answer):
    topic: str
    partition: Int32
    replicas: list[BrokerId]


class ReassignmentAccepted(Answer):
    partitions: list[PartitionReplicas]
    path: str


class OngoingReassignment(Answer):
    topic: str
    partition: Int32
    replicas: list[BrokerId]
    adding_replicas: list[BrokerId]
    removing_replicas: list[BrokerId]


class Reassignments(Answer):
    pending: list[PartitionReplicas]
    ongoing: list[OngoingReassignment]


class PartitionId(Answer):
    topic: str
    partition: Int32


class ElectionAccepted(Answer):
    election_type: Literal["preferred", "unclean"]
    partitions: list[PartitionId]
    path: str


class DecodedBytes(Answer):
    """Bytes shown as text: `json` (a JSON object or array), `utf8`, else `hex`; a record
    framed for the Schema Registry (magic byte 0, a 4-byte schema id) whose schema the registry
    of this broker holds: `avro`, `protobuf` or `json-schema`, its value as JSON text."""

    encoding: Literal["json", "utf8", "hex", "avro", "protobuf", "json-schema"]
    text: str
    size: Int64 = Field(description="bytes of the original")
    truncated: bool = Field(description="only the first 64 KiB are shown")
    schema_id: Int32 | None = Field(
        default=None, description="the Schema Registry id of a decoded framed record"
    )
    subject: str | None = Field(
        default=None,
        description="the subject the schema is registered under (the topic's own "
        "<topic>-key / <topic>-value first)",
    )


class RecordHeader(Answer):
    key: str
    value: DecodedBytes | None


class BrowsedRecord(Answer):
    partition: Int32
    offset: Int64
    timestamp: Int64
    timestamp_type: Literal["CreateTime", "LogAppendTime"]
    key: DecodedBytes | None
    value: DecodedBytes | None
    headers: list[RecordHeader]


class PartitionCursor(Answer):
    partition: Int32
    log_start_offset: Int64
    high_watermark: Int64
    start_offset: Int64 = Field(description="where reading started")
    next_offset: Int64 = Field(description="the offset to ask for the next page")
    scanned: Int64 = Field(description="records read (more than returned with a filter)")


class RecordsPage(Answer):
    """One partition's records by offset; all partitions' merged by timestamp (then partition
    and offset). Without `offset` or `timestamp` the last records, else the first ones from
    there."""

    topic: str
    partition: Int32 | None = Field(description="null: all partitions")
    log_start_offset: Int64 | None = Field(description="of `partition` (null: all)")
    high_watermark: Int64 | None
    start_offset: Int64 | None
    next_offset: Int64 | None
    partitions: list[PartitionCursor]
    records: list[BrowsedRecord]


class NewRecordHeader(Body):
    key: Annotated[str, Field(max_length=256)]
    value: Annotated[str | None, Field(max_length=4096)] = None


class NewRecord(Body):
    """A test record, produced as a producer with acks=all would (UTF-8 key, value, headers).
    The bounds keep any one field, even one past its bound, within the 1 MiB request limit."""

    key: Annotated[str | None, Field(max_length=4096)] = None
    value: Annotated[str | None, Field(max_length=65_536)] = None
    headers: Annotated[list[NewRecordHeader], Field(max_length=20)] = []
    partition: NonNegInt32 | None = Field(
        default=None,
        description="absent: by the key's murmur2 hash as Kafka's producers, "
        "or any partition without a key",
    )


class ProducedRecord(Answer):
    topic: str
    partition: Int32
    offset: Int64
    timestamp: Int64


class BrokerRates(Answer):
    time: float
    requests_per_sec: float
    bytes_in_per_sec: float
    bytes_out_per_sec: float
    produce_requests_per_sec: float
    fetch_bytes_per_sec: float
    messages_in_per_sec: float


class TopicRates(Answer):
    time: float
    messages_in_per_sec: float
    bytes_in_per_sec: float


class MetricsHistory(Answer):
    """Rates of this broker over the last minutes (memory only; lost on restart). Topics:
    the one asked for, else the busiest ones (by messages appended as leader here)."""

    interval_seconds: float
    window_seconds: float
    broker: list[BrokerRates]
    topics: dict[str, list[TopicRates]]


class Overview(Answer):
    """Counts for the console's first screen, from this broker's metadata (which every broker
    gets from the controller). under_min_isr uses each topic's min.insync.replicas where this
    broker hosts it, else the broker's default."""

    cluster_id: str
    controller_id: BrokerId
    brokers: Int32
    down_brokers: list[BrokerId] = Field(
        description="brokers named as replicas that are not registered (down or gone)"
    )
    topics: Int32 = Field(description="user topics")
    internal_topics: Int32
    partitions: Int32
    under_replicated: Int32
    offline: Int32
    under_min_isr: Int32
    groups: Int32 = Field(description="consumer groups of the cluster")


PartitionStateFilter = Literal["all", "under_replicated", "offline", "under_min_isr"]


class PartitionsQuery(Query):
    state: PartitionStateFilter = "all"
    broker: Annotated[
        int | None, Field(ge=INT32_MIN, le=INT32_MAX, description="partitions with a replica here")
    ] = None
    topic: Annotated[str | None, Field(max_length=249, description="a substring of the topic")] = (
        None
    )
    internal: bool = True
    offset: Annotated[int, Field(ge=0, le=INT32_MAX)] = 0
    limit: Annotated[int, Field(ge=1, le=10_000)] = 1000


class PartitionHealth(Answer):
    topic: str
    partition: Int32
    leader: BrokerId
    replicas: list[BrokerId]
    isr: list[BrokerId]
    under_replicated: bool
    offline: bool
    under_min_isr: bool


class LogDir(Answer):
    path: str
    offline: bool
    partitions: Int32
    size_bytes: Int64


class BrokerStorage(Answer):
    """This broker's log directories and settings (each broker answers for itself)."""

    broker_id: BrokerId
    log_dirs: list[LogDir]
    configs: dict[str, str | None]


# ---------------------------------------------------------------------- ACLs, users, quotas

AclResourceType = Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]
AclOperationName = Literal[
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
]
Principal = Annotated[
    str,
    Field(
        min_length=3,
        max_length=255,
        pattern=r"^[A-Za-z][A-Za-z0-9_]*:[^\x00-\x1f]+$",
        description="TYPE:name, e.g. User:alice",
    ),
]
AclName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f]+$")]
AclHost = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f]+$")]


class NewAcl(Body):
    """An ACL binding (Kafka's CreateAcls): the cluster's resource name is kafka-cluster."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"resource_type": {"const": "CLUSTER"}}},
            "then": {"properties": {"resource_name": {"const": "kafka-cluster"}}},
        }
    )

    resource_type: AclResourceType
    resource_name: AclName
    pattern_type: Literal["LITERAL", "PREFIXED"] = "LITERAL"
    principal: Principal
    host: AclHost = "*"
    operation: AclOperationName
    permission: Literal["ALLOW", "DENY"] = "ALLOW"


class AclQuery(Query):
    """The one binding DELETE /acls removes (every field matched exactly)."""

    resource_type: AclResourceType
    resource_name: AclName
    pattern_type: Literal["LITERAL", "PREFIXED"] = "LITERAL"
    principal: Principal
    host: AclHost = "*"
    operation: AclOperationName
    permission: Literal["ALLOW", "DENY"] = "ALLOW"


class Acl(Answer):
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


class DeletedAcls(Answer):
    deleted: list[Acl]


ScramMechanism = Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]
UserName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f]+$")]


class NewUser(Body):
    """A SCRAM credential (Kafka's AlterUserScramCredentials): set, or replaced if it exists."""

    name: UserName
    password: Annotated[str, Field(min_length=1, max_length=1024)]
    mechanism: ScramMechanism = "SCRAM-SHA-256"
    iterations: json_int(ge=4096, le=16384) = 4096  # type: ignore[valid-type]


class ScramCredential(Answer):
    mechanism: str
    iterations: Int32


class ScramUser(Answer):
    name: str
    credentials: list[ScramCredential]


class DeletedUser(Answer):
    name: str
    deleted: bool


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


QuotaKey = Literal["producer_byte_rate", "consumer_byte_rate", "request_percentage"]
QuotaEntityName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        pattern=r"^[^\x00-\x1f]+$",
        description="a user or client id; <default> for the default entity",
    ),
]


class QuotaChange(Body):
    """Set (a number) or remove (null) quotas of a user, a client id, or both (Kafka's
    AlterClientQuotas); <default> names the default user or client id."""

    model_config = ConfigDict(
        json_schema_extra={"anyOf": [{"required": ["user"]}, {"required": ["client_id"]}]}
    )

    # absent (never null): the schema states no default
    user: QuotaEntityName = Field(
        default=None, description="a user, or <default>", json_schema_extra=_no_default
    )
    client_id: QuotaEntityName = Field(
        default=None, description="a client id, or <default>", json_schema_extra=_no_default
    )
    values: Annotated[
        dict[QuotaKey, Annotated[float, Field(gt=0, le=1e15)] | None], Field(min_length=1)
    ]


class QuotaQuery(Query):
    """The entity DELETE /quotas removes every quota of."""

    user: QuotaEntityName | None = None
    client_id: QuotaEntityName | None = None


class Quota(Answer):
    user: str | None = Field(description="null: not part of the entity; <default>: the default")
    client_id: str | None
    values: dict[str, float]


# ---------------------------------------------------------------------- Schema Registry

# the registry's own names for these, so the console's API cannot drift from the registry's
CompatibilityLevel = RegistryLevel
SubjectName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        pattern=r"^[^/\x00-\x1f]+$",
        description="a Schema Registry subject (this API serves those without '/' or control "
        "characters)",
    ),
]
SchemaVersionNumber = Annotated[int, Field(ge=1, le=INT32_MAX)]


class SchemasQuery(Query):
    deleted: Annotated[bool, Field(description="include soft-deleted subjects and versions")] = (
        False
    )


class SubjectSummary(Answer):
    subject: str
    latest_version: Int32 = Field(description="the latest version shown (live, else deleted)")
    latest_id: Int32
    schema_type: SchemaType
    versions: Int32 = Field(description="versions shown")
    compatibility: CompatibilityLevel = Field(description="the level in effect for the subject")
    compatibility_is_subjects: bool = Field(
        description="the subject has a level of its own (else the global level applies)"
    )
    deleted: bool = Field(description="every version of the subject is soft-deleted")


class SchemaRegistryOverview(Answer):
    """The Schema Registry of the broker answering (its in-process view of `_schemas`)."""

    enabled: bool = Field(description="false: schema.registry.listeners is empty")
    url: str | None = Field(description="the registry's own REST API")
    compatibility: CompatibilityLevel | None = Field(description="the global level")
    mode: str | None
    subjects: list[SubjectSummary]


class SubjectVersionRef(Answer):
    version: Int32
    id: Int32
    deleted: bool


class SubjectDetail(Answer):
    subject: str
    compatibility: CompatibilityLevel
    subject_compatibility: CompatibilityLevel | None = Field(
        description="the subject's own level; null: the global level applies"
    )
    global_compatibility: CompatibilityLevel
    mode: str
    versions: list[SubjectVersionRef]


class SchemaReferenceOut(Answer):
    name: str
    subject: str
    version: Int32


class SchemaVersionDetail(Answer):
    subject: str
    version: Int32
    id: Int32
    schema_type: SchemaType
    schema_text: str = Field(description="the schema, pretty-printed (JSON indented)")
    references: list[SchemaReferenceOut]
    deleted: bool


class SchemaDiffQuery(Query):
    from_version: Annotated[SchemaVersionNumber, Field(alias="from")]
    to_version: Annotated[SchemaVersionNumber, Field(alias="to")]


class SchemaDiffLine(Answer):
    op: Literal["same", "added", "removed"]
    text: str


class SchemaDiff(Answer):
    subject: str
    from_version: Int32
    to_version: Int32
    lines: list[SchemaDiffLine] = Field(description="the pretty-printed texts, line by line")


class CompatibilityChange(Body):
    """The compatibility level to set; null removes the subject's own level (the global one
    then applies; the global level cannot be removed)."""

    compatibility: CompatibilityLevel | None


class GlobalCompatibilityChange(Body):
    """The registry's global compatibility level."""

    compatibility: CompatibilityLevel


class CompatibilitySetting(Answer):
    subject: str | None = Field(description="null: the global level")
    compatibility: CompatibilityLevel = Field(description="the level in effect now")


# ---------------------------------------------------------------------- dynamic broker configs

BrokerConfigSource = Literal[
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "UNKNOWN",
]


class ConfigSynonym(Answer):
    name: str
    value: str | None = Field(description="null for a secret")
    source: BrokerConfigSource


class BrokerConfigEntry(Answer):
    name: str
    value: str | None = Field(description="null for a secret (a password is never answered)")
    source: BrokerConfigSource
    read_only: bool = Field(description="false: the setting can be changed dynamically")
    sensitive: bool
    synonyms: list[ConfigSynonym] = Field(description="every level that sets it, highest first")


class BrokerConfigs(Answer):
    """A broker's settings with their sources (DescribeConfigs of the broker, at that broker),
    or the cluster-wide dynamic defaults (`broker_id` null)."""

    broker_id: BrokerId | None
    configs: list[BrokerConfigEntry]


class BrokerConfigChange(Body):
    """Set (a string) or remove (null) dynamic broker configs (IncrementalAlterConfigs SET and
    DELETE). The broker validates each value as at start-up; one it refuses (an unknown or
    static setting, a bad value) is 409 INVALID_CONFIG / INVALID_REQUEST naming it, and
    nothing of the request is applied."""

    model_config = ConfigDict(
        json_schema_extra={"example": {"configs": {"log.cleaner.backoff.ms": "20000"}}}
    )

    configs: Annotated[
        dict[str, Annotated[str, Field(max_length=4096)] | None],
        Field(min_length=1, max_length=100),
    ]


class BrokerConfigsAltered(Answer):
    broker_id: BrokerId | None = Field(description="null: the cluster-wide defaults")
    set: list[str] = Field(description="the names set (values are not echoed)")
    removed: list[str]
