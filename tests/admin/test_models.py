"""The admin API declared once: the routes the app serves are the document's operations, request
bodies are validated by the models the document is generated from, and an answer that drifts
from its model is a 500 (in-process, no broker)."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kafkalite.admin import models as m
from kafkalite.admin.app import create_app
from kafkalite.admin.errors import AdminError
from kafkalite.admin.openapi import openapi_document
from kafkalite.admin.routing import parse, route, route_specs
from tests.admin.support import fake_server


def test_every_served_route_is_documented_and_nothing_else() -> None:
    app = create_app(fake_server())
    served = {
        (r.resource.canonical, r.method.lower())
        for r in app.router.routes()
        if r.method != "HEAD" and r.resource is not None
    }
    documented = {
        (path, method) for path, item in openapi_document()["paths"].items() for method in item
    }
    undocumented = {("/openapi.json", "get")}
    served = {op for op in served if not op[0].startswith("/console")}
    assert served - undocumented == documented


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "t", "partitions": 3.0}, None, None),  # JSON Schema's integer
        ({"name": "t", "partitions": "3"}, "partitions", "integer"),
        ({"name": "t", "partitions": True}, "partitions", "integer"),
        ({"name": "t", "partitions": 2.5}, "partitions", "integer"),
        ({"name": "t", "configs": {"no.such": "1"}}, "configs", "Unknown topic config name"),
        ({"name": "t", "configs": {"retention.ms": "-2"}}, "configs", "retention.ms"),
        ({"name": "t", "configs": {"retention.ms": None}}, "configs", "retention.ms"),
        ({"name": "t\n"}, "name", "legal topic name"),
    ],
)
def test_new_topic_validation(body, field, words) -> None:
    if field is None:
        assert parse(m.NewTopic, body).partitions == 3
        return
    with pytest.raises(AdminError) as caught:
        parse(m.NewTopic, body)
    assert caught.value.status == 400 and caught.value.field == field
    assert words in caught.value.message


def test_offset_reset_errors_name_the_field_not_the_tag() -> None:
    for body, field in (
        ({"to": "sideways"}, "to"),
        ({}, "to"),
        ({"to": "timestamp"}, "timestamp"),
        (
            {"to": "explicit", "offsets": [{"topic": "t", "partition": 0, "offset": -1}]},
            "offsets[0].offset",
        ),
    ):
        with pytest.raises(AdminError) as caught:
            parse(m.OffsetReset, body)
        assert caught.value.field == field, body
    reset = parse(m.OffsetReset, {"to": "latest", "topics": ["a"], "dry_run": True})
    assert isinstance(reset.root, m.ResetToEnd) and reset.root.dry_run


def test_config_removal_keeps_kafka_names() -> None:
    change = parse(m.ConfigChange, {"configs": {"retention.ms": "5", "cleanup.policy": None}})
    assert m.configs_of(change.configs) == {"retention.ms": "5", "cleanup.policy": None}


class Drifting:
    @route("GET", "/drift", summary="Drift", tag="t", answer=m.Health)
    async def drift(self, request: web.Request):
        return {"status": "ok", "broker_id": 1, "undeclared": True}


async def test_an_answer_that_drifts_from_its_model_is_not_sent() -> None:
    from kafkalite.admin.app import error_middleware

    app = web.Application(middlewares=[error_middleware])
    api = Drifting()
    for name, spec in route_specs(Drifting):
        app.router.add_route(spec.method, spec.path, getattr(api, name))
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        response = await client.get("/drift")
        assert response.status == 500
        assert (await response.json())["error"] == "INTERNAL_ERROR"
    finally:
        await client.close()


async def test_overview_and_partition_health_from_the_metadata() -> None:
    """Counts come from the broker's metadata: a replica on an unregistered broker is a down
    broker; a leader that is not alive makes the partition offline; ISR below
    min.insync.replicas is under min ISR."""
    from types import SimpleNamespace

    from kafkalite.broker.metadata_cache import PartitionInfo

    states = {
        "t": {
            0: PartitionInfo("t", 0, 0, 1, (0, 1), (0, 1)),
            1: PartitionInfo("t", 1, 0, 1, (0,), (0, 5)),
            2: PartitionInfo("t", 2, 5, 1, (5,), (5, 0)),
        },
        "__consumer_offsets": {0: PartitionInfo("__consumer_offsets", 0, 1, 1, (1,), (1,))},
    }
    cache = SimpleNamespace(
        partition_states=states,
        get_alive_brokers=lambda: [SimpleNamespace(id=0), SimpleNamespace(id=1)],
        get_controller_id=lambda: 1,
    )
    server = fake_server()
    server.metadata_cache = cache
    server.config.min_insync_replicas = 2
    client = TestClient(TestServer(create_app(server)))
    await client.start_server()
    try:
        overview = await (await client.get("/overview")).json()
        assert overview == {
            "cluster_id": "c",
            "controller_id": 1,
            "brokers": 2,
            "down_brokers": [5],
            "topics": 1,
            "internal_topics": 1,
            "partitions": 4,
            "under_replicated": 2,
            "offline": 1,
            "under_min_isr": 2,
            "groups": 0,
        }
        response = await client.get("/partitions?state=under_replicated&internal=false")
        assert response.headers["X-Total-Count"] == "2"
        assert [p["partition"] for p in await response.json()] == [1, 2]
        offline = await (await client.get("/partitions?state=offline")).json()
        assert [(p["topic"], p["partition"]) for p in offline] == [("t", 2)]
        on_broker_1 = await client.get("/partitions?broker=1")
        assert on_broker_1.headers["X-Total-Count"] == "2"
    finally:
        await client.close()
