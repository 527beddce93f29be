"""The leader's ISR write: the ``alter_isr`` callback of the ReplicaManager, ZooKeeper style.

``ZkIsrChangeWriter(session)(tp, leader_and_isr)`` writes, in one multi-op:

1. ``/brokers/topics/<t>/partitions/<p>/state`` (Kafka's JSON, see zk/data.py) with a
   compare-and-set on ``leader_and_isr.zk_version``;
2. a sequential ``/isr_change_notification/isr_change_<seq>`` =
   ``{"version":1,"partitions":[...]}`` so the controller refreshes the metadata it sends to
   the brokers.

It returns the state node's new version, or None if the compare-and-set failed because the node
moved on (the controller elected another leader or changed the ISR: the caller stops acting as
leader). As Kafka's ``ReplicationUtils.updateLeaderAndIsr`` does, a version mismatch whose stored
data is exactly what we wrote counts as success: a write whose answer was lost (connection loss)
had in fact been applied, notification included, and its retry must not fence the leader. Other
store errors propagate to the replica manager, which drops the proposal and retries on a later
ISR check.
"""

from __future__ import annotations

from kafkalite.broker.types import LeaderAndIsr
from kafkalite.coord.base import CreateOp, SetDataOp, SetDataResult
from kafkalite.coord.errors import BadVersion, NoNode
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.data import (
    ISR_CHANGE_NOTIFICATION,
    PartitionState,
    decode_partition_state,
    encode_isr_change,
    encode_partition_state,
    isr_change_sequence_path,
    partition_state_path,
)


class ZkIsrChangeWriter:
    def __init__(self, session) -> None:
        self.session = session

    async def __call__(self, tp: TopicPartition, leader_and_isr: LeaderAndIsr) -> int | None:
        path = partition_state_path(tp.topic, tp.partition)
        state = PartitionState(
            leader=leader_and_isr.leader,
            leader_epoch=leader_and_isr.leader_epoch,
            isr=tuple(leader_and_isr.isr),
            controller_epoch=leader_and_isr.controller_epoch,
        )
        await self.session.ensure_path(ISR_CHANGE_NOTIFICATION)
        ops = [
            SetDataOp(path, encode_partition_state(state), leader_and_isr.zk_version),
            CreateOp(isr_change_sequence_path(), encode_isr_change([tp]), sequential=True),
        ]
        try:
            results = await self.session.multi(ops)
        except NoNode:
            return None
        except BadVersion:
            try:
                data, stat = await self.session.get_data(path)
            except NoNode:
                return None
            return stat.version if decode_partition_state(data) == state else None
        first = results[0]
        assert isinstance(first, SetDataResult)
        return first.stat.version
