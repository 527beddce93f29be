"""Produce (key 0, v3-v11): append record batches to partition leaders.

The handler never decodes records: the request is decoded by hand (produce_request.py) so each
partition's record data is a writable view into the frame, which ReplicaManager validates
(batch headers, CRC), stamps with offsets in place and appends.

Kafka's behaviour kept here:
- acks must be -1, 0 or 1, else INVALID_REQUIRED_ACKS for every partition;
- per-partition failures (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE,
  MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER, ...) are error codes in the response;
- acks=0 gets no response; if any partition failed, the connection is closed instead, so the
  producer notices and refreshes its metadata (KafkaApis.handleProduceRequest).
"""

from __future__ import annotations

from typing import Any

import structlog

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.produce_request import ProduceRequestData, decode_produce_request
from kafkalite.network.connection import NO_RESPONSE, CloseConnection
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

log = structlog.get_logger("kafkalite.apis")


@handles(ApiKey.PRODUCE, decoder=decode_produce_request)
async def handle_produce(ctx: RequestContext, request: ProduceRequestData) -> Any:
    acks = request.acks
    errors: dict[TopicPartition, ErrorCode] = {}
    entries: dict[TopicPartition, memoryview] = {}
    for topic in request.topic_data:
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, part.index)
            if acks not in (-1, 0, 1):
                errors[tp] = ErrorCode.INVALID_REQUIRED_ACKS
            elif part.records is None or len(part.records) == 0:
                errors[tp] = ErrorCode.INVALID_RECORD
            else:
                entries[tp] = part.records
    results: dict[TopicPartition, Any] = {}
    if entries:
        results = await ctx.services.replica_manager.append_records(
            timeout_ms=request.timeout_ms,
            required_acks=acks,
            entries=entries,
        )
    if acks == 0:
        if errors or any(r.error_code != ErrorCode.NONE for r in results.values()):
            raise CloseConnection("acks=0 produce failed for some partition")
        return NO_RESPONSE
    topics = []
    for topic in request.topic_data:
        partitions = []
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, part.index)
            result = results.get(tp)
            if result is None:
                partitions.append(
                    {
                        "index": part.index,
                        "error_code": errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR),
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                    }
                )
            else:
                partitions.append(
                    {
                        "index": part.index,
                        "error_code": result.error_code,
                        "base_offset": result.base_offset,
                        "log_append_time": result.log_append_time,
                        "log_start_offset": result.log_start_offset,
                        "record_errors": [],
                        "error_message": getattr(result, "error_message", None),
                    }
                )
        topics.append({"name": topic.name, "partition_responses": partitions})
    return ctx.response(responses=topics, throttle_time=0)
