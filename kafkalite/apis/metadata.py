"""Metadata (key 3, v0-v12): brokers, controller, topics with partitions, leaders and ISRs.

Answered from the MetadataCache (filled by the controller's UpdateMetadata), as Kafka does:
brokers are listed with their endpoint for the listener the request came in on; partitions
with leader, leader epoch (v7+), replicas, ISR and offline replicas (v5+); topics with their
topic id (v10+).

Unknown topics: with `auto.create.topics.enable` (default true) and the request allowing it
(v4+ `allow_auto_topic_creation`, implied before), a legal, non-internal name is created through
the controller's admin path (num.partitions, default.replication.factor) and answered
LEADER_NOT_AVAILABLE until the controller has elected its leaders; otherwise
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name). A partition whose
leader is not alive is LEADER_NOT_AVAILABLE.
"""

from __future__ import annotations

import uuid
from typing import Any

import structlog

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.topic_names import invalid_topic_reason, is_internal
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


def partition_entries(ctx: RequestContext, topic: str) -> list[dict[str, Any]]:
    cache = ctx.services.metadata_cache
    alive = {b.id for b in cache.get_alive_brokers()}
    out = []
    for state in cache.get_partition_infos(topic):
        error = ErrorCode.NONE
        if state.leader < 0 or state.leader not in alive:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        offline = list(getattr(state, "offline_replicas", ()) or ())
        out.append(
            {
                "error_code": error,
                "partition_index": state.partition_index,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": list(state.replicas),
                "isr_nodes": list(state.isr),
                "offline_replicas": offline,
            }
        )
    out.sort(key=lambda p: p["partition_index"])
    return out


async def auto_create_topic(ctx: RequestContext, name: str) -> ErrorCode:
    """Create `name` with the broker defaults; the error code the Metadata answer carries."""
    from kafkalite.controller import admin

    config = ctx.services.config
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
        pass
    except KafkaError as e:
        log.info("auto-creation failed", topic=name, error=str(e))
        return e.error_code
    return ErrorCode.LEADER_NOT_AVAILABLE


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    cache = services.metadata_cache
    version = ctx.api_version
    requested = request.topics
    if requested is not None:
        names = [t.name for t in requested]
        if version == 0 and not names:
            names = None  # v0: an empty list means every topic
    else:
        names = None
    allow_auto = getattr(request, "allow_auto_topic_creation", True)
    known = cache.get_all_topics()
    topics = []
    for name in sorted(known) if names is None else names:
        if name in known:
            topic_id = cache.get_topic_id(name) or ZERO_UUID
            topics.append(
                {
                    "error_code": ErrorCode.NONE,
                    "name": name,
                    "topic_id": topic_id,
                    "is_internal": is_internal(name),
                    "partitions": partition_entries(ctx, name),
                }
            )
            continue
        if name is None or invalid_topic_reason(name) is not None:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif services.config.auto_create_topics_enable and allow_auto and not is_internal(name):
            error = await auto_create_topic(ctx, name)
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
    controller_id = cache.get_controller_id()
    return ctx.response(
        throttle_time=0,
        brokers=broker_entries(ctx),
        cluster_id=services.cluster_id,
        controller_id=-1 if controller_id is None else controller_id,
        topics=topics,
        cluster_authorized_operations=-2147483648,
    )
