"""Building the share-group parts from the broker configuration (called by the composition
root): the share coordinator, its local persister and the share-group service, registered in
``BrokerServices.extra`` as ``share_coordinator`` and ``share_groups``, and the group config
store (``group_configs``: GROUP config resources, share/group_configs.py; the consumer-group
coordinator may look its ``consumer.*`` keys up there with ``value(group_id, name)``)."""

from __future__ import annotations

from typing import Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.share.coordinator import ShareCoordinator
from kafkalite.share.group_configs import GroupConfigStore, bounds_from, defaults_from
from kafkalite.share.manager import ShareConfig, ShareGroupService
from kafkalite.share.persister import BrokerPersister


def share_config(config: Any) -> ShareConfig:
    return ShareConfig(
        delivery_count_limit=config.group_share_delivery_count_limit,
        record_lock_duration_ms=config.group_share_record_lock_duration_ms,
        partition_max_record_locks=config.group_share_partition_max_record_locks,
        session_timeout_ms=config.group_share_session_timeout_ms,
        heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
        max_size=config.group_share_max_size,
        auto_offset_reset=config.share_auto_offset_reset,
        isolation_level=config.share_isolation_level,
    )


def start_share_groups(
    services: Any, config: Any, listener_name: str = "PLAINTEXT"
) -> ShareGroupService:
    coordinator = ShareCoordinator(
        services.broker_id,
        services.replica_manager,
        config.share_coordinator_state_topic_num_partitions,
    )
    group_configs = None
    if services.store is not None:
        group_configs = GroupConfigStore(services.store, defaults_from(config), bounds_from(config))
        services.extra["group_configs"] = group_configs
    service = ShareGroupService(
        services.broker_id,
        services.replica_manager,
        services.metadata_cache,
        BrokerPersister(coordinator, services.metadata_cache, listener_name),
        share_config(config),
        group_configs=group_configs,
    )
    if group_configs is not None:
        # the watch follows other brokers' writes; the service cancels it on shutdown
        service.start_background(group_configs.watch())
    services.extra["share_coordinator"] = coordinator
    services.extra["share_groups"] = service
    # ListGroups lists share groups beside the group coordinator's (apis/list_groups.py)
    services.extra.setdefault("group_listers", []).append(
        lambda states, types: (ErrorCode.NONE, service.overviews(states, types))
    )
    return service
