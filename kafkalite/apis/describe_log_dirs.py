"""DescribeLogDirs (key 35, v1-v4): this broker's log directories and the partitions in them.

As Kafka's ``ReplicaManager.describeLogDirs``: one result per configured log dir (absolute
path). An offline dir is answered KAFKA_STORAGE_ERROR with no topics (and total/usable bytes
left at -1); an online one lists, per topic that has a log in it, the requested partitions
(``topics`` null: every log) with their size in bytes, ``offset_lag`` and ``is_future_key``.

- ``offset_lag`` is Kafka's ``getLogEndOffsetLag`` for a current (non-future) log:
  ``max(high_watermark - log_end_offset, 0)``, so 0 for leaders and for followers whose HW
  trails their LEO; -1 when the replica manager does not host the partition online.
  kafkalite has no future logs (AlterReplicaLogDirs), so ``is_future_key`` is always false.
- A topic with a log in the dir is listed even when none of its partitions was requested (its
  partition list is then empty): Kafka groups the dir's logs by topic before filtering.
- v4 adds ``total_bytes`` / ``usable_bytes`` of the dir's file system (Java's
  ``FileStore.getTotalSpace`` / ``getUsableSpace``: ``f_blocks`` / ``f_bavail`` times the
  fragment size). v3 adds the top-level ``error_code`` (always NONE: no authorizer).
- Partitions this broker has no log for are simply absent, as in Kafka.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

INVALID_OFFSET_LAG = -1
"""Kafka's ``DescribeLogDirsResponse.INVALID_OFFSET_LAG``: the replica is not online."""
LONG_MAX = (1 << 63) - 1


@handles(ApiKey.DESCRIBE_LOG_DIRS)
def handle_describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    requested: set[TopicPartition] | None = None
    if request.topics is not None:
        requested = {TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions}
    return ctx.response(
        throttle_time=0,
        error_code=ErrorCode.NONE,
        results=describe_log_dirs(
            ctx.services.log_manager, ctx.services.replica_manager, requested
        ),
    )


def describe_log_dirs(
    log_manager: Any, replica_manager: Any, requested: set[TopicPartition] | None
) -> list[dict[str, Any]]:
    """The ``results`` of a DescribeLogDirs response (``requested`` None: every partition)."""
    by_dir: dict[str, list[Any]] = {}
    for log in log_manager.all_logs():
        by_dir.setdefault(str(log.dir.parent), []).append(log)
    results = []
    for log_dir in log_manager.log_dirs:
        if log_dir in log_manager.offline_dirs:
            results.append(
                {"log_dir": log_dir, "error_code": ErrorCode.KAFKA_STORAGE_ERROR, "topics": []}
            )
            continue
        try:
            total_bytes, usable_bytes = file_system_space(log_dir)
        except OSError:
            results.append(
                {"log_dir": log_dir, "error_code": ErrorCode.KAFKA_STORAGE_ERROR, "topics": []}
            )
            continue
        results.append(
            {
                "log_dir": log_dir,
                "error_code": ErrorCode.NONE,
                "topics": _topics(by_dir.get(log_dir, ()), replica_manager, requested),
                "total_bytes": total_bytes,
                "usable_bytes": usable_bytes,
            }
        )
    return results


def _topics(
    logs: Iterable[Any], replica_manager: Any, requested: set[TopicPartition] | None
) -> list[dict[str, Any]]:
    by_topic: dict[str, list[Any]] = {}
    for log in logs:
        by_topic.setdefault(log.topic, []).append(log)
    topics = []
    for topic, topic_logs in sorted(by_topic.items()):
        partitions = []
        for log in sorted(topic_logs, key=lambda entry: entry.partition):
            tp = TopicPartition(topic, log.partition)
            if requested is not None and tp not in requested:
                continue
            partitions.append(
                {
                    "partition_index": log.partition,
                    "partition_size": log.size_bytes,
                    "offset_lag": offset_lag(replica_manager, tp, log.log_end_offset),
                    "is_future_key": False,
                }
            )
        topics.append({"name": topic, "partitions": partitions})
    return topics


def offset_lag(replica_manager: Any, tp: TopicPartition, log_end_offset: int) -> int:
    """Kafka's ``getLogEndOffsetLag`` for a current log: how far the partition's high
    watermark is ahead of this log's end (never negative); -1 if not hosted online."""
    partition = replica_manager.online_partition(tp) if replica_manager is not None else None
    log = partition.log if partition is not None else None
    if log is None:
        return INVALID_OFFSET_LAG
    return max(log.high_watermark - log_end_offset, 0)


def file_system_space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``; Long.MAX_VALUE for a size
    that overflows a long, as Kafka's ``adjustForLargeFileSystems``."""
    stat = os.statvfs(path)
    total = stat.f_blocks * stat.f_frsize
    usable = stat.f_bavail * stat.f_frsize
    return min(total, LONG_MAX), min(usable, LONG_MAX)
