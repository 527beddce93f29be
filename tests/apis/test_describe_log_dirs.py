"""DescribeLogDirs through the dispatcher, over fake log manager and replica manager."""

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkalite.apis.describe_log_dirs import offset_lag
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition


@dataclass
class FakeLog:
    dir: Path
    topic: str
    partition: int
    size_bytes: int
    log_end_offset: int
    high_watermark: int


@dataclass
class FakeLogManager:
    log_dirs: list
    logs: list
    offline_dirs: set = field(default_factory=set)

    def all_logs(self):
        return list(self.logs)


@dataclass
class FakePartition:
    log: object


@dataclass
class FakeReplicaManager:
    partitions: dict

    def online_partition(self, tp):
        return self.partitions.get(tp)


@pytest.fixture
def dirs(tmp_path, services):
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    for d in (a, b, c):
        d.mkdir()
    logs = [
        FakeLog(a / "t-0", "t", 0, 100, 10, 10),
        FakeLog(a / "u-1", "u", 1, 5, 3, 3),
        FakeLog(b / "t-1", "t", 1, 7, 12, 9),  # a follower: HW 9 behind its LEO 12, lag 0
        FakeLog(a / "gone-0", "gone", 0, 1, 1, 1),  # a log the replica manager does not host
    ]
    services.log_manager = FakeLogManager([str(a), str(b), str(c)], logs, {str(c)})
    services.replica_manager = FakeReplicaManager(
        {TopicPartition(log.topic, log.partition): FakePartition(log) for log in logs[:3]}
    )
    return str(a), str(b), str(c)


async def test_every_partition_of_every_dir(call, dirs):
    a, b, c = dirs
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

    response = await call(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None))
    assert response.error_code == ErrorCode.NONE
    by_dir = {r.log_dir: r for r in response.results}
    assert list(by_dir) == [a, b, c]
    assert by_dir[c].error_code == ErrorCode.KAFKA_STORAGE_ERROR and by_dir[c].topics == ()
    assert by_dir[c].total_bytes == -1
    ra = by_dir[a]
    assert ra.error_code == ErrorCode.NONE and ra.total_bytes >= ra.usable_bytes > 0
    got = {
        (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
        for t in ra.topics
        for p in t.partitions
    }
    assert got == {("t", 0): (100, 0, False), ("u", 1): (5, 0, False), ("gone", 0): (1, -1, False)}
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in by_dir[b].topics] == [
        ("t", [1])
    ]


async def test_requested_partitions_only_and_topics_listed_without_them(call, dirs):
    a, b, _ = dirs
    from kio.schema.describe_log_dirs.v1.request import (
        DescribableLogDirTopic,
        DescribeLogDirsRequest,
    )

    response = await call(
        ApiKey.DESCRIBE_LOG_DIRS,
        1,
        DescribeLogDirsRequest(
            topics=(
                DescribableLogDirTopic(topic="t", partitions=(0, 1, 7)),
                DescribableLogDirTopic(topic="nope", partitions=(0,)),
            )
        ),
    )
    by_dir = {r.log_dir: r for r in response.results}
    # as Kafka: the dir's topics are listed, partitions filtered (u and gone with none)
    assert {t.name: [p.partition_index for p in t.partitions] for t in by_dir[a].topics} == {
        "gone": [],
        "t": [0],
        "u": [],
    }
    assert {t.name: [p.partition_index for p in t.partitions] for t in by_dir[b].topics} == {
        "t": [1]
    }


def test_offset_lag_is_high_watermark_minus_log_end_offset_never_negative():
    log = FakeLog(Path("/x/t-0"), "t", 0, 0, log_end_offset=5, high_watermark=5)
    rm = FakeReplicaManager({TopicPartition("t", 0): FakePartition(log)})
    assert offset_lag(rm, TopicPartition("t", 0), 5) == 0
    assert offset_lag(rm, TopicPartition("t", 0), 3) == 2  # a log behind the partition's HW
    assert offset_lag(rm, TopicPartition("t", 0), 9) == 0
    assert offset_lag(rm, TopicPartition("t", 1), 5) == -1
    assert offset_lag(None, TopicPartition("t", 0), 5) == -1
