"""FindCoordinator (key 10, v0-v4): which broker coordinates a consumer group.

The coordinator of group ``g`` is the leader of ``__consumer_offsets-<partition_for(g)>``
(abs(java hashCode(g)) % offsets.topic.num.partitions), as in Kafka, so Kafka tooling agrees on
the partition. v0-v3 ask for one key (v0: always a group; v1+ carry ``key_type``); v4+ ask for a
batch of keys of one type and get one entry per key.

``__consumer_offsets`` is created on first use through the controller's admin path, like any
topic (offsets.topic.num.partitions partitions, compacted, the coordinator's topic configs).
Replication factor: offsets.topic.replication.factor, capped at the number of live brokers as
Kafka did before 0.11 (KIP-115 made Kafka refuse instead), so a single broker with the default
settings serves groups. Until the topic exists, its partition has a live leader, and (when the
leader is this broker) the coordinator has loaded the partition, the answer is
COORDINATOR_NOT_AVAILABLE, which clients retry.

Key type TRANSACTION (1): the coordinator of transactional id ``t`` is the leader of
``__transaction_state-<abs(hashCode(t)) % transaction.state.log.num.partitions>``, created on
first use the same way (``transaction.state.log.*`` settings; its replication factor capped at
the live brokers and its min.insync.replicas at that factor, so one broker works out of the box).
Any other key type is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

import structlog

from kafkalite.apis.base import RequestContext, handles
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError

log = structlog.get_logger("kafkalite.apis")

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


async def ensure_offsets_topic(ctx: RequestContext) -> bool:
    """True when ``__consumer_offsets`` is known to the metadata cache; otherwise ask the
    controller to create it (once; concurrent callers see TopicAlreadyExists) and return False."""
    from kafkalite.controller import admin

    services = ctx.services
    if services.metadata_cache.contains_topic(GROUP_METADATA_TOPIC_NAME):
        return True
    offset_config = services.group_coordinator.offset_config
    alive = len(services.metadata_cache.get_alive_brokers())
    replication_factor = min(offset_config.offsets_topic_replication_factor, max(alive, 1))
    try:
        await admin.create_topic(
            services.store,
            GROUP_METADATA_TOPIC_NAME,
            offset_config.offsets_topic_num_partitions,
            replication_factor,
            offset_config.offsets_topic_configs(),
        )
        log.info(
            "creating the offsets topic",
            partitions=offset_config.offsets_topic_num_partitions,
            replication_factor=replication_factor,
        )
    except TopicAlreadyExistsError:
        pass
    except KafkaError as e:
        log.warning("creating the offsets topic failed", error=str(e))
    return False


def group_coordinator_node(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, int, str, int]:
    """(error, node id, host, port) of the coordinator of ``group_id``; the topic exists."""
    services = ctx.services
    coordinator = services.group_coordinator
    partition = coordinator.partition_for(group_id)
    info = services.metadata_cache.get_partition_info(GROUP_METADATA_TOPIC_NAME, partition)
    if info is None or info.leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    endpoint = services.metadata_cache.get_alive_broker_node(
        info.leader, ctx.connection.listener_name
    )
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    if info.leader == services.broker_id and not coordinator.core.is_group_local(group_id):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1  # still loading the partition
    return ErrorCode.NONE, info.leader, endpoint.host, endpoint.port


async def ensure_transaction_state_topic(ctx: RequestContext) -> bool:
    """As ``ensure_offsets_topic``, for ``__transaction_state``."""
    from kafkalite.controller import admin
    from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME

    services = ctx.services
    if services.metadata_cache.contains_topic(TRANSACTION_STATE_TOPIC_NAME):
        return True
    config = services.txn_coordinator.config
    alive = len(services.metadata_cache.get_alive_brokers())
    replication_factor = min(config.transaction_state_log_replication_factor, max(alive, 1))
    try:
        await admin.create_topic(
            services.store,
            TRANSACTION_STATE_TOPIC_NAME,
            config.transaction_state_log_num_partitions,
            replication_factor,
            config.topic_configs(replication_factor),
        )
        log.info(
            "creating the transaction state topic",
            partitions=config.transaction_state_log_num_partitions,
            replication_factor=replication_factor,
        )
    except TopicAlreadyExistsError:
        pass
    except KafkaError as e:
        log.warning("creating the transaction state topic failed", error=str(e))
    return False


def txn_coordinator_node(
    ctx: RequestContext, transactional_id: str
) -> tuple[ErrorCode, int, str, int]:
    from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME

    services = ctx.services
    coordinator = services.txn_coordinator
    partition = coordinator.partition_for(transactional_id)
    info = services.metadata_cache.get_partition_info(TRANSACTION_STATE_TOPIC_NAME, partition)
    if info is None or info.leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    endpoint = services.metadata_cache.get_alive_broker_node(
        info.leader, ctx.connection.listener_name
    )
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    if info.leader == services.broker_id and not coordinator.is_local(transactional_id):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1  # still loading the partition
    return ErrorCode.NONE, info.leader, endpoint.host, endpoint.port


async def find(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, int, str, int]:
    if key_type == KEY_TYPE_TRANSACTION:
        if ctx.services.txn_coordinator is None or not key:
            return (
                ErrorCode.COORDINATOR_NOT_AVAILABLE if key else ErrorCode.INVALID_REQUEST,
                -1,
                "",
                -1,
            )
        if not await ensure_transaction_state_topic(ctx):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return txn_coordinator_node(ctx, key)
    if key_type != KEY_TYPE_GROUP:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    if ctx.services.group_coordinator is None or not await ensure_offsets_topic(ctx):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return group_coordinator_node(ctx, key)


def _message(error: ErrorCode) -> str | None:
    return None if error is ErrorCode.NONE else error.message


@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, node_id, host, port = await find(ctx, key, request.key_type)
            coordinators.append(
                {
                    "key": key,
                    "node_id": node_id,
                    "host": host,
                    "port": port,
                    "error_code": error,
                    "error_message": _message(error),
                }
            )
        return ctx.response(coordinators=coordinators)
    key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
    error, node_id, host, port = await find(ctx, request.key, key_type)
    return ctx.response(
        error_code=error, error_message=_message(error), node_id=node_id, host=host, port=port
    )
