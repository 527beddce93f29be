"""Metadata response topics encoded once per partition state (Kafka answers Metadata from the
cache's per-partition state; here the state's *bytes* are kept as well).

A Metadata answer for a topic of N partitions used to cost, per partition and per request, a
``PartitionMetadata``, a dict, a kio entity and its encoding. This module keeps, per **view**
(the client's listener and the response's version family, ``FAMILY_OF_VERSION``), the encoded
``MetadataResponsePartition`` of every partition asked for, and each topic's entry: its fields
up to its partitions (error 0, name, [v10+ id], [v1+ is_internal]) followed by its partitions
array (length prefix and its partitions' bytes joined). A request for a known topic is then
one dict lookup. The encoding is protocol/metadata_response.py's; this module keeps its
pieces and knows when they are stale.

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

from collections.abc import Callable, Mapping
from typing import Any

from kafkalite.protocol.metadata_response import Family, array_length, encode_partition


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
        entries = self.entries(view, topic)
        parts = [head, array_length(len(partitions), family.flexible)]
        for index in sorted(partitions):
            entry = entries.get(index)
            if entry is None:
                entry = entries[index] = encode_partition(metadata(partitions[index]), family)
            parts.append(entry)
        joined = view.topics[topic] = b"".join(parts)
        return joined

    @staticmethod
    def entries(view: View, topic: str) -> dict[int, bytes]:
        """``topic``'s encoded partitions in ``view`` (index -> entry), made empty if none."""
        entries = view.partitions.get(topic)
        if entries is None:
            entries = view.partitions[topic] = {}
        return entries

    def ensure_partition(
        self, view: View, family: Family, topic: str, info: Any, metadata: Callable[[Any], Any]
    ) -> None:
        """``info``'s partition encoded in ``view`` if it is not yet (what ``topic_entry``
        would encode for it)."""
        entries = self.entries(view, topic)
        if info.partition_index not in entries:
            entries[info.partition_index] = encode_partition(metadata(info), family)

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
