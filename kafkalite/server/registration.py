"""The broker in the coordination store: its ephemeral registration ``/brokers/ids/<id>``
(Kafka's KafkaZkClient.registerBroker with checkedEphemeralCreate), the cluster id
(``/cluster/id``, Kafka's getOrCreateClusterId), and the cluster-wide secret unknown SCRAM
users' salts are derived from.

Every function takes the broker's session (a RenewableSession: the same object across
renewals) and retries or waits as described; none keeps state.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time
import uuid
from collections.abc import Iterable
from typing import Any

import structlog

from kafkalite.config import Endpoint
from kafkalite.coord import ConnectionLoss, NodeExists, NoNode, SessionExpired
from kafkalite.server.errors import StartupError
from kafkalite.zk import data as paths

log = structlog.get_logger("kafkalite.server")

SESSION_RETRY_BACKOFF_SECONDS = 0.5

SCRAM_UNKNOWN_USER_SECRET_PATH = "/kafkalite/scram_unknown_user_secret"
"""32 random bytes, made by the first broker with a SCRAM listener (scram_unknown_user_secret)."""


def new_cluster_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): url-safe base64 of 16 bytes, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


async def get_or_create_cluster_id(session: Any) -> str:
    """``/cluster/id``, created with a new id by the first broker of the cluster."""
    try:
        data, _ = await session.get_data(paths.CLUSTER_ID)
        return paths.decode_cluster_id(data)
    except NoNode:
        pass
    cluster_id = new_cluster_id()
    try:
        await session.create(paths.CLUSTER_ID, paths.encode_cluster_id(cluster_id), makepath=True)
        return cluster_id
    except NodeExists:
        data, _ = await session.get_data(paths.CLUSTER_ID)
        return paths.decode_cluster_id(data)


async def scram_unknown_user_secret(session: Any, security: dict[str, Any]) -> bytes | None:
    """The secret an unknown SCRAM user's salt is derived from (scram.fake_credential),
    created once for the cluster in the store: every broker, before and after a restart,
    shows an unknown user the same salt, as all show a real user the stored one. None (a
    secret of the process) when no listener offers SCRAM (``security``: the listeners'
    settings, security/listeners.py)."""
    if not any(
        m.startswith("SCRAM-") for sec in security.values() if sec.sasl for m in sec.mechanisms
    ):
        return None
    try:
        data, _ = await session.get_data(SCRAM_UNKNOWN_USER_SECRET_PATH)
        return bytes(data)
    except NoNode:
        pass
    secret = os.urandom(32)
    try:
        await session.create(SCRAM_UNKNOWN_USER_SECRET_PATH, secret, makepath=True)
        return secret
    except NodeExists:
        data, _ = await session.get_data(SCRAM_UNKNOWN_USER_SECRET_PATH)
        return bytes(data)


async def register_broker(
    session: Any,
    config: Any,
    broker_id: int,
    advertised_endpoints: Iterable[Endpoint],
    *,
    renewed: bool = False,
) -> int:
    """Create this broker's ephemeral ``/brokers/ids/<id>``; its broker epoch (the node's
    czxid). At start-up an existing node is another broker with this id: start-up stops. After
    a session renewal it may be this broker's own node from the expired session, which the
    server has not removed yet: wait for it to go (Kafka's checkedEphemeralCreate accepts only
    a node of the current session).

    A lost connection (ConnectionLoss: a busy start-up, ZooKeeper settling) is retried until
    the session itself ends, as Kafka's ZooKeeperClient retries until connected; a create
    whose answer was lost shows up as a node this session owns. A session that expired before
    the first registration is replaced by a new one."""
    endpoints = list(advertised_endpoints)
    while True:
        try:
            return await _try_register_broker(session, config, broker_id, endpoints, renewed)
        except ConnectionLoss as e:
            log.warning("registering: coordination store connection lost; retrying", error=str(e))
            await asyncio.sleep(SESSION_RETRY_BACKOFF_SECONDS)
        except SessionExpired:
            if renewed:
                raise  # the renewal task opens another session and calls again
            # A long start-up (thousands of logs loaded) outlived the session opened
            # first; nothing is registered on it yet: open a new one and go on.
            log.warning("coordination session expired during start-up; opening a new one")
            await session.renew()


async def _try_register_broker(
    session: Any, config: Any, broker_id: int, endpoints: list[Endpoint], renewed: bool
) -> int:
    path = paths.broker_path(broker_id)
    await session.ensure_path(paths.BROKER_IDS)
    info = paths.BrokerInfo(
        id=broker_id,
        endpoints=tuple(
            paths.EndPoint(
                e.host, e.port, e.listener_name, config.security_protocol(e.listener_name)
            )
            for e in endpoints
        ),
        rack=config.broker_rack,
        timestamp=int(time.time() * 1000),
    )
    while True:
        try:
            await session.create(path, paths.encode_broker(info), ephemeral=True)
            break
        except NodeExists:
            stat = await session.exists(path)
            if stat is not None and stat.ephemeral_owner == session.session_id:
                break  # ours: created by an attempt whose answer was lost
            if not renewed:
                raise StartupError(
                    f"broker.id {broker_id} is already registered at {path} "
                    "(another broker with the same id is running)"
                ) from None
        stat, gone = await session.exists_and_watch(path)
        if stat is not None and stat.ephemeral_owner == session.session_id:
            break
        if stat is not None:
            log.info("waiting for the registration of the expired session to go", path=path)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2 * config.zookeeper_session_timeout_ms / 1000):
                    await gone
    stat = await session.exists(path)
    log.info("registered", path=path, endpoints=[e.connection_string for e in endpoints])
    return stat.czxid if stat else -1
