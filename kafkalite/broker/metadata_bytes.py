"""Metadata response topics encoded once per partition state (Kafka answers Metadata from the
cache's per-partition state; here the state's *bytes* are kept as well).

A Metadata answer for a topic of N partitions used to cost, per partition and per request, a
``PartitionMetadata``, a dict, a kio entity and its encoding. This module keeps, per **view**
(the client's listener and the response's version family, ``FAMILY_OF_VERSION``), the encoded
``MetadataResponsePartition`` of every partition asked for, and each topic's entry: its fields
up to its partitions (error 0, name, [v10+ id], [v1+ is_internal]) followed by its partitions
array (length prefix and its partitions' bytes joined). A request for a known topic is then
one dict lookup.

Invariants:

- An entry's bytes are exactly what the kio encoder writes for the ``MetadataResponsePartition``
  that ``MetadataCache.partition_metadata`` computes for that partition with the family's error
  rules (v0: unreachable replicas left out, REPLICA_NOT_AVAILABLE; v6+: LISTENER_NOT_FOUND), in
  that family's layout (leader epoch v7+, offline replicas v5+, compact arrays and a tagged-field
  section v9+). tests/broker/test_metadata_bytes.py compares them with kio's writer, and
  tests/apis/test_metadata_bytes.py whole answers with kio's encoding of the same answer.
- A partition entry depends on the partition's state (leader, leader epoch, replicas, ISR,
  offline replicas) and on the live brokers as seen from the listener (which ids are alive,
  which of them have an endpoint on it); a topic entry on those of its partitions and on the
  topic's id. ``MetadataCache`` drops a partition's entries (and its topic's entry) in every view
  when that state changes or the partition goes, a topic's entry when its id changes, all of a
  topic when it goes; a view checks the live brokers' ``broker_signature`` on every answer and is
  emptied when it differs from the one its entries were made with (every partition is then
  encoded again, once).
- Nothing here is read or written off the event loop (the cache's rule).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kafkalite.protocol.varint import encode_unsigned_varint

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


def broker_signature(alive: Mapping[int, Any], listener: str) -> frozenset[tuple[int, bool]]:
    """What the encoded partitions depend on in the live brokers: their ids and whether each
    has an endpoint on ``listener`` (hosts and ports are not in a partition entry)."""
    return frozenset((i, b.endpoint_for(listener) is not None) for i, b in alive.items())


class View:
    """The encoded partitions for one (listener, family)."""

    __slots__ = ("signature", "topics", "partitions")

    def __init__(self, signature: frozenset[tuple[int, bool]]) -> None:
        self.signature = signature
        self.topics: dict[str, bytes] = {}
        """topic -> its entry up to its partitions included (``encode_topic_head``, then the
        partitions array with its length prefix)."""
        self.partitions: dict[str, dict[int, bytes]] = {}
        """topic -> partition index -> its encoded entry."""


class EncodedPartitions:
    """Every view of one broker's cache, and their invalidation."""

    __slots__ = ("views",)

    def __init__(self) -> None:
        self.views: dict[tuple[str, int], View] = {}

    def view(self, listener: str, family: Family, alive: Mapping[int, Any]) -> View:
        """The view for (listener, family), emptied first if the live brokers differ (as seen
        from ``listener``) from those its entries were encoded with."""
        signature = broker_signature(alive, listener)
        key = (listener, family.index)
        view = self.views.get(key)
        if view is None or view.signature != signature:
            view = self.views[key] = View(signature)
        return view

    def topic_entry(
        self,
        view: View,
        family: Family,
        head: bytes,
        topic: str,
        partitions: Mapping[int, Any],
        metadata: Callable[[Any], Any],
    ) -> bytes:
        """``head`` and the encoded partitions array of ``topic`` (``partitions``: index ->
        PartitionInfo, ``metadata``: PartitionInfo -> PartitionMetadata with the family's
        error rules), kept in ``view``."""
        entries = view.partitions.get(topic)
        if entries is None:
            entries = view.partitions[topic] = {}
        parts = [head, array_length(len(partitions), family.flexible)]
        for index in sorted(partitions):
            entry = entries.get(index)
            if entry is None:
                entry = entries[index] = encode_partition(metadata(partitions[index]), family)
            parts.append(entry)
        joined = view.topics[topic] = b"".join(parts)
        return joined

    # -- invalidation (called by MetadataCache) ----------------------------------------------

    def forget_partition(self, topic: str, index: int) -> None:
        for view in self.views.values():
            view.topics.pop(topic, None)
            entries = view.partitions.get(topic)
            if entries is not None:
                entries.pop(index, None)

    def forget_topic_entry(self, topic: str) -> None:
        """The topic's head changed (its id): its partitions' entries stay."""
        for view in self.views.values():
            view.topics.pop(topic, None)

    def forget_topic(self, topic: str) -> None:
        for view in self.views.values():
            view.topics.pop(topic, None)
            view.partitions.pop(topic, None)

    def clear(self) -> None:
        self.views.clear()
