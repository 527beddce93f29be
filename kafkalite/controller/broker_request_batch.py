"""ControllerBrokerRequestBatch: the controller-to-broker requests of one state change, as data.

Kafka's ``AbstractControllerBrokerRequestBatch`` (ControllerChannelManager.scala), without the
sending: the state machines add partition states per destination broker while they decide,
and ``build_requests`` turns what was added into one request per broker and kind, in Kafka's
order: LeaderAndIsr, then UpdateMetadata, then StopReplica. The channel manager sends them
through each broker's queue, so one broker receives them in this order.

Rules kept from Kafka:
- every LeaderAndIsr added for a partition also adds that partition to the UpdateMetadata sent
  to every live (or shutting-down) broker;
- a partition already added as new (``is_new``) stays new when added again in the batch;
- a StopReplica already marked ``delete_partition`` stays a delete;
- StopReplica's leader epoch is ``EPOCH_DURING_DELETE`` (-2) for a topic queued for deletion,
  which overrides any epoch the broker has; otherwise the current leader epoch (or -1);
- UpdateMetadata describes a partition of a topic queued for deletion with leader
  ``LEADER_DURING_DELETE`` (-2), so brokers stop serving it; a partition without leadership is
  left out (it has no leader yet);
- broker ids < 0 (NO_LEADER) are never destinations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import Broker, LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment

from .context import EPOCH_DURING_DELETE, NO_EPOCH, ControllerContext

# -- partition states (field names as in Kafka's JSON message schemas) -------------------------
#
# Plain slotted dataclasses, not frozen: a frozen one sets each field through
# ``object.__setattr__`` (3.2 µs for a LeaderAndIsr state against 1.1 µs), and a failover or a
# broker's failure at 10,000 partitions builds 20,000-33,000 of them. They are immutable by
# use: nothing assigns a field after construction (a changed state is a new one, made with
# ``dataclasses.replace``), since one state object is shared by the requests of every broker
# and by the batch's caches; they hash by content as before (``unsafe_hash``: the channel
# manager keys its built messages on them).


@dataclass(slots=True, unsafe_hash=True)
class LeaderAndIsrPartitionState:
    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    """The partition state node's version (``zk_version``)."""
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic_name, self.partition_index)


@dataclass(slots=True, unsafe_hash=True)
class UpdateMetadataPartitionState:
    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic_name, self.partition_index)


@dataclass(slots=True, unsafe_hash=True)
class StopReplicaPartitionState:
    topic_name: str
    partition_index: int
    leader_epoch: int
    delete_partition: bool

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic_name, self.partition_index)


# -- requests (one per destination broker) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequestData:
    broker_id: int
    """Destination."""
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    """The destination's broker epoch: a bounced broker rejects requests meant for its old self."""
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    topic_ids: dict[str, str]
    live_leaders: tuple[Broker, ...]
    """The live brokers that lead one of the partitions (followers need their endpoints)."""


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequestData:
    broker_id: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[Broker, ...]
    topic_ids: dict[str, str]


@dataclass(frozen=True, slots=True)
class StopReplicaRequestData:
    broker_id: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]

    @property
    def deletes_partitions(self) -> bool:
        return any(p.delete_partition for p in self.partition_states)


_SET_TYPES: tuple[type, ...] = (set, frozenset, type({}.keys()))

ControllerRequest = LeaderAndIsrRequestData | UpdateMetadataRequestData | StopReplicaRequestData


class ControllerBrokerRequestBatch:
    """Collects the requests of one state change; see the module docstring.

    ``new_batch`` must be called before adding (it fails loudly if the previous batch was not
    built), mirroring Kafka's ``newBatch`` / ``sendRequestsToBrokers`` pairing.
    """

    def __init__(self, controller_id: int, ctx: ControllerContext) -> None:
        self.controller_id = controller_id
        self.ctx = ctx
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        # What each partition's states were built from, so that adding the same partition for
        # another broker (the replica state machine adds one replica at a time: three times
        # per partition at RF 3) reuses them instead of building equal ones again.
        self._leader_and_isr_built: dict[TopicPartition, tuple[Any, ...]] = {}
        self._update_metadata_built: dict[TopicPartition, tuple[Any, ...]] = {}

    def is_empty(self) -> bool:
        return not (
            self._leader_and_isr
            or self._stop_replica
            or self._update_metadata_brokers
            or self._update_metadata_partitions
        )

    def new_batch(self) -> None:
        if not self.is_empty():
            raise RuntimeError(
                "controller to broker request batch is not empty while creating a new one: "
                f"leader_and_isr={self._leader_and_isr} stop_replica={self._stop_replica} "
                f"update_metadata={self._update_metadata_partitions}"
            )

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()
        self._leader_and_isr_built.clear()
        self._update_metadata_built.clear()

    # -- adding --

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        topic_partition: TopicPartition,
        leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        self.add_leader_and_isr_requests(
            ((broker_ids, topic_partition, leader_isr_and_controller_epoch, replica_assignment),),
            is_new,
        )

    def add_leader_and_isr_requests(
        self,
        items: Iterable[
            tuple[Iterable[int], TopicPartition, LeaderIsrAndControllerEpoch, ReplicaAssignment]
        ],
        is_new: bool,
    ) -> None:
        """``add_leader_and_isr_request_for_brokers(broker_ids, tp, leadership, assignment,
        is_new)`` for each item, in one pass: a state machine's change of thousands of
        partitions or replicas adds them with one call (the per-call set-up, 10,000s of times
        per failover or broker failure, was most of the cost). Each item's partition is added
        to the UpdateMetadata at the end of the pass; the items must not change the context
        in between (the state machines add after deciding each partition)."""
        built = self._leader_and_isr_built
        by_broker = self._leader_and_isr
        ctx = self.ctx
        leadership = ctx.partition_leadership_info
        assignments = ctx.partition_assignments
        um_built = self._update_metadata_built
        to_describe: list[TopicPartition] = []
        added = False
        for broker_ids, topic_partition, info, replica_assignment in items:
            added = True
            source = built.get(topic_partition)
            for broker_id in broker_ids:
                if broker_id < 0:
                    continue
                states = by_broker.get(broker_id)
                if states is None:
                    states = by_broker[broker_id] = {}
                previous = states.get(topic_partition)
                new = is_new or (previous is not None and previous.is_new)
                if (
                    source is not None
                    and source[0] is info
                    and source[1] is replica_assignment
                    and source[2].is_new is new
                ):
                    states[topic_partition] = source[2]
                    continue
                leader_and_isr = info.leader_and_isr
                # (positional: the fields' order, topic_name to is_new)
                state = states[topic_partition] = LeaderAndIsrPartitionState(
                    topic_partition[0],
                    topic_partition[1],
                    info.controller_epoch,
                    leader_and_isr.leader,
                    leader_and_isr.leader_epoch,
                    leader_and_isr.isr,
                    leader_and_isr.zk_version,
                    replica_assignment.replicas,
                    replica_assignment.adding_replicas,
                    replica_assignment.removing_replicas,
                    new,
                )
                source = built[topic_partition] = (info, replica_assignment, state)
            described = um_built.get(topic_partition)
            if described is not None and described[0] is leadership.get(topic_partition):
                topic = assignments.get(topic_partition[0])
                assignment = topic.get(topic_partition[1]) if topic is not None else None
                if assignment is not None and described[1] is assignment.replicas:
                    continue  # added already for another replica (see _add_update_metadata_...)
            to_describe.append(topic_partition)
        if not added:
            return
        live = ctx.live_broker_epochs
        brokers = self._update_metadata_brokers
        if len(brokers) < len(live) or not brokers.issuperset(live):
            brokers.update(b for b in live if b >= 0)
        if to_describe:
            self._add_update_metadata_partitions(to_describe)

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], topic_partition: TopicPartition, delete_partition: bool
    ) -> None:
        if self.ctx.is_topic_queued_up_for_deletion(topic_partition.topic):
            leader_epoch = EPOCH_DURING_DELETE
        else:
            info = self.ctx.partition_leadership_info.get(topic_partition)
            leader_epoch = info.leader_and_isr.leader_epoch if info is not None else NO_EPOCH
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            states = self._stop_replica.setdefault(broker_id, {})
            already_delete = topic_partition in states and states[topic_partition].delete_partition
            states[topic_partition] = StopReplicaPartitionState(
                topic_name=topic_partition.topic,
                partition_index=topic_partition.partition,
                leader_epoch=leader_epoch,
                delete_partition=already_delete or delete_partition,
            )

    def add_stop_replica_requests(
        self, broker_id: int, partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        """``add_stop_replica_request_for_brokers([broker_id], tp, delete_partition)`` for each
        of ``partitions``, in one pass (a broker's failure stops every replica it holds)."""
        if broker_id < 0:
            return
        ctx = self.ctx
        deleting = ctx.topics_to_be_deleted
        leadership = ctx.partition_leadership_info
        states = self._stop_replica.get(broker_id)
        if states is None:
            states = self._stop_replica[broker_id] = {}
        for tp in partitions:
            if tp[0] in deleting:
                leader_epoch = EPOCH_DURING_DELETE
            else:
                info = leadership.get(tp)
                leader_epoch = info.leader_and_isr.leader_epoch if info is not None else NO_EPOCH
            previous = states.get(tp)
            states[tp] = StopReplicaPartitionState(
                tp[0],
                tp[1],
                leader_epoch,
                delete_partition or (previous is not None and previous.delete_partition),
            )

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        brokers = self._update_metadata_brokers
        if type(broker_ids) in _SET_TYPES:  # (an ABC isinstance costs more than the rest)
            if not brokers.issuperset(broker_ids):
                brokers.update(b for b in broker_ids if b >= 0)
        else:
            brokers.update(b for b in broker_ids if b >= 0)
        self._add_update_metadata_partitions(partitions)

    def _add_update_metadata_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        ctx = self.ctx
        leadership = ctx.partition_leadership_info
        built = self._update_metadata_built
        live = ctx.live_broker_epochs
        assignments = ctx.partition_assignments
        # Without brokers shutting down or offline log dirs, a replica is online when its
        # broker is live (this runs once per partition per event: 10,000 at a failover).
        plain = not ctx.shutting_down_broker_ids and not ctx.replicas_on_offline_dirs
        deleted_topics = ctx.topics_to_be_deleted
        states = self._update_metadata_partitions
        # (plain) the offline replicas of each distinct assignment: a broker's failure makes
        # every partition it holds name it
        offline_of: dict[tuple[int, ...], tuple[int, ...]] = {}
        for tp in partitions:
            info = leadership.get(tp)
            if info is None:
                continue  # leader not yet assigned: nothing to tell
            topic = assignments.get(tp[0])
            assignment = topic.get(tp[1]) if topic is not None else None
            replicas = assignment.replicas if assignment is not None else ()
            source = built.get(tp)
            if source is not None and source[0] is info and source[1] is replicas:
                # Added before from the same leadership and replicas: the rest (liveness,
                # deletion) does not change while a batch is open (a state machine's call).
                continue
            deleting = tp[0] in deleted_topics
            if plain:
                offline: tuple[int, ...] = ()
                for r in replicas:
                    if r not in live:
                        known = offline_of.get(replicas)
                        if known is None:
                            known = offline_of[replicas] = tuple(
                                x for x in replicas if x not in live
                            )
                        offline = known
                        break
            else:
                offline = tuple(r for r in replicas if not ctx.is_replica_online(r, tp))
            built[tp] = (info, replicas, deleting, offline)
            leader_and_isr = info.leader_and_isr
            if deleting:
                leader_and_isr = LeaderAndIsr.during_delete(leader_and_isr.isr)
            # (positional: the fields' order, topic_name to offline_replicas)
            states[tp] = UpdateMetadataPartitionState(
                tp[0],
                tp[1],
                info.controller_epoch,
                leader_and_isr.leader,
                leader_and_isr.leader_epoch,
                leader_and_isr.isr,
                leader_and_isr.zk_version,
                replicas,
                offline,
            )

    # -- building --

    def build_requests(self, controller_epoch: int) -> list[ControllerRequest]:
        """The requests collected so far, in sending order; empties the batch."""
        ctx = self.ctx
        requests: list[ControllerRequest] = []
        for broker_id in sorted(self._leader_and_isr):
            states = self._leader_and_isr[broker_id]
            if not states:
                continue
            leader_ids = {s.leader for s in states.values()}
            live_leaders = tuple(b for b in ctx.live_or_shutting_down_brokers if b.id in leader_ids)
            requests.append(
                LeaderAndIsrRequestData(
                    broker_id=broker_id,
                    controller_id=self.controller_id,
                    controller_epoch=controller_epoch,
                    broker_epoch=ctx.live_broker_epochs.get(broker_id, -1),
                    partition_states=tuple(states[tp] for tp in sorted(states)),
                    topic_ids={
                        tp.topic: ctx.topic_ids[tp.topic]
                        for tp in states
                        if tp.topic in ctx.topic_ids
                    },
                    live_leaders=live_leaders,
                )
            )
        if self._update_metadata_brokers:
            partition_states = tuple(
                self._update_metadata_partitions[tp]
                for tp in sorted(self._update_metadata_partitions)
            )
            live_brokers = tuple(ctx.live_or_shutting_down_brokers)
            topic_ids = {
                s.topic_name: ctx.topic_ids[s.topic_name]
                for s in partition_states
                if s.topic_name in ctx.topic_ids
            }
            for broker_id in sorted(self._update_metadata_brokers):
                requests.append(
                    UpdateMetadataRequestData(
                        broker_id=broker_id,
                        controller_id=self.controller_id,
                        controller_epoch=controller_epoch,
                        broker_epoch=ctx.live_broker_epochs.get(broker_id, -1),
                        partition_states=partition_states,
                        live_brokers=live_brokers,
                        topic_ids=topic_ids,
                    )
                )
        for broker_id in sorted(self._stop_replica):
            states = self._stop_replica[broker_id]
            if not states:
                continue
            requests.append(
                StopReplicaRequestData(
                    broker_id=broker_id,
                    controller_id=self.controller_id,
                    controller_epoch=controller_epoch,
                    broker_epoch=ctx.live_broker_epochs.get(broker_id, -1),
                    partition_states=tuple(states[tp] for tp in sorted(states)),
                )
            )
        self.clear()
        return requests


def update_metadata_requests(
    ctx: ControllerContext,
    controller_id: int,
    broker_ids: Iterable[int],
    partitions: Iterable[TopicPartition] = (),
) -> list[ControllerRequest]:
    """One UpdateMetadata per broker in ``broker_ids`` with the live brokers and the states of
    ``partitions`` (Kafka's ``KafkaController.sendUpdateMetadataRequest``)."""
    batch = ControllerBrokerRequestBatch(controller_id, ctx)
    batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
    return batch.build_requests(ctx.epoch)


def coalesce_requests(requests: Iterable[ControllerRequest]) -> list[ControllerRequest]:
    """One LeaderAndIsr and one UpdateMetadata per broker for the requests of one controller
    event (Kafka's ``AbstractControllerBrokerRequestBatch`` spans the event's state changes):
    an event touching thousands of partitions in several steps (elect, then shrink ISRs, then
    tell every broker) sends each broker one request of each kind instead of one per step.

    Per broker the LeaderAndIsr partition states are merged in order (a later state of a
    partition replaces an earlier one; ``is_new`` stays set, as in ``add_leader_and_isr_...``),
    likewise the UpdateMetadata states (the live brokers of the last one win); the LeaderAndIsr
    goes first, as in a batch. A broker the event also stops replicas on gets its requests as
    they are, in order: its StopReplica must keep its place between the LeaderAndIsr requests
    around it. That holds per broker only (each broker's channel is ordered on its own), so
    the other brokers' requests are coalesced all the same: a failover stops the replicas of
    the dead brokers (requests the channels drop), and the live brokers must not get three
    LeaderAndIsr of every partition in turn because of it."""
    requests = list(requests)
    stopping = {r.broker_id for r in requests if isinstance(r, StopReplicaRequestData)}
    leader_and_isr: dict[int, list[LeaderAndIsrRequestData]] = {}
    update_metadata: dict[int, list[UpdateMetadataRequestData]] = {}
    as_they_are: dict[int, list[ControllerRequest]] = {}
    order: list[int] = []
    seen: set[int] = set()
    for request in requests:
        broker_id = request.broker_id
        if broker_id not in seen:
            seen.add(broker_id)
            order.append(broker_id)
        if broker_id in stopping:
            as_they_are.setdefault(broker_id, []).append(request)
        elif isinstance(request, LeaderAndIsrRequestData):
            leader_and_isr.setdefault(broker_id, []).append(request)
        elif isinstance(request, UpdateMetadataRequestData):
            update_metadata.setdefault(broker_id, []).append(request)
    out: list[ControllerRequest] = []
    # Every broker's UpdateMetadata of one step share their states tuple: merged once for all.
    merged: dict[tuple[int, ...], UpdateMetadataRequestData] = {}
    for broker_id in order:
        if broker_id in stopping:
            out.extend(as_they_are[broker_id])
            continue
        if broker_id in leader_and_isr:
            out.append(_merge_leader_and_isr(leader_and_isr[broker_id]))
        if broker_id in update_metadata:
            parts = update_metadata[broker_id]
            # (the requests are alive, so their ids stay unique while this runs)
            key = tuple(x for r in parts for x in (id(r.partition_states), id(r.topic_ids)))
            same = merged.get(key)
            if same is not None and len(parts) > 1:
                request = replace(
                    parts[-1], partition_states=same.partition_states, topic_ids=same.topic_ids
                )
            else:
                request = merged[key] = _merge_update_metadata(parts)
            out.append(request)
    return out


def announced_versions(requests: Iterable[ControllerRequest]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the newest partition state version (zk version) that
    LeaderAndIsr or UpdateMetadata ``requests`` carry."""
    out: dict[tuple[str, int], int] = {}
    for request in requests:
        if isinstance(request, LeaderAndIsrRequestData):
            for s in request.partition_states:
                key = (s.topic_name, s.partition_index)
                if out.get(key, -1) < s.partition_epoch:
                    out[key] = s.partition_epoch
        elif isinstance(request, UpdateMetadataRequestData):
            for u in request.partition_states:
                key = (u.topic_name, u.partition_index)
                if out.get(key, -1) < u.zk_version:
                    out[key] = u.zk_version
    return out


def without_announced(
    requests: Iterable[ControllerRequest], announced: dict[tuple[str, int], int]
) -> list[ControllerRequest]:
    """``requests`` without the LeaderAndIsr and UpdateMetadata states that are not newer
    than the ``announced`` version of their partition (``announced_versions`` of the requests
    sent first): a broker must not get an older state of a partition after a newer one, and
    needs no second copy of the same. Requests left empty are dropped, except an
    UpdateMetadata (it also carries the live brokers)."""
    if not announced:
        return list(requests)
    out: list[ControllerRequest] = []
    for request in requests:
        if isinstance(request, LeaderAndIsrRequestData):
            lai_kept = tuple(
                s
                for s in request.partition_states
                if announced.get((s.topic_name, s.partition_index), -1) < s.partition_epoch
            )
            if len(lai_kept) == len(request.partition_states):
                out.append(request)
            elif lai_kept:
                out.append(replace(request, partition_states=lai_kept))
        elif isinstance(request, UpdateMetadataRequestData):
            um_kept = tuple(
                u
                for u in request.partition_states
                if announced.get((u.topic_name, u.partition_index), -1) < u.zk_version
            )
            if len(um_kept) == len(request.partition_states):
                out.append(request)
            else:
                out.append(replace(request, partition_states=um_kept))
        else:
            out.append(request)
    return out


def _merge_leader_and_isr(requests: list[LeaderAndIsrRequestData]) -> LeaderAndIsrRequestData:
    if len(requests) == 1:
        return requests[0]
    # keyed by (topic, partition): TopicPartition's order, without building one per state
    states: dict[tuple[str, int], LeaderAndIsrPartitionState] = {}
    topic_ids: dict[str, str] = {}
    leaders: dict[int, Broker] = {}
    for request in requests:
        for state in request.partition_states:
            tp = (state.topic_name, state.partition_index)
            previous = states.get(tp)
            if previous is not None and previous.is_new and not state.is_new:
                state = replace(state, is_new=True)
            states[tp] = state
        topic_ids.update(request.topic_ids)
        leaders.update((b.id, b) for b in request.live_leaders)
    last = requests[-1]
    leader_ids = {s.leader for s in states.values()}
    topics = {tp[0] for tp in states}
    return replace(
        last,
        partition_states=tuple(states[tp] for tp in sorted(states)),
        topic_ids={t: i for t, i in topic_ids.items() if t in topics},
        live_leaders=tuple(leaders[b] for b in sorted(leaders) if b in leader_ids),
    )


def _merge_update_metadata(
    requests: list[UpdateMetadataRequestData],
) -> UpdateMetadataRequestData:
    if len(requests) == 1:
        return requests[0]
    states: dict[tuple[str, int], UpdateMetadataPartitionState] = {}
    topic_ids: dict[str, str] = {}
    for request in requests:
        # keyed by (topic, partition): TopicPartition's order, without building one per state
        states.update(((s.topic_name, s.partition_index), s) for s in request.partition_states)
        topic_ids.update(request.topic_ids)
    return replace(
        requests[-1],
        partition_states=tuple(states[tp] for tp in sorted(states)),
        topic_ids=topic_ids,
    )


def without_partitions(
    requests: Iterable[ControllerRequest], partitions: set[TopicPartition]
) -> list[ControllerRequest]:
    """``requests`` with no state of ``partitions`` (whose store writes failed: persist before
    announce); LeaderAndIsr and StopReplica requests left empty are dropped, an UpdateMetadata
    is kept (it also carries the live brokers)."""
    if not partitions:
        return list(requests)
    out: list[ControllerRequest] = []
    for request in requests:
        # (a TopicPartition equals, and hashes as, the plain tuple)
        kept = tuple(
            s
            for s in request.partition_states
            if (s.topic_name, s.partition_index) not in partitions
        )
        if len(kept) == len(request.partition_states):
            out.append(request)
        elif kept or isinstance(request, UpdateMetadataRequestData):
            # [arg-type]: kept holds states of the request's own kind, which the checker cannot
            # pair with the request across the union of the three kinds
            out.append(replace(request, partition_states=kept))  # type: ignore[arg-type]
    return out
