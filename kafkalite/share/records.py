"""The records of ``__share_group_state`` (Kafka's share coordinator record formats).

Key: int16 record type, then GroupId (int16-length string), TopicId (16 bytes), Partition
(int32), not flexible. Type 0 is ShareSnapshotKey, type 1 ShareUpdateKey.

Value (version 0, flexible: compact arrays, empty tagged fields):

- ShareSnapshotValue: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32, StartOffset
  int64, CreateTimestamp int64, WriteTimestamp int64, StateBatches[FirstOffset int64,
  LastOffset int64, DeliveryState int8, DeliveryCount int16];
- ShareUpdateValue: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64,
  StateBatches[...] (the batches replace those they overlap in the latest snapshot).

A null value is a tombstone (DeleteShareGroupState). Invariant: ``decode_*(encode_*(x)) == x``
(tests/share/test_records.py, property-based).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from kafkalite.protocol.types import java_string_hash_code, kafka_abs
from kafkalite.protocol.varint import decode_unsigned_varint, encode_unsigned_varint
from kafkalite.share.partition import StateBatch

SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"

SNAPSHOT_KEY = 0
UPDATE_KEY = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_BATCH = struct.Struct(">qqbh")
_SNAPSHOT_HEAD = struct.Struct(">iiiqqq")
_UPDATE_HEAD = struct.Struct(">iiq")


class StateRecordError(ValueError):
    """A key or value of ``__share_group_state`` is truncated or of an unknown version."""


def state_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """The share coordinator's key of a share-partition (Kafka's SharePartitionKey)."""
    return f"{group_id}:{topic_id}:{partition}"


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """The ``__share_group_state`` partition (and so the share coordinator) of a
    share-partition: abs(hashCode("group:topicId:partition")) % partitions, as Kafka."""
    key = state_key(group_id, topic_id, partition)
    return kafka_abs(java_string_hash_code(key)) % num_partitions


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int = -1
    write_timestamp: int = -1
    state_batches: tuple[StateBatch, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = field(default_factory=tuple)


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return b"".join(
        (
            _I16.pack(key.record_type),
            _I16.pack(len(group)),
            group,
            key.topic_id.bytes,
            _I32.pack(key.partition),
        )
    )


def decode_key(buf: bytes) -> ShareStateKey:
    try:
        (record_type,) = _I16.unpack_from(buf, 0)
        if record_type not in (SNAPSHOT_KEY, UPDATE_KEY):
            raise StateRecordError(f"unknown record type {record_type}")
        (length,) = _I16.unpack_from(buf, 2)
        group = bytes(buf[4 : 4 + length]).decode()
        pos = 4 + length
        topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
        (partition,) = _I32.unpack_from(buf, pos + 16)
    except (struct.error, ValueError) as e:
        if isinstance(e, StateRecordError):
            raise
        raise StateRecordError(f"bad share state key: {e}") from e
    return ShareStateKey(record_type, group, topic_id, partition)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    try:
        return decode_unsigned_varint(buf, pos)
    except ValueError as e:
        raise StateRecordError(str(e)) from None


def _encode_batches(batches: tuple[StateBatch, ...]) -> bytes:
    parts = [encode_unsigned_varint(len(batches) + 1)]
    for b in batches:
        parts.append(_BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count))
        parts.append(b"\x00")  # tagged fields
    return b"".join(parts)


def _decode_batches(buf: bytes, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    n, pos = _read_uvarint(buf, pos)
    batches = []
    for _ in range(max(0, n - 1)):
        if pos + _BATCH.size + 1 > len(buf):
            raise StateRecordError("truncated state batch")
        first, last, state, count = _BATCH.unpack_from(buf, pos)
        pos += _BATCH.size
        pos = _skip_tags(buf, pos)
        batches.append(StateBatch(first, last, state, count))
    return tuple(batches), pos


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def encode_snapshot(value: ShareSnapshot) -> bytes:
    return b"".join(
        (
            _I16.pack(0),
            _SNAPSHOT_HEAD.pack(
                value.snapshot_epoch,
                value.state_epoch,
                value.leader_epoch,
                value.start_offset,
                value.create_timestamp,
                value.write_timestamp,
            ),
            _encode_batches(value.state_batches),
            b"\x00",
        )
    )


def decode_snapshot(buf: bytes) -> ShareSnapshot:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != 0:
            raise StateRecordError(f"unknown ShareSnapshotValue version {version}")
        head = _SNAPSHOT_HEAD.unpack_from(buf, 2)
        batches, _ = _decode_batches(buf, 2 + _SNAPSHOT_HEAD.size)
    except struct.error as e:
        raise StateRecordError(f"bad ShareSnapshotValue: {e}") from e
    snapshot_epoch, state_epoch, leader_epoch, start, created, written = head
    return ShareSnapshot(
        snapshot_epoch, state_epoch, leader_epoch, start, created, written, batches
    )


def encode_update(value: ShareUpdate) -> bytes:
    return b"".join(
        (
            _I16.pack(0),
            _UPDATE_HEAD.pack(value.snapshot_epoch, value.leader_epoch, value.start_offset),
            _encode_batches(value.state_batches),
            b"\x00",
        )
    )


def decode_update(buf: bytes) -> ShareUpdate:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != 0:
            raise StateRecordError(f"unknown ShareUpdateValue version {version}")
        head = _UPDATE_HEAD.unpack_from(buf, 2)
        batches, _ = _decode_batches(buf, 2 + _UPDATE_HEAD.size)
    except struct.error as e:
        raise StateRecordError(f"bad ShareUpdateValue: {e}") from e
    snapshot_epoch, leader_epoch, start = head
    return ShareUpdate(snapshot_epoch, leader_epoch, start, batches)
