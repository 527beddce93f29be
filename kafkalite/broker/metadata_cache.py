"""The broker's view of the cluster, as the controller last told it (Kafka's ZkMetadataCache).

Filled only from UpdateMetadata requests (the controller sends one to every broker after each
change, the full state after a broker starts) and topic ids seen in LeaderAndIsr. It answers
Metadata and DescribeCluster: live brokers with their endpoint per listener, the controller id,
topics with their ids, and per partition the leader, leader epoch, replicas, ISR and offline
replicas.

Rules (as Kafka):

- The live broker list of each UpdateMetadata replaces the previous one.
- A partition state whose leader is -2 (LeaderDuringDelete) removes the partition; a topic with
  no partitions left is forgotten with its id.
- A request from an older controller epoch is ignored (``update_metadata`` returns it as
  stale; the handler answers STALE_CONTROLLER_EPOCH).
- Metadata answers come from the partitions' encoded entries (``metadata_bytes.py``): a
  partition's entries are dropped when its leader, leader epoch, replicas, ISR or offline
  replicas change or it goes (``update_partition`` is the only writer of ``partition_states``),
  and a view is emptied when the live brokers seen from its listener change.
- Metadata answers: a leader that is not alive (or -1) gives LEADER_NOT_AVAILABLE with leader
  -1; a live leader without an endpoint on the client's listener gives LISTENER_NOT_FOUND when
  asked for (``error_unavailable_listeners``), LEADER_NOT_AVAILABLE otherwise; a replica or
  ISR member that is not alive is reported only with ``error_unavailable_endpoints`` (Metadata
  v0): it is left out of the lists and the partition gets REPLICA_NOT_AVAILABLE (leader still
  returned); later versions list every replica with no error.

Not thread-safe; updated and read on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.broker.metadata_bytes import EncodedPartitions, View
from kafkalite.protocol.errors import ErrorCode, StaleControllerEpochError
from kafkalite.protocol.metadata_response import FAMILY_OF_VERSION, Family, encode_topic_head
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.loop_slices import LoopSlices
from kafkalite.zk.types import LEADER_DURING_DELETE, NO_LEADER

ZERO_UUID = uuid.UUID(int=0)
UPDATE_METADATA_SLICE = 2000
"""Partition states read between two yields to the event loop by ``update_metadata_async``."""


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: int = 0


@dataclass(frozen=True, slots=True)
class MetadataBroker:
    id: int
    endpoints: Mapping[str, BrokerEndpoint]
    rack: str | None = None

    def endpoint_for(self, listener: str) -> BrokerEndpoint | None:
        return self.endpoints.get(listener)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as the controller stated it (UpdateMetadataPartitionState)."""

    topic: str
    partition_index: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    zk_version: int = -1
    controller_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """A partition of a Metadata response."""

    error_code: ErrorCode
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    error_code: ErrorCode
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionMetadata, ...] = field(default=())


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_id: int | None = None
        self.controller_epoch = -1
        self.alive_brokers: dict[int, MetadataBroker] = {}
        self.partition_states: dict[str, dict[int, PartitionInfo]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self._all_topics: frozenset[str] | None = None  # get_all_topics' answer, until it changes
        self._partition_count = 0  # partitions in partition_states, kept by update_partition
        self.encoded = EncodedPartitions()
        """The partitions of Metadata answers, encoded once per state (metadata_bytes.py)."""
        self.update_listeners: list[Callable[[], None]] = []
        """Called after each UpdateMetadata is applied (the server serves Metadata from the
        first one on, before its start-up ends)."""

    # -- updates ------------------------------------------------------------------------------

    def update_metadata(self, request: Any) -> list[TopicPartition]:
        """Apply an UpdateMetadata request (v6/v7 shape: controller_id, controller_epoch,
        topic_states[topic_name, topic_id, partition_states[...]], live_brokers[id,
        endpoints[port, host, listener, security_protocol], rack]). Returns the partitions
        deleted. Raises ``StaleControllerEpochError`` for an older controller epoch."""
        self._check_epoch(request)
        topic_ids: list[tuple[str, Any]] = []
        infos: list[PartitionInfo] = []
        for topic_state in request.topic_states:
            self._read_topic_state(topic_state, topic_ids, infos)
        return self._apply(request, topic_ids, infos)

    async def update_metadata_async(
        self, request: Any, slice_size: int = UPDATE_METADATA_SLICE
    ) -> list[TopicPartition]:
        """``update_metadata`` without holding the event loop on a request for many
        partitions: the partition states are read ``slice_size`` at a time with a yield
        between slices, then applied at once (a Metadata answer never sees half of it)."""
        self._check_epoch(request)
        topic_ids: list[tuple[str, Any]] = []
        infos: list[PartitionInfo] = []
        since_yield = 0
        for topic_state in request.topic_states:
            self._read_topic_state(topic_state, topic_ids, infos)
            since_yield += len(topic_state.partition_states)
            if since_yield >= slice_size:
                since_yield = 0
                await asyncio.sleep(0)
        self._check_epoch(request)  # a newer controller may have spoken meanwhile
        return self._apply(request, topic_ids, infos)

    def _check_epoch(self, request: Any) -> None:
        if request.controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"UpdateMetadata from controller epoch {request.controller_epoch} is older than "
                f"{self.controller_epoch}"
            )

    @staticmethod
    def _read_topic_state(
        topic_state: Any, topic_ids: list[tuple[str, Any]], infos: list[PartitionInfo]
    ) -> None:
        name = topic_state.topic_name
        topic_id = getattr(topic_state, "topic_id", None)
        if topic_id is not None and topic_id != ZERO_UUID:
            topic_ids.append((name, topic_id))
        for p in topic_state.partition_states:
            infos.append(
                PartitionInfo(
                    name,
                    p.partition_index,
                    p.leader,
                    p.leader_epoch,
                    tuple(p.isr),
                    tuple(p.replicas),
                    tuple(getattr(p, "offline_replicas", ()) or ()),
                    p.zk_version,
                    p.controller_epoch,
                )
            )

    def _apply(
        self, request: Any, topic_ids: list[tuple[str, Any]], infos: list[PartitionInfo]
    ) -> list[TopicPartition]:
        """The delta: the live brokers are replaced, the partitions named are added, replaced
        or removed, every other partition stays as it is."""
        self.controller_epoch = request.controller_epoch
        self.controller_id = request.controller_id if request.controller_id >= 0 else None
        brokers = {}
        for broker in request.live_brokers:
            endpoints = {
                ep.listener: BrokerEndpoint(ep.listener, ep.host, ep.port, ep.security_protocol)
                for ep in broker.endpoints
            }
            brokers[broker.id] = MetadataBroker(broker.id, endpoints, broker.rack)
        self.alive_brokers = brokers
        for name, topic_id in topic_ids:
            self._set_topic_id(name, topic_id)
        deleted: list[TopicPartition] = []
        for info in infos:
            if self.update_partition(info):
                deleted.append(TopicPartition(info.topic, info.partition_index))
        for listener in self.update_listeners:
            listener()
        return deleted

    def update_partition(self, info: PartitionInfo) -> bool:
        """Add, replace or (leader -2) remove one partition; True if it was removed."""
        if info.leader == LEADER_DURING_DELETE:
            partitions = self.partition_states.get(info.topic)
            if partitions is None:
                return True
            if partitions.pop(info.partition_index, None) is not None:
                self._partition_count -= 1
                self.encoded.forget_partition(info.topic, info.partition_index)
            if not partitions:
                del self.partition_states[info.topic]
                self._all_topics = None
                self.encoded.forget_topic(info.topic)
                topic_id = self.topic_ids.pop(info.topic, None)
                if topic_id is not None:
                    self.topic_names.pop(topic_id, None)
            return True
        partitions = self.partition_states.get(info.topic)
        if partitions is None:
            partitions = self.partition_states[info.topic] = {}
            self._all_topics = None
        old = partitions.get(info.partition_index)
        if old is None:
            self._partition_count += 1
            self.encoded.forget_partition(info.topic, info.partition_index)
        elif (
            old.leader != info.leader
            or old.leader_epoch != info.leader_epoch
            or old.isr != info.isr
            or old.replicas != info.replicas
            or old.offline_replicas != info.offline_replicas
        ):
            self.encoded.forget_partition(info.topic, info.partition_index)
        partitions[info.partition_index] = info
        return False

    def set_alive_brokers(self, brokers: Iterable[MetadataBroker]) -> None:
        self.alive_brokers = {b.id: b for b in brokers}

    def record_topic_ids(self, topic_ids: Mapping[str, uuid.UUID]) -> None:
        for name, topic_id in topic_ids.items():
            if topic_id is not None and topic_id != ZERO_UUID:
                self._set_topic_id(name, topic_id)

    def _set_topic_id(self, name: str, topic_id: uuid.UUID) -> None:
        old = self.topic_ids.get(name)
        if old != topic_id:
            self.encoded.forget_topic_entry(name)  # the id is in the topic's encoded entry
        if old is not None and old != topic_id:
            self.topic_names.pop(old, None)
        self.topic_ids[name] = topic_id
        self.topic_names[topic_id] = name

    # -- queries ------------------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        return self.controller_id

    def get_alive_brokers(self) -> list[MetadataBroker]:
        return [self.alive_brokers[i] for i in sorted(self.alive_brokers)]

    def get_alive_broker(self, broker_id: int) -> MetadataBroker | None:
        return self.alive_brokers.get(broker_id)

    def has_alive_broker(self, broker_id: int) -> bool:
        return broker_id in self.alive_brokers

    def get_alive_broker_node(self, broker_id: int, listener: str) -> BrokerEndpoint | None:
        broker = self.alive_brokers.get(broker_id)
        return None if broker is None else broker.endpoint_for(listener)

    def get_alive_broker_nodes(self, listener: str) -> list[tuple[int, BrokerEndpoint, str | None]]:
        """(broker id, endpoint, rack) of the live brokers reachable on ``listener``."""
        out = []
        for broker in self.get_alive_brokers():
            endpoint = broker.endpoint_for(listener)
            if endpoint is not None:
                out.append((broker.id, endpoint, broker.rack))
        return out

    def get_all_topics(self) -> frozenset[str]:
        """Every topic known; the same frozen set until a topic comes or goes, so the many
        ``name in cache.get_all_topics()`` checks of an admin request cost O(1) each (a copy
        per call made a CreateTopics of N topics, polling until each has leaders, cost
        O(N x topics in the cluster))."""
        topics = self._all_topics
        if topics is None:
            topics = self._all_topics = frozenset(self.partition_states)
        return topics

    def contains_topic(self, topic: str) -> bool:
        return topic in self.partition_states

    def contains_partition(self, topic: str, partition: int) -> bool:
        return partition in self.partition_states.get(topic, {})

    def get_topic_id(self, topic: str) -> uuid.UUID | None:
        return self.topic_ids.get(topic)

    def get_topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_names.get(topic_id)

    def num_partitions(self, topic: str) -> int | None:
        partitions = self.partition_states.get(topic)
        return None if partitions is None else len(partitions)

    def partition_count(self) -> int:
        """Every partition of every topic known (O(1): max.partitions is checked against it for
        each topic a request creates)."""
        return self._partition_count

    def get_partition_info(self, topic: str, partition: int) -> PartitionInfo | None:
        return self.partition_states.get(topic, {}).get(partition)

    def get_partition_infos(self, topic: str) -> list[PartitionInfo]:
        partitions = self.partition_states.get(topic, {})
        return [partitions[i] for i in sorted(partitions)]

    def get_partition_leader_endpoint(
        self, topic: str, partition: int, listener: str
    ) -> BrokerEndpoint | None:
        info = self.get_partition_info(topic, partition)
        if info is None or info.leader < 0:
            return None
        return self.get_alive_broker_node(info.leader, listener)

    def partition_metadata(
        self,
        info: PartitionInfo,
        listener: str,
        error_unavailable_endpoints: bool = False,
        error_unavailable_listeners: bool = False,
    ) -> PartitionMetadata:
        alive = self.alive_brokers

        def reachable(ids: tuple[int, ...]) -> tuple[int, ...]:
            if not error_unavailable_endpoints:
                return ids
            return tuple(
                i for i in ids if i in alive and alive[i].endpoint_for(listener) is not None
            )

        replicas = reachable(info.replicas)
        isr = reachable(info.isr)
        leader = alive.get(info.leader) if info.leader != NO_LEADER else None
        if leader is None or leader.endpoint_for(listener) is None:
            if leader is not None and error_unavailable_listeners:
                error = ErrorCode.LISTENER_NOT_FOUND
            else:
                error = ErrorCode.LEADER_NOT_AVAILABLE
            return PartitionMetadata(
                error,
                info.partition_index,
                NO_LEADER,
                info.leader_epoch,
                replicas,
                isr,
                info.offline_replicas,
            )
        error = ErrorCode.NONE
        if error_unavailable_endpoints and (
            len(replicas) < len(info.replicas) or len(isr) < len(info.isr)
        ):
            error = ErrorCode.REPLICA_NOT_AVAILABLE
        return PartitionMetadata(
            error,
            info.partition_index,
            info.leader,
            info.leader_epoch,
            replicas,
            isr,
            info.offline_replicas,
        )

    def get_topic_metadata(
        self,
        topics: Iterable[str],
        listener: str,
        error_unavailable_endpoints: bool = False,
        error_unavailable_listeners: bool = False,
    ) -> list[TopicMetadata]:
        """Metadata for the ``topics`` this cache knows (unknown names are left out: the
        handler decides between auto-creation and UNKNOWN_TOPIC_OR_PARTITION)."""
        out = []
        for name in topics:
            if name not in self.partition_states:
                continue
            partitions = tuple(
                self.partition_metadata(
                    info, listener, error_unavailable_endpoints, error_unavailable_listeners
                )
                for info in self.get_partition_infos(name)
            )
            out.append(
                TopicMetadata(ErrorCode.NONE, name, self.topic_ids.get(name, ZERO_UUID), partitions)
            )
        return out

    def encoded_topics(
        self,
        topics: Iterable[str],
        listener: str,
        version: int,
        is_internal: Callable[[str], bool],
    ) -> list[tuple[str, uuid.UUID, bytes]]:
        """(name, topic id, encoded entry) of the ``topics`` this cache knows, in Metadata
        ``version``'s layout with its error rules, as ``get_topic_metadata`` states them
        (unknown names are left out). An entry is the MetadataResponseTopic's fields up to
        its partitions included (error 0, name, id, ``is_internal(name)``, the partitions
        array); it comes from the encoded partitions, so a known topic costs a lookup until
        one of its partitions or its id changes."""
        family, view, metadata = self._encoding(listener, version)
        encoded = self.encoded
        states = self.partition_states
        ids = self.topic_ids
        out = []
        for name in topics:
            partitions = states.get(name)
            if partitions is None:
                continue
            topic_id = ids.get(name, ZERO_UUID)
            entry = view.topics.get(name)
            if entry is None:
                entry = encoded.topic_entry(
                    view,
                    family,
                    encode_topic_head(name, topic_id, is_internal(name), family),
                    name,
                    partitions,
                    metadata,
                )
            out.append((name, topic_id, entry))
        return out

    def _encoding(self, listener: str, version: int) -> tuple[Family, View, Callable[[Any], Any]]:
        """For Metadata ``version`` on ``listener``: its family, the encoded view (emptied if
        the live brokers changed) and PartitionInfo -> PartitionMetadata with its error rules."""
        family = FAMILY_OF_VERSION[version]
        endpoints, listeners = family.endpoints, family.listeners
        view = self.encoded.view(listener, family, self.alive_brokers)
        return (
            family,
            view,
            lambda info: self.partition_metadata(info, listener, endpoints, listeners),
        )

    async def encode_in_slices(
        self, topics: Iterable[str], listener: str, version: int, slices: LoopSlices
    ) -> None:
        """The partitions ``encoded_topics`` would encode for ``topics`` (unknown names are
        skipped), encoded ahead in slices that yield to the loop: after thousands of
        partitions changed (a failover, a new controller's restatement) the first answer
        encoded them all in one callback. A partition is read, encoded and kept with no pause
        in between, and read again after each pause: an UpdateMetadata applied during one
        drops the entries it makes stale, as it always does, and ``encoded_topics``, called
        with no pause after this, encodes whatever is missing then."""
        family, view, metadata = self._encoding(listener, version)
        states = self.partition_states
        for name in topics:
            if name in view.topics:
                continue  # encoded already, every partition of it
            for index in list(states.get(name, ())):
                if slices.due():
                    await slices.pause()
                    family, view, metadata = self._encoding(listener, version)
                info = states.get(name, {}).get(index)
                if info is not None:  # not gone during a pause
                    self.encoded.ensure_partition(view, family, name, info, metadata)
