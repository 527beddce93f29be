"""CreateTopics (key 19, v2-v7), as Kafka's ZkAdminManager.createTopics.

First, from the raw request (before anything proportional to a count is built, validate-only
too): more partitions than ``max.partitions.per.request`` in all -> POLICY_VIOLATION for every
topic, nothing created (KRaft's ``validateTotalNumberOfPartitions``; controller/limits.py).
Per topic, in Kafka's order: illegal name -> INVALID_TOPIC_EXCEPTION; named twice in the request
-> INVALID_REQUEST; both an explicit assignment and partitions/replication factor ->
INVALID_REQUEST; partitions/replication factor -1 take num.partitions /
default.replication.factor; more than ``max.partitions.per.topic`` -> POLICY_VIOLATION;
invalid configs -> INVALID_CONFIG; past ``max.partitions`` (the cluster's, counting what exists
and what this broker is creating) -> POLICY_VIOLATION; then the controller's admin path
(exists -> TOPIC_ALREADY_EXISTS, replication factor above the live brokers ->
INVALID_REPLICATION_FACTOR, ...). `validate_only` stops before anything is written. A created
topic is answered once this broker's metadata shows its leaders, or REQUEST_TIMED_OUT after
the request's timeout. v5+ answers with the partition count, replication factor and configs.
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from typing import Any

from kafkalite.apis.admin_common import (
    SOURCE_TOPIC_CONFIG,
    broker_topic_defaults,
    default_source,
    results_without_leaders,
    statically_set_topic_defaults,
)
from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.apis.topic_names import invalid_topic_reason
from kafkalite.controller.limits import (
    TOO_MANY_PER_REQUEST,
    PartitionLimits,
    partition_budget,
    requested_partitions,
)
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.storage.config import validate_topic_configs

CREATE_CONCURRENCY = 32
"""Topics of one CreateTopics being created at once."""


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    from kafkalite.zk import admin

    config = ctx.services.config
    limits = PartitionLimits.of(config)
    timeout_ms = millis(request.timeout)
    validate_only = getattr(request, "validate_only", False)
    if requested_partitions(request.topics, config.num_partitions) > limits.per_request:
        return ctx.response(
            throttle_time=0,
            topics=[
                refused(t.name, ErrorCode.POLICY_VIOLATION, TOO_MANY_PER_REQUEST)
                for t in request.topics
            ],
        )
    budget = partition_budget(ctx.services)
    counts = collections.Counter(t.name for t in request.topics)
    validated = 0  # validate-only: what the topics checked so far would add
    results = []
    created: list[tuple[dict[str, Any], int]] = []
    jobs: dict[str, list[tuple[Any, ...]]] = {}
    for topic in request.topics:
        name = topic.name
        num_partitions = topic.num_partitions
        replication_factor = topic.replication_factor
        configs = {c.name: c.value for c in topic.configs}
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        result = refused(name, ErrorCode.NONE, None)
        results.append(result)
        reason = invalid_topic_reason(name)
        if reason is not None:
            result.update(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=reason)
            continue
        if counts[name] > 1:
            result.update(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Create topics request from client contains duplicate topic {name}",
            )
            continue
        if assignment and (num_partitions != -1 or replication_factor != -1):
            result.update(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="Both numPartitions or replicationFactor and replicasAssignments "
                "were set. Both cannot be used at the same time.",
            )
            continue
        if num_partitions == -1 and not assignment:
            num_partitions = config.num_partitions
        if replication_factor == -1 and not assignment:
            replication_factor = config.default_replication_factor
        if assignment:
            num_partitions = len(assignment)
            replication_factor = len(next(iter(assignment.values())))
        if num_partitions <= 0:
            result.update(
                error_code=ErrorCode.INVALID_PARTITIONS,
                error_message="Number of partitions must be larger than 0.",
            )
            continue
        if replication_factor <= 0:
            result.update(
                error_code=ErrorCode.INVALID_REPLICATION_FACTOR,
                error_message="Replication factor must be larger than 0.",
            )
            continue
        problem = validate_topic_configs(configs)
        if problem is not None:
            result.update(error_code=ErrorCode.INVALID_CONFIG, error_message=problem)
            continue
        try:
            limits.check_topic(name, num_partitions)
            added = budget.reserve(
                name, num_partitions, hold=not validate_only, alongside=validated
            )
            if validate_only:
                validated += added
        except KafkaError as e:
            result.update(error_code=e.error_code, error_message=str(e))
            continue
        jobs.setdefault(admin.collision_key(name), []).append(
            (result, name, num_partitions, replication_factor, configs, assignment)
        )

    async def create(result, name, num_partitions, replication_factor, configs, assignment):
        try:
            topic_id = await admin.create_topic(
                ctx.services.store,
                name,
                num_partitions,
                replication_factor,
                configs,
                replica_assignment=assignment or None,
                validate_only=validate_only,
            )
        except KafkaError as e:
            budget.release(name)
            result.update(error_code=e.error_code, error_message=str(e) or None)
            return
        result.update(
            topic_id=as_uuid(topic_id),
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            configs=describe_created_configs(ctx, configs),
        )
        if not validate_only:
            created.append((result, num_partitions))

    gate = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def create_in_turn(group):
        for job in group:
            async with gate:
                await create(*job)

    # The topics are created concurrently (each costs several store round trips; a hundred
    # of them one after the other took longer than a client's request timeout), but at most
    # CREATE_CONCURRENCY at once: the event loop runs every ready task in one turn, so 2,000
    # creations started together held it for 10 s (no other client, not even SIGTERM, was
    # served meanwhile). Topics whose names collide are created in turn, so the later ones see
    # the earlier ones, as when the whole request is handled in order.
    await asyncio.gather(*(create_in_turn(group) for group in jobs.values()))
    for result in await results_without_leaders(ctx, created, timeout_ms):
        result.update(
            error_code=ErrorCode.REQUEST_TIMED_OUT,
            error_message="Timed out waiting for the topic's partitions to get leaders",
        )
    return ctx.response(throttle_time=0, topics=results)


def refused(name: str, error_code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "error_code": error_code,
        "error_message": message,
        "topic_config_error_code": 0,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
    }


def as_uuid(topic_id: Any) -> uuid.UUID:
    """The admin path's topic id (Kafka's base64 text form) as the wire's UUID."""
    if isinstance(topic_id, uuid.UUID):
        return topic_id
    if not topic_id:
        return uuid.UUID(int=0)
    from kafkalite.zk import data as paths

    return uuid.UUID(bytes=paths.topic_id_bytes(topic_id))


def describe_created_configs(ctx: RequestContext, configs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    static = statically_set_topic_defaults(ctx)
    for name, default in sorted(broker_topic_defaults(ctx).items()):
        explicit = name in configs
        out.append(
            {
                "name": name,
                "value": configs[name] if explicit else default,
                "read_only": False,
                "config_source": SOURCE_TOPIC_CONFIG if explicit else default_source(name, static),
                "is_sensitive": False,
            }
        )
    return out
