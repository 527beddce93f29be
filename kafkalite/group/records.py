"""The record formats of the ``__consumer_offsets`` topic, and which partition holds a group.

Kafka's group coordinator keeps two kinds of records in the compacted ``__consumer_offsets``
topic; kafkalite writes them byte for byte the same, so Kafka's own tooling (for example
``kafka-console-consumer --formatter ...OffsetsMessageFormatter``) can read the topic, and a
broker that restarts rebuilds its groups and committed offsets by replaying the partitions it
leads.

Every key and every value starts with an int16 *version*; the rest follows Kafka's schemas
(``group-coordinator/src/main/resources/common/message/*.json``). Strings are int16 length +
UTF-8 (length -1 = null); bytes are int32 length + raw bytes; arrays are int32 count. Versions 4+
of the values are "flexible": compact (unsigned-varint length + 1) strings, bytes and arrays and
tagged-field sections. kafkalite writes the same versions Kafka 3.x writes and reads them all.

Keys (the version selects the record type):

    version 0, 1  OffsetCommitKey    group: string, topic: string, partition: int32
    version 2     GroupMetadataKey   group: string
    version 3     ConsumerGroupMetadataKey                  group
    version 4     ConsumerGroupPartitionMetadataKey         group
    version 5     ConsumerGroupMemberMetadataKey            group, member_id
    version 6     ConsumerGroupTargetAssignmentMetadataKey  group
    version 7     ConsumerGroupTargetAssignmentMemberKey    group, member_id
    version 8     ConsumerGroupCurrentMemberAssignmentKey   group, member_id
    version 16    ConsumerGroupRegularExpressionKey         group, regular_expression

The consumer group protocol's values (KIP-848; value version 0, flexible; topic ids are 16-byte
UUIDs; a partition list is a compact array of int32):

    ConsumerGroupMetadataValue            epoch int32
    ConsumerGroupPartitionMetadataValue   epoch int32, topics [topic_id, topic_name,
                                          num_partitions int32, partition_racks [] (empty)]
    ConsumerGroupMemberMetadataValue      instance_id?, rack_id?, client_id, client_host,
                                          subscribed_topic_names [string],
                                          subscribed_topic_regex?, rebalance_timeout_ms int32,
                                          server_assignor?, tagged 0: ClassicMemberMetadata
                                          {session_timeout_ms int32, supported_protocols
                                          [name, metadata bytes]} (classic members only)
    ConsumerGroupTargetAssignmentMetadataValue  assignment_epoch int32, tagged 0:
                                          assignment_timestamp int64 (Kafka 4.3)
    ConsumerGroupTargetAssignmentMemberValue    topic_partitions [topic_id, partitions]
    ConsumerGroupCurrentMemberAssignmentValue   member_epoch int32, previous_member_epoch int32,
                                          state int8, assigned_partitions [topic_id,
                                          partitions], partitions_pending_revocation [...]
    ConsumerGroupRegularExpressionValue   topics [string], version int64 (the resolution's
                                          sequence number; Kafka: its metadata image's offset),
                                          timestamp int64 (ms)

Tagged fields of newer Kafka versions are skipped when read and not written.

Values:

    OffsetCommitValue
      v0  offset int64, metadata string, commit_timestamp int64
      v1  offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
      v2  offset int64, metadata string, commit_timestamp int64
      v3  offset int64, leader_epoch int32, metadata string, commit_timestamp int64   (written)
      v4  v3, flexible
    GroupMetadataValue
      v0  protocol_type string, generation int32, protocol string?, leader string?,
          members [member_id, client_id, client_host, session_timeout int32,
                   subscription bytes, assignment bytes]
      v1  members gain rebalance_timeout int32 (after client_host)
      v2  current_state_timestamp int64 (after leader)
      v3  members gain group_instance_id string? (after member_id)                       (written)
      v4  v3, flexible

A *tombstone* (value None) deletes the key: an offset tombstone removes a committed offset, a
group tombstone removes the group.

Which partition: ``partition_for(group_id, n) = abs(java String.hashCode(group_id)) % n``, with
Kafka's ``Utils.abs`` (abs(Integer.MIN_VALUE) == 0), so FindCoordinator agrees with Kafka.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from kafkalite.protocol.types import java_string_hash_code, kafka_abs
from kafkalite.protocol.varint import decode_unsigned_varint, write_unsigned_varint

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value of ``__consumer_offsets`` is truncated or of an unknown version."""


# --------------------------------------------------------------------------- partitioning


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition (and so the coordinator) of a group."""
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return kafka_abs(java_string_hash_code(group_id)) % num_partitions


# --------------------------------------------------------------------------- record types


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadataValue, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- primitive codec


class _Writer:
    __slots__ = ("buf", "flexible")

    def __init__(self, flexible: bool = False) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        write_unsigned_varint(self.buf, v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.int16(-1)
            return
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.int16(len(data))
        self.buf += data

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.int32(-1)
            return
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.int32(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, flexible: bool = False) -> None:
        self.buf = bytes(buf)
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise RecordFormatError(f"truncated record: need {n} bytes at {self.pos}")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.buf, self.pos)
        except ValueError as e:
            raise RecordFormatError(f"bad unsigned varint: {e}") from None
        return value

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"invalid UTF-8 string: {e}") from e

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            return None
        return self._take(n)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise RecordFormatError("null array")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def at_end(self) -> bool:
        return self.pos == len(self.buf)


# --------------------------------------------------------------------------- keys


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer()
    w.int16(OFFSET_COMMIT_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return bytes(w.buf)


def encode_group_metadata_key(group: str) -> bytes:
    w = _Writer()
    w.int16(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.buf)


def decode_key(buf: bytes | memoryview) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey:
    """Decode a ``__consumer_offsets`` key; raises RecordFormatError for other versions
    (share and streams group records are not ours)."""
    r = _Reader(buf)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    if version in CONSUMER_GROUP_RECORD_TYPES:
        group = r.string()
        member = r.string() if version in _MEMBER_KEYED else None
        return ConsumerGroupKey(version, group, member)
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


# --------------------------------------------------------------------------- offset values


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Version 1 when an explicit expire timestamp is set (OffsetCommit v1 retention), else 3,
    as Kafka 3.x does."""
    w = _Writer()
    if value.expire_timestamp >= 0:
        w.int16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE)
        w.int64(value.offset)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
    else:
        w.int16(OFFSET_COMMIT_VALUE_VERSION)
        w.int64(value.offset)
        w.int32(value.leader_epoch)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
    return bytes(w.buf)


def decode_offset_commit_value(buf: bytes | memoryview | None) -> OffsetCommitValue | None:
    if buf is None:
        return None
    r = _Reader(buf)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    r.flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


# --------------------------------------------------------------------------- group values


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    if not 0 <= version <= 4:
        raise ValueError(f"unknown group metadata value version {version}")
    w = _Writer(flexible=version >= 4)
    w.int16(version)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return bytes(w.buf)


def decode_group_metadata_value(buf: bytes | memoryview | None) -> GroupMetadataValue | None:
    if buf is None:
        return None
    r = _Reader(buf)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    r.flexible = version >= 4
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        group_instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.nullable_bytes() or b""
        assignment = r.nullable_bytes() or b""
        r.skip_tagged_fields()
        members.append(
            MemberMetadataValue(
                member_id=member_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
                rebalance_timeout=session_timeout if rebalance_timeout < 0 else rebalance_timeout,
                group_instance_id=group_instance_id,
            )
        )
    r.skip_tagged_fields()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )


# --------------------------------------------------------------------------- consumer groups

CG_METADATA = 3
CG_PARTITION_METADATA = 4
CG_MEMBER_METADATA = 5
CG_TARGET_ASSIGNMENT_METADATA = 6
CG_TARGET_ASSIGNMENT_MEMBER = 7
CG_CURRENT_MEMBER_ASSIGNMENT = 8
CG_REGULAR_EXPRESSION = 16
CONSUMER_GROUP_RECORD_TYPES = frozenset({*range(3, 9), CG_REGULAR_EXPRESSION})
#: the types whose key has a second string: the member id, or the regular expression (16)
_MEMBER_KEYED = frozenset(
    {
        CG_MEMBER_METADATA,
        CG_TARGET_ASSIGNMENT_MEMBER,
        CG_CURRENT_MEMBER_ASSIGNMENT,
        CG_REGULAR_EXPRESSION,
    }
)

TopicPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """The key of a consumer-group-protocol record: its type (= key version), the group and,
    for the per-member types, the member id (for ConsumerGroupRegularExpression, type 16: the
    regular expression)."""

    record_type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    epoch: int
    topics: tuple[tuple[uuid.UUID, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    #: ClassicMemberMetadata (tagged field 0): a member of the classic protocol inside a
    #: consumer group, its JoinGroup protocols (name, metadata); None for a consumer member
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None
    #: ClassicMemberMetadata's SessionTimeoutMs (written only with ``classic_protocols``)
    classic_session_timeout_ms: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    #: Kafka 4.3's AssignmentTimestamp (tagged field 0, default 0): when the assignor run that
    #: produced this target finished, in ms; the assignment interval counts from it
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """A regular expression's resolution: the topics it matched when it was last resolved."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)
_VALUE_TYPES: dict[type, int] = {
    ConsumerGroupMetadataValue: CG_METADATA,
    ConsumerGroupPartitionMetadataValue: CG_PARTITION_METADATA,
    ConsumerGroupMemberMetadataValue: CG_MEMBER_METADATA,
    ConsumerGroupTargetAssignmentMetadataValue: CG_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupTargetAssignmentMemberValue: CG_TARGET_ASSIGNMENT_MEMBER,
    ConsumerGroupCurrentMemberAssignmentValue: CG_CURRENT_MEMBER_ASSIGNMENT,
    ConsumerGroupRegularExpressionValue: CG_REGULAR_EXPRESSION,
}


def encode_consumer_group_key(record_type: int, group: str, member_id: str | None = None) -> bytes:
    w = _Writer()
    w.int16(record_type)
    w.string(group)
    if record_type in _MEMBER_KEYED:
        w.string(member_id or "")
    return bytes(w.buf)


def _write_uuid(w: _Writer, u: uuid.UUID) -> None:
    w.buf += u.bytes


def _read_uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=r._take(16))


def _write_topic_partitions(w: _Writer, tps: TopicPartitions) -> None:
    items = sorted(tps.items(), key=lambda kv: str(kv[0]))
    w.array_len(len(items))
    for topic_id, parts in items:
        _write_uuid(w, topic_id)
        w.array_len(len(parts))
        for p in sorted(parts):
            w.int32(p)
        w.tagged_fields()


def _read_topic_partitions(r: _Reader) -> TopicPartitions:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        out[topic_id] = frozenset(r.int32() for _ in range(r.array_len()))
        r.skip_tagged_fields()
    return out


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    w = _Writer(flexible=True)
    w.int16(0)
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        w.int32(value.epoch)
        w.array_len(len(value.topics))
        for topic_id, name, n in value.topics:
            _write_uuid(w, topic_id)
            w.string(name)
            w.int32(n)
            w.array_len(0)
            w.tagged_fields()
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.array_len(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            w.string(name)
        w.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        if value.classic_protocols is not None:
            # tagged field 0: ClassicMemberMetadata { SessionTimeoutMs int32,
            # SupportedProtocols [Name, Metadata] }
            inner = _Writer(flexible=True)
            inner.int32(value.classic_session_timeout_ms)
            inner.array_len(len(value.classic_protocols))
            for name, metadata in value.classic_protocols:
                inner.string(name)
                inner.bytes_(metadata)
                inner.tagged_fields()
            inner.tagged_fields()
            w.uvarint(1)
            w.uvarint(0)
            w.uvarint(len(inner.buf))
            w.buf += inner.buf
            return bytes(w.buf)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
        if value.assignment_timestamp != 0:
            # tagged field 0: AssignmentTimestamp int64 (a default 0 is not written)
            w.uvarint(1)
            w.uvarint(0)
            w.uvarint(8)
            w.int64(value.assignment_timestamp)
            return bytes(w.buf)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _write_topic_partitions(w, value.partitions)
    elif isinstance(value, ConsumerGroupRegularExpressionValue):
        w.array_len(len(value.topics))
        for name in value.topics:
            w.string(name)
        w.int64(value.version)
        w.int64(value.timestamp)
    else:
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.buf += struct.pack(">b", value.state)
        _write_topic_partitions(w, value.assigned)
        _write_topic_partitions(w, value.pending_revocation)
    w.tagged_fields()
    return bytes(w.buf)


def consumer_group_record(
    group: str, value: ConsumerGroupValue, member_id: str | None = None
) -> tuple[bytes, bytes]:
    """Key and value of one consumer-group-protocol record."""
    record_type = _VALUE_TYPES[type(value)]
    return encode_consumer_group_key(record_type, group, member_id), encode_consumer_group_value(
        value
    )


def decode_consumer_group_value(
    record_type: int, buf: bytes | memoryview | None
) -> ConsumerGroupValue | None:
    if buf is None:
        return None
    r = _Reader(buf, flexible=True)
    version = r.int16()
    if version != 0:
        raise RecordFormatError(f"unknown consumer group value version {version}")
    out: ConsumerGroupValue
    if record_type == CG_METADATA:
        out = ConsumerGroupMetadataValue(r.int32())
    elif record_type == CG_PARTITION_METADATA:
        epoch = r.int32()
        topics = []
        for _ in range(r.array_len()):
            topic_id = _read_uuid(r)
            name = r.string()
            n = r.int32()
            for _ in range(r.array_len()):
                r.int32()
                for _ in range(r.array_len()):
                    r.string()
                r.skip_tagged_fields()
            r.skip_tagged_fields()
            topics.append((topic_id, name, n))
        out = ConsumerGroupPartitionMetadataValue(epoch, tuple(topics))
    elif record_type == CG_MEMBER_METADATA:
        instance_id = r.nullable_string()
        rack_id = r.nullable_string()
        client_id = r.string()
        client_host = r.string()
        names = tuple(r.string() for _ in range(r.array_len()))
        regex = r.nullable_string()
        rebalance_timeout_ms = r.int32()
        server_assignor = r.nullable_string()
        classic: tuple[tuple[str, bytes], ...] | None = None
        classic_session_timeout_ms = -1
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            if tag != 0:
                r._take(size)
                continue
            classic_session_timeout_ms = r.int32()
            protocols = []
            for _ in range(r.array_len()):
                name = r.string()
                protocols.append((name, r.nullable_bytes() or b""))
                r.skip_tagged_fields()
            r.skip_tagged_fields()
            classic = tuple(protocols)
        return ConsumerGroupMemberMetadataValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            names,
            regex,
            rebalance_timeout_ms,
            server_assignor,
            classic,
            classic_session_timeout_ms,
        )
    elif record_type == CG_TARGET_ASSIGNMENT_METADATA:
        epoch = r.int32()
        timestamp = 0
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            if tag == 0 and size == 8:
                timestamp = r.int64()
            else:
                r._take(size)
        return ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp)
    elif record_type == CG_TARGET_ASSIGNMENT_MEMBER:
        out = ConsumerGroupTargetAssignmentMemberValue(_read_topic_partitions(r))
    elif record_type == CG_REGULAR_EXPRESSION:
        names = tuple(r.string() for _ in range(r.array_len()))
        out = ConsumerGroupRegularExpressionValue(names, r.int64(), r.int64())
    else:
        member_epoch = r.int32()
        previous = r.int32()
        state = struct.unpack(">b", r._take(1))[0]
        assigned = _read_topic_partitions(r)
        pending = _read_topic_partitions(r)
        out = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch, previous, state, assigned, pending
        )
    r.skip_tagged_fields()
    return out


# --------------------------------------------------------------------------- whole records


GroupRecord = (
    tuple[OffsetCommitKey, OffsetCommitValue | None]
    | tuple[GroupMetadataKey, GroupMetadataValue | None]
    | tuple[ConsumerGroupKey, ConsumerGroupValue | None]
)


def decode_record(key: bytes | memoryview, value: bytes | memoryview | None) -> GroupRecord:
    """Decode one ``__consumer_offsets`` record (value None = tombstone)."""
    k = decode_key(key)
    if isinstance(k, OffsetCommitKey):
        return k, decode_offset_commit_value(value)
    if isinstance(k, ConsumerGroupKey):
        return k, decode_consumer_group_value(k.record_type, value)
    return k, decode_group_metadata_value(value)
