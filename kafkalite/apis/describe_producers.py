"""DescribeProducers (key 61, v0, KIP-664): the active producers of partitions led here (the
idempotent and transactional producer state: epoch, last sequence and timestamp, coordinator
epoch, first offset of the open transaction or -1). As Kafka: an illegal topic name answers
INVALID_TOPIC_EXCEPTION, a partition not led here NOT_LEADER_OR_FOLLOWER, an unknown one
UNKNOWN_TOPIC_OR_PARTITION. With an authorizer, a topic the principal may not READ is answered
TOPIC_AUTHORIZATION_FAILED before any of these but the first (apis/authorization.py)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.topic_names import invalid_topic_reason
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.DESCRIBE_PRODUCERS)
def handle_describe_producers(ctx: RequestContext, request: Any) -> Any:
    replica_manager = ctx.services.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        invalid = invalid_topic_reason(topic.name)
        for index in topic.partition_indexes:
            if invalid is not None:
                partitions.append(
                    {
                        "partition_index": index,
                        "error_code": ErrorCode.INVALID_TOPIC_EXCEPTION,
                        "error_message": invalid,
                    }
                )
                continue
            tp = TopicPartition(topic.name, index)
            try:
                partition = replica_manager.get_partition_or_raise(tp)
                partition.leader_log_or_raise()
            except KafkaError as e:
                partitions.append({"partition_index": index, "error_code": e.error_code})
                continue
            state = partition.producer_state
            producers = []
            for entry in (state.active_producers if state is not None else {}).values():
                producers.append(
                    {
                        "producer_id": entry.producer_id,
                        "producer_epoch": entry.producer_epoch,
                        "last_sequence": entry.last_seq,
                        "last_timestamp": entry.last_timestamp,
                        "coordinator_epoch": entry.coordinator_epoch,
                        "current_txn_start_offset": -1
                        if entry.current_txn_first_offset is None
                        else entry.current_txn_first_offset,
                    }
                )
            partitions.append(
                {
                    "partition_index": index,
                    "error_code": ErrorCode.NONE,
                    "active_producers": producers,
                }
            )
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.response(topics=topics)
