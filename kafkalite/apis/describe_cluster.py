"""DescribeCluster (key 60, v0-v1): cluster id, controller and brokers (KIP-700).

`include_cluster_authorized_operations` is answered with every operation the CLUSTER resource
supports (no authorizer: Kafka's AuthHelper.authorizedOperations), else Int.MinValue (omitted).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.metadata import broker_entries
from kafkalite.protocol.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ResourceType,
    authorized_operations,
)
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.DESCRIBE_CLUSTER)
def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    if getattr(request, "endpoint_type", 1) != 1:  # 1 = brokers, 2 = controllers (KRaft)
        return ctx.response(
            throttle_time=0,
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="kafkalite brokers only answer for endpoint type 1 (brokers)",
            endpoint_type=request.endpoint_type,
            cluster_id=ctx.services.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    controller_id = ctx.services.metadata_cache.get_controller_id()
    return ctx.response(
        throttle_time=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.services.cluster_id,
        controller_id=-1 if controller_id is None else controller_id,
        brokers=[
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in broker_entries(ctx)
        ],
        cluster_authorized_operations=authorized_operations(ResourceType.CLUSTER)
        if request.include_cluster_authorized_operations
        else AUTHORIZED_OPERATIONS_OMITTED,
    )
