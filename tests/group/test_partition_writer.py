"""ReplicaManagerLogWriter: the coordinator on the real ReplicaManager and on-disk logs. Offsets
and groups written to __consumer_offsets survive a broker restart (logs reopened from disk)."""

from __future__ import annotations

import os

from kafkalite.broker.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.broker.types import LeaderAndIsrPartitionState
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME, GroupConfig, OffsetConfig
from kafkalite.group.coordinator import GroupCoordinator
from kafkalite.group.metadata import GroupState, OffsetAndMetadata
from kafkalite.group.partition_writer import ReplicaManagerLogWriter
from kafkalite.group.records import OffsetCommitKey, decode_record
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batches
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log

from .support import ManualTime, form_group

PARTITIONS = 2
TP = TopicPartition("orders", 3)


class DirLogManager:
    """The LogManager calls ReplicaManager makes, over real Log objects in one directory."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.logs: dict[tuple[str, int], Log] = {}
        self.log_dir_failure_listeners: list = []
        self.partition_failure_listeners: list = []

    def get_log(self, topic, partition):
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic, partition, config=None, is_new=True):
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = Log(
                os.path.join(self.root, f"{topic}-{partition}"), config or LogConfig()
            )
        return self.logs[key]

    async def create_logs(self, specs, batch_size=500):
        for topic, partition, config, is_new in specs:
            self.get_or_create_log(topic, partition, config, is_new)
        return {}

    def is_missing(self, topic, partition):
        return False

    def delete_log(self, topic, partition, *, remove_files=True):
        return self.logs.pop((topic, partition), None)

    async def delete_logs(self, keys, batch_size=500):
        for topic, partition in keys:
            self.delete_log(topic, partition)

    def close(self):
        for log in self.logs.values():
            log.close()
        self.logs.clear()


async def make_broker(
    root: str, time: ManualTime, epoch: int
) -> tuple[ReplicaManager, DirLogManager, GroupCoordinator]:
    logs = DirLogManager(root)
    rm = ReplicaManager(1, logs, ReplicaManagerConfig(), time)
    states = [
        LeaderAndIsrPartitionState(GROUP_METADATA_TOPIC_NAME, p, 1, 1, epoch, (1,), 0, (1,))
        for p in range(PARTITIONS)
    ]
    result = await rm.become_leader_or_follower_async(0, 1, states)
    assert set(result.partition_errors.values()) == {ErrorCode.NONE}
    offset_config = OffsetConfig(offsets_topic_num_partitions=PARTITIONS)
    coordinator = GroupCoordinator(
        1, ReplicaManagerLogWriter(rm, offset_config, time), GroupConfig(), offset_config, time
    )
    coordinator.startup()
    return rm, logs, coordinator


async def test_offsets_and_groups_survive_a_restart(tmp_path):
    time = ManualTime()
    rm, logs, c = await make_broker(str(tmp_path), time, epoch=0)
    for p in range(PARTITIONS):
        await c.on_election(p, 0)
    ids, generation, leader = await form_group(c, time, "g", 2)
    assert await c.commit_offsets(
        "g", ids[0], None, generation, {TP: OffsetAndMetadata(100, 4, "from-g")}
    ) == {TP: ErrorCode.NONE}
    assert await c.commit_offsets("tool", "", None, -1, {TP: OffsetAndMetadata(5)}) == {
        TP: ErrorCode.NONE
    }

    # the topic holds Kafka-format records a Kafka tool could read
    log = logs.get_log(GROUP_METADATA_TOPIC_NAME, c.partition_for("g"))
    data = log.read(0, 1 << 20).records
    keys = [
        decode_record(r.key, r.value)[0]
        for _, records in iter_batches(bytes(data.view()))
        for r in records
    ]
    assert OffsetCommitKey("g", "orders", 3) in keys

    await c.shutdown()
    await rm.shutdown()
    logs.close()

    # a new broker process: logs reopened from disk, leadership at a newer epoch
    rm2, logs2, c2 = await make_broker(str(tmp_path), time, epoch=1)
    for p in range(PARTITIONS):
        await c2.on_election(p, 1)
    group = c2.core.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == generation
    assert set(group.members) == set(ids) and group.leader_id == leader
    fetched = c2.fetch_offsets("g", [TP])[1][TP]
    assert (fetched.offset, fetched.leader_epoch, fetched.metadata) == (100, 4, "from-g")
    assert c2.fetch_offsets("tool", [TP])[1][TP].offset == 5
    # and the group carries on: a member rejoins, commits land after the loaded records
    assert await c2.heartbeat("g", ids[0], None, generation) is ErrorCode.NONE
    assert await c2.commit_offsets("g", ids[0], None, generation, {TP: OffsetAndMetadata(101)}) == {
        TP: ErrorCode.NONE
    }
    await c2.shutdown()
    await rm2.shutdown()
    logs2.close()


async def test_not_leader_means_not_coordinator(tmp_path):
    time = ManualTime()
    rm, logs, c = await make_broker(str(tmp_path), time, epoch=0)
    for p in range(PARTITIONS):
        await c.on_election(p, 0)
    # the replica manager loses the partition, but the coordinator was not told yet
    rm.partitions.pop(TopicPartition(GROUP_METADATA_TOPIC_NAME, c.partition_for("g")))
    result = await c.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(1)})
    assert result[TP] in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert c.fetch_offsets("g", [TP])[1][TP].offset == -1
    await c.shutdown()
    await rm.shutdown()
    logs.close()
