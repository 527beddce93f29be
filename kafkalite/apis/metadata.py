"""Metadata (key 3, v0-v12): brokers, controller, topics with partitions, leaders and ISRs.

Answered from the MetadataCache (filled by the controller's UpdateMetadata), as Kafka does:
brokers are listed with their endpoint for the listener the request came in on; partitions
with leader, leader epoch (v7+), replicas, ISR and offline replicas (v5+); topics with their
topic id (v10+).

Unknown topics: with `auto.create.topics.enable` (default true) and the request allowing it
(v4+ `allow_auto_topic_creation`, implied before), a legal, non-internal name is created through
the controller's admin path (num.partitions, default.replication.factor) and answered
LEADER_NOT_AVAILABLE until the controller has elected its leaders; otherwise
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name). Auto-creation is held to
the partition ceilings (controller/limits.py): past max.partitions.per.request partitions
auto-created by one request, or past max.partitions.per.topic / the cluster's max.partitions,
a topic is answered POLICY_VIOLATION (Kafka answers a failed auto-creation with its error). A partition whose
leader is not alive is LEADER_NOT_AVAILABLE with leader -1 (the cache's getTopicMetadata rules).
v12 topics asked by id: known ids are answered like their names, unknown ones UNKNOWN_TOPIC_ID.

Authorized operations (v8+, KIP-430): asked for with `include_topic_authorized_operations`
(every topic answered by name, as Kafka's handleTopicMetadataRequest sets them; not the unknown
ids) and `include_cluster_authorized_operations` (v8-10); with no authorizer they are every
operation the resource type supports (protocol/acl.py), otherwise Int.MinValue (omitted).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

import structlog

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.topic_names import invalid_topic_reason, is_internal
from kafkalite.broker.metadata_cache import PartitionMetadata
from kafkalite.protocol.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ResourceType,
    authorized_operations,
)
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError

log = structlog.get_logger("kafkalite.apis")

ZERO_UUID = uuid.UUID(int=0)


def broker_entries(ctx: RequestContext) -> list[dict[str, Any]]:
    """Alive brokers with their endpoint on the listener of this connection."""
    listener = ctx.connection.listener_name
    out = []
    for broker in ctx.services.metadata_cache.get_alive_brokers():
        endpoint = broker.endpoint_for(listener)
        if endpoint is None:
            continue
        out.append(
            {
                "node_id": broker.id,
                "host": endpoint.host,
                "port": endpoint.port,
                "rack": broker.rack,
            }
        )
    return out


def partition_entries(partitions: Iterable[PartitionMetadata]) -> list[dict[str, Any]]:
    return [
        {
            "error_code": p.error_code,
            "partition_index": p.partition_index,
            "leader_id": p.leader_id,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replica_nodes),
            "isr_nodes": list(p.isr_nodes),
            "offline_replicas": list(p.offline_replicas),
        }
        for p in sorted(partitions, key=lambda p: p.partition_index)
    ]


async def auto_create_topic(ctx: RequestContext, name: str, created_so_far: int = 0) -> ErrorCode:
    """Create `name` with the broker defaults; the error code the Metadata answer carries.
    ``created_so_far``: the partitions this request has auto-created already; with this topic's
    they may not pass max.partitions.per.request, nor the cluster's max.partitions
    (POLICY_VIOLATION, as Kafka's auto-creation answers the creation's error)."""
    from kafkalite.controller.limits import PartitionLimits, partition_budget
    from kafkalite.zk import admin

    config = ctx.services.config
    limits = PartitionLimits.of(config)
    budget = partition_budget(ctx.services)
    if created_so_far + config.num_partitions > limits.per_request:
        return ErrorCode.POLICY_VIOLATION
    try:
        limits.check_topic(name, config.num_partitions)
        budget.reserve(name, config.num_partitions)
    except KafkaError as e:
        log.info("auto-creation refused", topic=name, error=str(e))
        return e.error_code
    try:
        await admin.create_topic(
            ctx.services.store,
            name,
            config.num_partitions,
            config.default_replication_factor,
            {},
        )
        log.info("auto-created topic", topic=name, client=ctx.connection.client_address)
    except TopicAlreadyExistsError:
        budget.release(name)
    except KafkaError as e:
        budget.release(name)
        log.info("auto-creation failed", topic=name, error=str(e))
        return e.error_code
    return ErrorCode.LEADER_NOT_AVAILABLE


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    cache = services.metadata_cache
    version = ctx.api_version
    requested = request.topics
    topics = []
    by_id: list = []
    if requested is not None:
        # v12 (KIP-516): a topic may be asked by id (name null); an unknown id is
        # UNKNOWN_TOPIC_ID, a known one is answered like its name (never auto-created).
        by_id = [t.topic_id for t in requested if t.name is None and _has_topic_id(t)]
        names = [t.name for t in requested if t.name is not None or not _has_topic_id(t)]
        for topic_id in dict.fromkeys(by_id):
            name = cache.get_topic_name(topic_id)
            if name is None:
                topics.append(
                    {
                        "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                        "name": None,
                        "topic_id": topic_id,
                        "is_internal": False,
                        "partitions": [],
                    }
                )
            elif name not in names:
                names.append(name)
        if version == 0 and not names:
            names = None  # v0: an empty list means every topic
    else:
        names = None
    allow_auto = getattr(request, "allow_auto_topic_creation", True) and not by_id
    known = cache.get_all_topics()
    wanted = sorted(known) if names is None else names
    # Kafka's getTopicMetadata: a dead leader is -1 with LEADER_NOT_AVAILABLE, a leader
    # without this listener LISTENER_NOT_FOUND (v6+), v0 lists only reachable replicas.
    found = {
        m.name: m
        for m in cache.get_topic_metadata(
            [n for n in wanted if n in known],
            ctx.connection.listener_name,
            error_unavailable_endpoints=version == 0,
            error_unavailable_listeners=version >= 6,
        )
    }
    auto_created = 0
    for name in wanted:
        metadata = found.get(name)
        if metadata is not None:
            topics.append(
                {
                    "error_code": ErrorCode.NONE,
                    "name": name,
                    "topic_id": metadata.topic_id,
                    "is_internal": is_internal(name),
                    "partitions": partition_entries(metadata.partitions),
                }
            )
            continue
        if name is None or invalid_topic_reason(name) is not None:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif services.config.auto_create_topics_enable and allow_auto and not is_internal(name):
            error = await auto_create_topic(ctx, name, auto_created)
            if error == ErrorCode.LEADER_NOT_AVAILABLE:
                auto_created += services.config.num_partitions
            # The store's round trips need not suspend (the embedded store answers at once):
            # thousands of names would otherwise be created in one turn of the event loop.
            await asyncio.sleep(0)
        else:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        topics.append(
            {
                "error_code": error,
                "name": name,
                "topic_id": ZERO_UUID,
                "is_internal": False,
                "partitions": [],
            }
        )
    if getattr(request, "include_topic_authorized_operations", False):
        topic_operations = authorized_operations(ResourceType.TOPIC)
        for topic in topics:
            if topic["name"] is not None:
                topic["topic_authorized_operations"] = topic_operations
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_operations = authorized_operations(ResourceType.CLUSTER)
    controller_id = cache.get_controller_id()
    return ctx.response(
        throttle_time=0,
        brokers=broker_entries(ctx),
        cluster_id=services.cluster_id,
        controller_id=-1 if controller_id is None else controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )


def _has_topic_id(topic: Any) -> bool:
    return getattr(topic, "topic_id", None) not in (None, ZERO_UUID)
