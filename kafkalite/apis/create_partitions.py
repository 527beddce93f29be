"""CreatePartitions (key 37, v0-v3): grow a topic's partition count.

First, from the raw request (validate-only too): more new partitions than
``max.partitions.per.request`` in all (each topic's count above its current one, or its
assignments) -> POLICY_VIOLATION for every topic, nothing added (KRaft refuses an operation of more
than 10,000 records so; controller/limits.py). Then Kafka's checks: unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; named twice -> INVALID_REQUEST;
a count not above the current one -> INVALID_PARTITIONS; an assignment of the wrong size or
naming unknown brokers -> INVALID_REPLICA_ASSIGNMENT (checked by the controller's admin path,
which writes the new assignment node); more than ``max.partitions.per.topic`` or past
``max.partitions`` (the cluster's) -> POLICY_VIOLATION. `validate_only` writes nothing. Answered when this
broker's metadata shows the new partitions with leaders, or REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import collections
from typing import Any

from kafkalite.apis.admin_common import results_without_leaders
from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.controller.limits import TOO_LARGE_BATCH, PartitionLimits, partition_budget
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(ctx: RequestContext, request: Any) -> Any:
    from kafkalite.zk import admin

    cache = ctx.services.metadata_cache
    limits = PartitionLimits.of(ctx.services.config)
    timeout_ms = millis(request.timeout)
    if new_partitions(cache, request.topics) > limits.per_request:
        return ctx.response(
            throttle_time=0,
            results=[
                {
                    "name": t.name,
                    "error_code": ErrorCode.POLICY_VIOLATION,
                    "error_message": TOO_LARGE_BATCH,
                }
                for t in request.topics
            ],
        )
    budget = partition_budget(ctx.services)
    counts = collections.Counter(t.name for t in request.topics)
    validated = 0  # validate-only: what the topics checked so far would add
    results = []
    pending = []
    for topic in request.topics:
        result: dict[str, Any] = {
            "name": topic.name,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        results.append(result)
        if counts[topic.name] > 1:
            result.update(
                error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic in request."
            )
            continue
        if topic.name not in cache.get_all_topics():
            result.update(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message=f"The topic '{topic.name}' does not exist.",
            )
            continue
        current = len(list(cache.get_partition_infos(topic.name)))
        if topic.count <= current:
            result.update(
                error_code=ErrorCode.INVALID_PARTITIONS,
                error_message=f"Topic currently has {current} partitions, which is higher than "
                f"or equal to the requested {topic.count}.",
            )
            continue
        try:
            limits.check_topic(topic.name, topic.count)
            added = budget.reserve(
                topic.name, topic.count, hold=not request.validate_only, alongside=validated
            )
            if request.validate_only:
                validated += added
        except KafkaError as e:
            result.update(error_code=e.error_code, error_message=str(e))
            continue
        assignment = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
        try:
            await admin.add_partitions(
                ctx.services.store,
                topic.name,
                topic.count,
                replica_assignment=assignment,
                validate_only=request.validate_only,
            )
        except KafkaError as e:
            budget.release(topic.name)
            result.update(error_code=e.error_code, error_message=str(e) or None)
            continue
        if not request.validate_only:
            pending.append((result, topic.count))
    for result in await results_without_leaders(ctx, pending, timeout_ms):
        result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return ctx.response(throttle_time=0, results=results)


def new_partitions(cache: Any, topics: Any) -> int:
    """The partitions a CreatePartitions would add, from the raw request: per topic its
    assignments, else its count above the current one (unknown topics add nothing)."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        else:
            current = cache.num_partitions(topic.name)
            if current is not None:
                total += max(0, topic.count - current)
    return total
