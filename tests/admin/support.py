"""Helpers of the in-process admin app tests: a fake broker (no process, no coordination store)
and a test client over the app built for it; an HTTP client of an in-process broker's admin API
with the secured broker's credentials (tests/security/support.py), and the schemas the
Schema Registry tests of the console register."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from kafkalite.admin.app import create_app
from kafkalite.testing import Broker
from kafkalite.testing import wait_for as shared_wait_for
from tests.security.support import ADMIN_TOKEN, basic


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


ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ALICE = basic("alice")
EVIL = "https://evil.example"


@dataclass
class Answer:
    status: int
    body: Any
    headers: Any


def call(
    broker: Broker,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
    content_type: str | None = "application/json",
) -> Answer:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(broker.admin_url + path, method=method, data=data)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    if data is not None and content_type is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, payload, found = response.status, response.read(), response.headers
    except urllib.error.HTTPError as e:
        status, payload, found = e.code, e.read(), e.headers
    text = payload.decode()
    if found.get("Content-Type", "").startswith("application/json"):
        return Answer(status, json.loads(text), found)
    return Answer(status, text, found)


def allow(principal: str, rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string", "default": ""}],
}


def unique(prefix: str) -> str:
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_records(broker, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Produce (key, value) records with confluent-kafka; every one acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    delivered: list[object] = []
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(30) == 0
    assert delivered == [None] * len(records)
