"""The leader's ISR write: the ``alter_isr`` callback of the ReplicaManager, ZooKeeper style.

``ZkIsrChangeWriter(session)(tp, leader_and_isr)`` writes the partition's proposal (with the
controller epoch of its last LeaderAndIsr) through ``zk.client.update_leader_and_isr``: the
partition state node with a compare-and-set on ``leader_and_isr.zk_version`` and an ISR change
notification, in one multi.

It returns the state node's new version, or None if the compare-and-set failed because the node
moved on (the caller stops acting as leader). Store errors propagate to the replica manager,
which drops the proposal and retries on a later ISR check.
"""

from __future__ import annotations

from kafkalite.broker.types import LeaderAndIsr
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import client as zk_client
from kafkalite.zk import types as zk_types


class ZkIsrChangeWriter:
    def __init__(self, session) -> None:
        self.session = session

    async def __call__(self, tp: TopicPartition, leader_and_isr: LeaderAndIsr) -> int | None:
        state = zk_types.LeaderIsrAndControllerEpoch(
            zk_types.LeaderAndIsr(
                leader_and_isr.leader,
                leader_and_isr.leader_epoch,
                tuple(leader_and_isr.isr),
                leader_and_isr.zk_version,
            ),
            leader_and_isr.controller_epoch,
        )
        return await zk_client.update_leader_and_isr(self.session, tp, state)
