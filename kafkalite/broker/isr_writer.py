"""The leader's ISR write: the ``alter_isr`` callback of the ReplicaManager, ZooKeeper style.

``ZkIsrChangeWriter(session)(tp, leader_and_isr)``:

1. writes ``/brokers/topics/<t>/partitions/<p>/state`` (Kafka's JSON, see coord/paths.py) with
   a compare-and-set on ``leader_and_isr.zk_version``;
2. on success announces the change with a sequential node
   ``/isr_change_notification/isr_change_<seq>`` = ``{"version":1,"partitions":[...]}`` so the
   controller refreshes the metadata it sends to the brokers;
3. returns the node's new version, or None if the compare-and-set failed because the node
   moved on (the controller elected another leader or changed the ISR: the caller stops acting
   as leader). As Kafka's ``ReplicationUtils.updateLeaderAndIsr`` does, a version mismatch whose
   stored data is exactly what we wrote (a retried write that had in fact succeeded) counts as
   success.

Notifications that could not be written (connection loss after the CAS) are kept and written
with the next change or by ``flush_pending_notifications``. Other store errors propagate to the
replica manager, which drops the proposal and retries on a later ISR check.
"""

from __future__ import annotations

from kafkalite.broker.types import LeaderAndIsr
from kafkalite.coord.errors import BadVersion, CoordError, NoNode
from kafkalite.coord.paths import (
    PartitionState,
    decode_partition_state,
    encode_isr_change,
    encode_partition_state,
    isr_change_sequence_path,
    partition_state_path,
)
from kafkalite.protocol.types import TopicPartition


class ZkIsrChangeWriter:
    def __init__(self, session) -> None:
        self.session = session
        self.pending_notifications: set[TopicPartition] = set()

    async def __call__(self, tp: TopicPartition, leader_and_isr: LeaderAndIsr) -> int | None:
        path = partition_state_path(tp.topic, tp.partition)
        state = PartitionState(
            leader=leader_and_isr.leader,
            leader_epoch=leader_and_isr.leader_epoch,
            isr=tuple(leader_and_isr.isr),
            controller_epoch=leader_and_isr.controller_epoch,
        )
        try:
            stat = await self.session.set_data(
                path, encode_partition_state(state), leader_and_isr.zk_version
            )
            version = stat.version
        except NoNode:
            return None
        except BadVersion:
            try:
                data, stat = await self.session.get_data(path)
            except NoNode:
                return None
            if decode_partition_state(data) != state:
                return None
            version = stat.version
        self.pending_notifications.add(tp)
        await self.flush_pending_notifications()
        return version

    async def flush_pending_notifications(self) -> bool:
        """Write one notification for every partition changed since the last one written."""
        if not self.pending_notifications:
            return True
        partitions = set(self.pending_notifications)
        try:
            await self.session.create(
                isr_change_sequence_path(),
                encode_isr_change(partitions),
                sequential=True,
                makepath=True,
            )
        except CoordError:
            return False
        self.pending_notifications -= partitions
        return True
