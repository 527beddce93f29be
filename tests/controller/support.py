"""Test helpers for the pure controller: brokers, a store model that applies ControllerResult
writes with ZooKeeper's version rules, and a request log."""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalite.controller.broker_request_batch import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from kafkalite.controller.controller_core import ControllerCore
from kafkalite.controller.results import ControllerResult
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import Broker, EndPoint, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kafkalite.zk.writes import (
    CreatePartitionState,
    DeleteIsrChangeNotifications,
    DeleteLogDirEventNotifications,
    DeleteTopic,
    DeleteTopicDeletions,
    SetTopicAssignment,
    UpdatePartitionState,
    UpdateReassignPartitions,
)


def broker(broker_id: int, rack: str | None = None) -> Broker:
    return Broker(broker_id, (EndPoint("127.0.0.1", 9092 + broker_id),), rack)


class CasFailure(AssertionError):
    pass


@dataclass
class StoreModel:
    """What the writes do to the znodes the controller owns, with compare-and-set checks."""

    partition_states: dict[TopicPartition, tuple[LeaderIsrAndControllerEpoch, int]] = field(
        default_factory=dict
    )
    topics: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    delete_markers: set[str] = field(default_factory=set)
    isr_notifications: set[str] = field(default_factory=set)
    log_dir_events: set[str] = field(default_factory=set)
    reassignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    def apply(self, result: ControllerResult) -> None:
        for write in result.writes:
            match write:
                case CreatePartitionState(tp, info):
                    if tp in self.partition_states:
                        raise CasFailure(f"NodeExists {tp}")
                    self.partition_states[tp] = (info, 0)
                case UpdatePartitionState(tp, info, expected):
                    if tp not in self.partition_states:
                        raise CasFailure(f"NoNode {tp}")
                    _, version = self.partition_states[tp]
                    if version != expected:
                        raise CasFailure(f"BadVersion {tp}: {version} != {expected}")
                    self.partition_states[tp] = (info, version + 1)
                case DeleteTopic(topic):
                    self.topics.pop(topic, None)
                    for tp in [tp for tp in self.partition_states if tp.topic == topic]:
                        del self.partition_states[tp]
                    self.delete_markers.discard(topic)
                case DeleteTopicDeletions(topics):
                    self.delete_markers -= set(topics)
                case SetTopicAssignment(topic, _, assignment):
                    self.topics[topic] = dict(assignment)
                case DeleteIsrChangeNotifications(seqs):
                    self.isr_notifications -= set(seqs)
                case DeleteLogDirEventNotifications(seqs):
                    self.log_dir_events -= set(seqs)
                case UpdateReassignPartitions(remaining):
                    self.reassignments = dict(remaining)
                case _:
                    raise AssertionError(f"unknown write {write}")

    def assert_matches(self, core: ControllerCore) -> None:
        """The context's leadership (versions included) is what the store holds."""
        ctx = core.ctx
        for topic, assignment in self.topics.items():
            for p, a in assignment.items():
                assert ctx.partition_full_replica_assignment(TopicPartition(topic, p)) == a, (
                    topic,
                    p,
                )
        for tp, info in ctx.partition_leadership_info.items():
            stored, version = self.partition_states[tp]
            assert stored.leader_and_isr.leader == info.leader_and_isr.leader, tp
            assert stored.leader_and_isr.isr == info.leader_and_isr.isr, tp
            assert stored.leader_and_isr.leader_epoch == info.leader_and_isr.leader_epoch, tp
            assert version == info.leader_and_isr.zk_version, tp


def requests_of(result: ControllerResult, kind: type, broker_id: int | None = None) -> list:
    """The result's requests of ``kind`` in sending order: its elections' first."""
    return [
        r
        for r in (*result.first_requests, *result.requests)
        if isinstance(r, kind) and (broker_id is None or r.broker_id == broker_id)
    ]


def leader_and_isr_states(result: ControllerResult, broker_id: int | None = None) -> dict:
    """(broker, TopicPartition) -> the last LeaderAndIsr partition state sent."""
    states = {}
    for request in requests_of(result, LeaderAndIsrRequestData, broker_id):
        for s in request.partition_states:
            states[(request.broker_id, s.topic_partition)] = s
    return states


def stop_replica_states(result: ControllerResult, broker_id: int | None = None) -> dict:
    states = {}
    for request in requests_of(result, StopReplicaRequestData, broker_id):
        for s in request.partition_states:
            states[(request.broker_id, s.topic_partition)] = s
    return states


def update_metadata_brokers(result: ControllerResult) -> set[int]:
    return {r.broker_id for r in requests_of(result, UpdateMetadataRequestData)}


def new_cluster(broker_ids, epoch: int = 1, **kwargs) -> tuple[ControllerCore, StoreModel]:
    """An elected controller over ``broker_ids`` with no topics, its failover done."""
    core = ControllerCore(broker_ids[0] if broker_ids else 0, **kwargs)
    core.ctx.epoch = epoch
    core.ctx.add_live_brokers([(broker(b), 100 + b) for b in broker_ids])
    store = StoreModel()
    store.apply(core.on_controller_failover([]))
    return core, store


def create_topic(
    core: ControllerCore,
    store: StoreModel,
    topic: str,
    assignment: dict[int, list[int]],
    apply: bool = True,
) -> ControllerResult:
    full = {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()}
    store.topics[topic] = full
    result = core.process_topic_change(set(store.topics), {topic: (f"id-{topic}", full)})
    if apply:
        store.apply(result)
    return result
