"""Hand-written MetadataResponse encoder (v0-v13), in pieces the broker can keep.

The broker keeps each partition's ``MetadataResponsePartition`` and each known topic's entry
encoded (broker/metadata_bytes.py) and writes a response from them (``encode_response``), so
a topic of thousands of partitions is not turned into thousands of entities per request. The
bytes are kio's (the compiled encoder's, ``encoder.py``) for the same response: the tests
compare them (tests/broker/test_metadata_bytes.py with kio's writer, tests/apis/
test_metadata_bytes.py whole responses with ``frames.encode_response``).

Layout (MetadataResponse.json; v9 is the first flexible version: compact arrays and strings as
unsigned-varint length+1, a tagged-field section after every struct and in the response
header):

    response header: correlation_id int32 [v9+: tagged fields]
    v3+: throttle_time_ms int32
    brokers: [node_id int32, host string, port int32, v1+: rack nullable string]
    v2+: cluster_id nullable string
    v1+: controller_id int32
    topics: [error_code int16, name string (v12: nullable), v10+: topic_id uuid,
             v1+: is_internal bool,
             partitions: [error_code int16, partition_index int32, leader_id int32,
                          v7+: leader_epoch int32, replica_nodes [int32], isr_nodes [int32],
                          v5+: offline_replicas [int32]],
             v8+: topic_authorized_operations int32]
    v8-v10: cluster_authorized_operations int32
    v13: error_code int16
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kafkalite.protocol.encoder import _compact_str, _legacy_str
from kafkalite.protocol.varint import encode_unsigned_varint

ZERO_UUID = uuid.UUID(int=0)

_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hii")  # error_code, partition_index, leader_id
_HEAD_EPOCH = struct.Struct(">hiii")  # ... leader_epoch (v7+)


class Family:
    """The layout and error rules shared by a run of Metadata versions."""

    __slots__ = (
        "index",
        "flexible",
        "topic_id",
        "is_internal",
        "leader_epoch",
        "offline_replicas",
        "endpoints",
        "listeners",
    )

    def __init__(
        self,
        index: int,
        *,
        flexible: bool,
        topic_id: bool,
        is_internal: bool,
        leader_epoch: bool,
        offline_replicas: bool,
        endpoints: bool,
        listeners: bool,
    ) -> None:
        self.index = index
        self.flexible = flexible
        self.topic_id = topic_id
        """The topic entry has its id (v10+)."""
        self.is_internal = is_internal
        """The topic entry has ``is_internal`` (v1+)."""
        self.leader_epoch = leader_epoch
        self.offline_replicas = offline_replicas
        self.endpoints = endpoints
        """``error_unavailable_endpoints`` (v0): unreachable replicas left out."""
        self.listeners = listeners
        """``error_unavailable_listeners`` (v6+): LISTENER_NOT_FOUND for a leader without
        the client's listener."""


def _families() -> tuple[Family, ...]:
    out = []
    seen: dict[tuple[bool, ...], Family] = {}
    for version in range(0, 14):
        key = (
            version >= 9,
            version >= 10,
            version >= 1,
            version >= 7,
            version >= 5,
            version == 0,
            version >= 6,
        )
        family = seen.get(key)
        if family is None:
            family = seen[key] = Family(
                len(seen),
                flexible=key[0],
                topic_id=key[1],
                is_internal=key[2],
                leader_epoch=key[3],
                offline_replicas=key[4],
                endpoints=key[5],
                listeners=key[6],
            )
        out.append(family)
    return tuple(out)


FAMILY_OF_VERSION: tuple[Family, ...] = _families()
"""Metadata v0-v13 -> its family (v0 | v1-4 | v5 | v6 | v7-8 | v9 | v10-13)."""


def _ints(out: bytearray, ids: tuple[int, ...], flexible: bool) -> None:
    n = len(ids)
    if flexible:
        if n < 127:
            out.append(n + 1)
        else:
            out += encode_unsigned_varint(n + 1)
        out += struct.pack(f">{n}i", *ids)
    else:
        out += struct.pack(f">{n + 1}i", n, *ids)


def encode_partition(p: Any, family: Family) -> bytes:
    """One MetadataResponsePartition (a ``PartitionMetadata``) in ``family``'s layout."""
    if family.leader_epoch:
        out = bytearray(
            _HEAD_EPOCH.pack(int(p.error_code), p.partition_index, p.leader_id, p.leader_epoch)
        )
    else:
        out = bytearray(_HEAD.pack(int(p.error_code), p.partition_index, p.leader_id))
    flexible = family.flexible
    _ints(out, p.replica_nodes, flexible)
    _ints(out, p.isr_nodes, flexible)
    if family.offline_replicas:
        _ints(out, p.offline_replicas, flexible)
    if flexible:
        out.append(0)  # no tagged fields
    return bytes(out)


def encode_topic_head(name: str, topic_id: uuid.UUID, is_internal: bool, family: Family) -> bytes:
    """A known topic's fields before its partitions: error_code 0, name, [v10+ topic id],
    [v1+ is_internal]."""
    data = name.encode()
    if family.flexible:
        out = bytearray(b"\x00\x00")
        out += encode_unsigned_varint(len(data) + 1)
    else:
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
        out = bytearray(b"\x00\x00")
        out += len(data).to_bytes(2, "big")
    out += data
    if family.topic_id:
        out += topic_id.bytes
    if family.is_internal:
        out.append(1 if is_internal else 0)
    return bytes(out)


def array_length(n: int, flexible: bool) -> bytes:
    """The length prefix of an array of ``n`` entries."""
    return encode_unsigned_varint(n + 1) if flexible else _I32.pack(n)


_I16 = struct.Struct(">h").pack


def encode_response(
    correlation_id: int,
    version: int,
    *,
    throttle_time_ms: int,
    brokers: Iterable[Mapping[str, Any]],
    cluster_id: str | None,
    controller_id: int,
    topics: Iterable[Any],
    cluster_authorized_operations: int,
    error_code: int = 0,
) -> bytes:
    """The whole response frame (size prefix, response header, body). ``brokers``: mappings
    with node_id, host, port and rack; ``topics``: objects with the topic fields of the
    kio entity (error_code, name, topic_id, is_internal, topic_authorized_operations) and
    ``encoded``: the topic's entry up to its partitions included (``encode_topic_head`` and
    the partitions array), or None for a topic answered with no partitions."""
    flexible = version >= 9
    pack_i32 = _I32.pack
    out = bytearray(4)
    out += pack_i32(correlation_id)
    if flexible:
        out.append(0)  # response header v1: no tagged fields
    if version >= 3:
        out += pack_i32(throttle_time_ms)
    put_str = _compact_str if flexible else _legacy_str
    brokers = list(brokers)
    out += array_length(len(brokers), flexible)
    for broker in brokers:
        out += pack_i32(broker["node_id"])
        put_str(out, broker["host"])
        out += pack_i32(broker["port"])
        if version >= 1:
            put_str(out, broker.get("rack"))
        if flexible:
            out.append(0)
    if version >= 2:
        put_str(out, cluster_id)
    if version >= 1:
        out += pack_i32(controller_id)
    topics = list(topics)
    out += array_length(len(topics), flexible)
    empty = array_length(0, flexible)
    for topic in topics:
        if topic.encoded is not None:
            out += topic.encoded
        else:
            out += _I16(int(topic.error_code))
            put_str(out, topic.name)
            if version >= 10:
                out += (topic.topic_id or ZERO_UUID).bytes
            if version >= 1:
                out.append(1 if topic.is_internal else 0)
            out += empty
        if version >= 8:
            out += pack_i32(topic.topic_authorized_operations)
        if flexible:
            out.append(0)
    if 8 <= version <= 10:
        out += pack_i32(cluster_authorized_operations)
    if version >= 13:
        out += _I16(error_code)
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
