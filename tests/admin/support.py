"""Helpers of the in-process admin app tests: a fake broker (no process, no coordination store)
and a test client over the app built for it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from kafkalite.admin.app import create_app
from kafkalite.testing import wait_for as shared_wait_for


def fake_server(store=None, group_coordinator=None):
    return SimpleNamespace(
        broker_id=3,
        config=SimpleNamespace(num_partitions=1, default_replication_factor=1),
        services=SimpleNamespace(store=store, group_coordinator=group_coordinator, cluster_id="c"),
        dispatcher=SimpleNamespace(ready=asyncio.Event()),
        replica_manager=None,
        log_manager=None,
        metadata_cache=None,
        controller=None,
        socket_server=None,
        bound_endpoints=[],
        advertised_endpoints=[],
    )


async def client_for(server) -> TestClient:
    client = TestClient(TestServer(create_app(server)))
    await client.start_server()
    return client


def wait_for(predicate, what: str, timeout: float = 20.0) -> Any:
    """Poll `predicate()` until it returns a truthy value (a deadline, not a sleep)."""
    return shared_wait_for(predicate, what, timeout=timeout)
