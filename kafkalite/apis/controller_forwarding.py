"""Forwarding of the requests only the active controller answers (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments) when this broker is not it.

Kafka 3.x routes these through ``maybeForwardToController``: a broker with a forwarding manager
(KIP-590) sends the request to the active controller and relays its answer; without one (a
plain ZooKeeper-mode broker) the local controller object answers NOT_CONTROLLER, and clients,
which address these requests to the controller named in Metadata anyway, refresh their
metadata and retry. kafkalite forwards, and answers NOT_CONTROLLER only when it cannot:

- the request, decoded at the client's version, is sent unchanged to the controller this
  broker's metadata names, over a new connection on the inter-broker listener (the listener the
  request came in on when none is configured); the controller's response is the answer;
- the forwarding connection's client id marks the request as forwarded: a broker that gets a
  forwarded request and is not the controller (the controller moved meanwhile) answers
  NOT_CONTROLLER instead of forwarding again, so a request is forwarded at most once;
- no known controller, this broker named as controller while its own controller is not active,
  or an unreachable / silent controller: ``forward_to_controller`` returns None and the handler
  answers NOT_CONTROLLER, as a ZooKeeper-mode Kafka broker does.
"""

from __future__ import annotations

from typing import Any

import structlog

from kafkalite.apis.base import RequestContext
from kafkalite.client.connection import KafkaConnection
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import KafkaError

log = structlog.get_logger("kafkalite.apis")

FORWARDED_CLIENT_ID_PREFIX = "kafkalite-forwarded-by-broker-"
FORWARD_MARGIN_S = 5.0
"""Added to the request's own timeout for the forwarded request (the controller waits up to the
request's timeout before it answers)."""


def controller_is_active(ctx: RequestContext) -> bool:
    controller = ctx.services.controller
    return controller is not None and bool(controller.is_active)


def is_forwarded(ctx: RequestContext) -> bool:
    return (ctx.client_id or "").startswith(FORWARDED_CLIENT_ID_PREFIX)


async def forward_to_controller(ctx: RequestContext, request: Any, timeout_ms: int) -> Any | None:
    """The active controller's response to ``request``, or None when it cannot be had (see
    the module docstring); never raises for a network failure."""
    if is_forwarded(ctx):
        return None
    cache = ctx.services.metadata_cache
    controller_id = cache.get_controller_id() if cache is not None else None
    if controller_id is None or controller_id < 0 or controller_id == ctx.services.broker_id:
        return None
    listener = ctx.services.config.inter_broker_listener
    endpoint = cache.get_alive_broker_node(controller_id, listener)
    if endpoint is None:
        return None
    api = ApiKey(ctx.header.api_key).name
    conn = KafkaConnection(
        endpoint.host,
        endpoint.port,
        client_id=f"{FORWARDED_CLIENT_ID_PREFIX}{ctx.services.broker_id}",
        request_timeout=max(0, timeout_ms) / 1000 + FORWARD_MARGIN_S,
        node_id=controller_id,
    )
    try:
        await conn.connect()
        return await conn.send(ctx.header.api_key, request)
    except (KafkaError, OSError) as e:
        log.warning("forward to controller failed", api=api, controller=controller_id, error=str(e))
        return None
    finally:
        await conn.close()
