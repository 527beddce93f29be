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
    order: dict[int, int] = {}
    for topic in request.topics:
        name = topic.name
        num_partitions = topic.num_partitions
        replication_factor = topic.replication_factor
        configs = {c.name: c.value for c in topic.configs}
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        result = refused(name, ErrorCode.NONE, None)
        order[id(result)] = len(results)
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

    # One batch through the store: the existing topics, deletions, configs and brokers read
    # once, the config and assignment nodes written in a few pipelined multis (each topic
    # alone took about ten round trips). Topics are checked in request order, each against
    # those before it, as if created one after the other.
    queued = [job for group in jobs.values() for job in group]
    queued.sort(key=lambda job: order[id(job[0])])
    answers = await admin.create_topics(
        ctx.services.store,
        [
            admin.TopicToCreate(
                name, num_partitions, replication_factor, configs, assignment or None
            )
            for _, name, num_partitions, replication_factor, configs, assignment in queued
        ],
        validate_only=validate_only,
    )
    defaults = created_config_defaults(ctx) if queued else None
    default_configs: list[dict[str, Any]] | None = None  # the answer's configs without overrides
    for (result, name, num_partitions, replication_factor, configs, _), answer in zip(
        queued, answers, strict=True
    ):
        if isinstance(answer, KafkaError):
            budget.release(name)
            result.update(error_code=answer.error_code, error_message=str(answer) or None)
            continue
        if configs:
            described = describe_created_configs(ctx, configs, defaults)
        else:
            # The same list for every topic without overrides (read only by the encoder): one
            # dict per config and topic was 2% of the broker's CPU creating 1,000 a batch.
            if default_configs is None:
                default_configs = describe_created_configs(ctx, configs, defaults)
            described = default_configs
        result.update(
            topic_id=as_uuid(answer),
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            configs=described,
        )
        if not validate_only:
            created.append((result, num_partitions))
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


def describe_created_configs(
    ctx: RequestContext,
    configs: dict[str, Any],
    defaults: tuple[list[tuple[str, str]], dict[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The created topic's configs (v5+). ``defaults``: ``created_config_defaults(ctx)``,
    computed once per request (it walks every broker property: 0.2 ms, per topic)."""
    items, static = defaults if defaults is not None else created_config_defaults(ctx)
    out = []
    for name, default in items:
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


def created_config_defaults(ctx: RequestContext) -> tuple[list[tuple[str, str]], dict[str, str]]:
    return sorted(broker_topic_defaults(ctx).items()), statically_set_topic_defaults(ctx)
