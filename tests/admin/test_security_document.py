"""The admin API's security stated once (security.py, ROUTE_ACLS): every route the app serves
has its entry, the OpenAPI document's security schemes, 401 and 403 come from that table (and
stay valid OpenAPI 3.1), and the middleware answers what the document says (in-process, no
broker)."""

from __future__ import annotations

from types import SimpleNamespace

from aiohttp.test_utils import TestClient, TestServer
from openapi_spec_validator import validate

from kafkalite.admin import models as m
from kafkalite.admin.app import create_app
from kafkalite.admin.openapi import openapi_document
from kafkalite.admin.security import (
    CONSOLE_CHALLENGE,
    ITEM_ACLS,
    OPEN,
    OPEN_PATHS,
    ROUTE_ACLS,
    WWW_AUTHENTICATE,
    acl_statement,
)
from tests.admin.support import fake_server


def served_routes() -> set[tuple[str, str]]:
    app = create_app(fake_server())
    return {
        (r.method, r.resource.canonical)
        for r in app.router.routes()
        if r.method != "HEAD" and r.resource is not None
    }


def test_every_served_route_has_an_acl_entry_and_every_entry_a_route() -> None:
    served = served_routes()
    assert len(served) > 25
    missing = sorted(served - ROUTE_ACLS.keys())
    assert not missing, f"routes without a ROUTE_ACLS entry (security.py): {missing}"
    assert not ROUTE_ACLS.keys() - served, "ROUTE_ACLS names routes the app does not serve"
    # besides the probes, only the console's own files (no cluster data) are served without
    # credentials, so that a browser can show the login page
    assert OPEN_PATHS == {"/health", "/ready", "/", "/docs", "/console/{file}"}


def test_each_operation_states_the_acl_it_needs() -> None:
    """The per-item checks are stated for served routes only, and every protected operation
    of the document of an authorising broker says in words what it needs."""
    assert ITEM_ACLS.keys() <= ROUTE_ACLS.keys()
    for path, item in openapi_document(("basic",), True)["paths"].items():
        for method, operation in item.items():
            if ROUTE_ACLS[(method.upper(), path)] is OPEN:
                assert "x-required-acl" not in operation
            else:
                assert operation["x-required-acl"] == acl_statement(method.upper(), path)
    assert acl_statement("POST", "/groups/{id}/offsets").startswith(
        "READ on GROUP {id}; READ on each topic"
    )
    assert "x-required-acl" not in openapi_document(("basic",), False)["paths"]["/topics"]["get"]


def test_the_document_states_the_middleware_rules_and_is_openapi_3_1() -> None:
    for schemes, authorised in ((("basic", "bearer"), True), (("bearer",), False), ((), False)):
        document = openapi_document(schemes, authorised)
        validate(document)  # OpenAPI 3.1 (the validator picks the version from the document)
        components = document["components"]
        assert set(components.get("securitySchemes", {})) == set(schemes)
        for path, item in document["paths"].items():
            for method, operation in item.items():
                responses = operation["responses"]
                if ROUTE_ACLS[(method.upper(), path)] is OPEN:
                    assert operation["security"] == [] and not {"401", "403"} & set(responses)
                    continue
                assert operation.get("security", []) == [{s: []} for s in schemes]
                assert ("401" in responses) == bool(schemes), (method, path)
                assert ("403" in responses) == authorised, (method, path)
    full = openapi_document()
    unauthorized = full["components"]["responses"]["Unauthorized"]
    assert unauthorized["headers"]["WWW-Authenticate"]["required"] is True
    for name in ("Unauthorized", "Forbidden"):
        schema = full["components"]["responses"][name]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Error"}
    assert {s["scheme"] for s in full["components"]["securitySchemes"].values()} == {
        "basic",
        "bearer",
    }


class Switch:
    """An authorizer allowing everything or nothing."""

    def __init__(self) -> None:
        self.allow = True

    def allowed(self, caller, op, rtype, name) -> bool:
        return self.allow


async def test_the_middleware_answers_what_the_document_states() -> None:
    """Every operation of the document, without credentials, with a wrong token and with the
    token but no ACL: 401 (challenge, Error body) / 403 (Error body) exactly where stated."""
    server = fake_server()
    server.config = SimpleNamespace(
        num_partitions=1,
        default_replication_factor=1,
        listener_endpoints=[],
        admin_authentication="bearer",
        admin_bearer_token="t0ken",
        admin_bearer_principal="User:op",
        failed_authentication_burst_per_ip=0,  # every operation gets a wrong token: no 429
    )
    server.authorizer = Switch()
    client = TestClient(TestServer(create_app(server)))
    await client.start_server()
    try:
        document = await (
            await client.get("/openapi.json", headers={"Authorization": "Bearer t0ken"})
        ).json()
        assert document["paths"] == openapi_document(("bearer",), True)["paths"]
        server.authorizer.allow = False
        for path, item in document["paths"].items():
            concrete = path.replace("{name}", "t").replace("{id}", "1")
            for method, operation in item.items():
                if operation["security"] == []:
                    continue
                for token in (None, "Bearer wrong"):
                    headers = {"Authorization": token} if token else {}
                    answer = await client.request(method, concrete, headers=headers)
                    assert answer.status == 401, (method, path, token)
                    assert answer.headers["WWW-Authenticate"] == WWW_AUTHENTICATE
                    m.Error.model_validate(await answer.json())
                answer = await client.request(
                    method, concrete, headers={"Authorization": "Bearer t0ken"}, json={}
                )
                assert answer.status == 403, (method, path)
                assert m.Error.model_validate(await answer.json()).error == "forbidden"
        assert (await client.get("/openapi.json")).status == 401
        for path in ("/console/app.js", "/", "/docs", "/health"):
            assert (await client.get(path)).status == 200, path
        # the console's own requests are challenged without Basic: no browser dialog
        answer = await client.get("/cluster", headers={"X-Kafkalite-Console": "1"})
        assert answer.status == 401
        assert answer.headers["WWW-Authenticate"] == CONSOLE_CHALLENGE
        assert "basic" not in answer.headers["WWW-Authenticate"].lower()
    finally:
        await client.close()
