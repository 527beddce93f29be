"""Produce (key 0, v3-v11): append record batches to partition leaders.

The handler never decodes records: the request is decoded by hand
(protocol/produce_request.py) so each partition's record data is a writable view into the
frame, which ReplicaManager validates (batch headers, CRC), stamps with offsets in place and
appends.

Kafka's behaviour kept here:
- acks must be -1, 0 or 1, else INVALID_REQUIRED_ACKS for every partition;
- per-partition failures (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE,
  MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER, ...) are error codes in the response;
- v8+ (KIP-467): a batch refused for some of its records (keyless records on a compacted topic:
  INVALID_RECORD) names each in record_errors with its batch_index and message;
- acks=0 gets no response; if any partition failed, the connection is closed instead, so the
  producer notices and refreshes its metadata (KafkaApis.handleProduceRequest).

Schema validation (Confluent Server's confluent.{key,value}.schema.validation): when the
composition root gives a RecordValidator (`services.extra["record_validator"]`), each
partition of a topic it `applies` to is checked before the append; a refused partition gets
INVALID_RECORD with its record_errors and none of its records are appended. The handlers know
only this interface, never the registry behind it.
"""

from __future__ import annotations

import datetime
import functools
import sys
from typing import Any, Protocol

import structlog

from kafkalite.apis.base import RequestContext, as_datetime, handles
from kafkalite.broker.types import ProduceResult
from kafkalite.network.connection import NO_RESPONSE, CloseConnection
from kafkalite.protocol.api import ApiKey, response_class
from kafkalite.protocol.errors import ErrorCode, RecordError, RecordValidationError
from kafkalite.protocol.produce_request import ProduceRequestData, decode_produce_request
from kafkalite.protocol.types import TopicPartition

log = structlog.get_logger("kafkalite.apis")


class RecordValidator(Protocol):
    """Checks produced records before they are appended (schema validation)."""

    def applies(self, topic: str) -> bool:
        """Whether `topic`'s records are checked at all (cheap: called for every partition)."""
        ...

    def known_to_pass(self, topic: str, records: memoryview) -> bool:
        """True when all of them pass, decided without awaiting (else `validate` decides)."""
        ...

    async def validate(self, topic: str, records: memoryview) -> list[RecordError]:
        """The refused records of one partition's data ([] when all pass)."""
        ...


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
    validator: RecordValidator | None = ctx.services.extra.get("record_validator")
    refused: dict[TopicPartition, Any] = {}
    if validator is not None and entries:
        for tp in [tp for tp in entries if validator.applies(tp.topic)]:
            if validator.known_to_pass(tp.topic, entries[tp]):
                continue
            record_errors = await validator.validate(tp.topic, entries[tp])
            if record_errors:
                del entries[tp]
                refused[tp] = ProduceResult(
                    ErrorCode.INVALID_RECORD,
                    error_message=str(RecordValidationError(record_errors)),
                    record_errors=tuple(record_errors),
                )
    if entries:
        results = await ctx.services.replica_manager.append_records(
            timeout_ms=request.timeout_ms,
            required_acks=acks,
            entries=entries,
        )
    if refused:
        results = {**results, **refused}
    if acks == 0:
        if errors or any(r.error_code != ErrorCode.NONE for r in results.values()):
            raise CloseConnection("acks=0 produce failed for some partition")
        return NO_RESPONSE
    cls, topic_cls, partition_cls, record_error_cls, has_lso, has_errors, has_message = (
        _response_types(ctx.api_version)
    )
    topics = []
    for topic in request.topic_data:
        partitions = []
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, part.index)
            result = results.get(tp)
            fields: dict[str, Any]
            if result is None:
                error = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                fields = {
                    "index": part.index,
                    "error_code": error,
                    "base_offset": -1,
                    "log_append_time": None,
                }
                log_start_offset, message = -1, None
            else:
                append_time = result.log_append_time
                fields = {
                    "index": part.index,
                    "error_code": result.error_code,
                    "base_offset": result.base_offset,
                    "log_append_time": None if append_time < 0 else as_datetime(append_time),
                }
                log_start_offset, message = result.log_start_offset, result.error_message
            if has_lso:
                fields["log_start_offset"] = log_start_offset
            if has_errors:
                fields["record_errors"] = (
                    tuple(
                        record_error_cls(
                            batch_index=e.batch_index, batch_index_error_message=e.message
                        )
                        for e in result.record_errors
                    )
                    if result is not None and result.record_errors
                    else ()
                )
            if has_message:
                fields["error_message"] = message
            partitions.append(partition_cls(**fields))
        topics.append(topic_cls(name=topic.name, partition_responses=tuple(partitions)))
    return cls(responses=tuple(topics), throttle_time=_NO_THROTTLE)


_NO_THROTTLE = datetime.timedelta(0)


@functools.cache
def _response_types(version: int) -> tuple[type, type, type, Any, bool, bool, bool]:
    """The response classes of `version` and which optional partition fields it has (built
    directly: the generic `build` costs ~25 µs per request on this hot path)."""
    cls = response_class(ApiKey.PRODUCE, version)
    module = sys.modules[cls.__module__]
    partition_cls = module.PartitionProduceResponse
    fields = partition_cls.__dataclass_fields__
    return (
        cls,
        module.TopicProduceResponse,
        partition_cls,
        getattr(module, "BatchIndexAndErrorMessage", None),
        "log_start_offset" in fields,
        "record_errors" in fields,
        "error_message" in fields,
    )
