"""The registry's HTTP listener in the broker's loop (`schema.registry.listeners`, one
http(s)://host:port; empty: none), built by the composition root.

Like the admin API, a listener that cannot be bound is logged and the broker runs on without
it. Authentication and TLS are the admin API's (admin/security.py), applied by a middleware
that answers in Confluent's error format: 401 (40101, with WWW-Authenticate), 403 (40301), 429
for an address over the failed-authentication limit.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from aiohttp import web

from kafkalite.schema_registry import errors
from kafkalite.schema_registry.app import (
    MEDIA_TYPE,
    RegistryApi,
    error_middleware,
    openapi_document,
    route_specs,
)
from kafkalite.schema_registry.registry import Registry
from kafkalite.schema_registry.store import SchemaStore

log = structlog.get_logger("kafkalite.schema_registry")

BODY_OVERHEAD = 1024 * 1024
"""Room in a request beyond the schema size limit (JSON escaping, references): a body larger
than that is refused 413 before it is read; a schema over the limit inside a body that fits is
refused 422 naming the limit."""


def _error(status: int, code: int, message: str, **headers: str) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps({"error_code": code, "message": message}),
        content_type=MEDIA_TYPE,
        headers=headers,
    )


def security_middleware(server: Any) -> Any:
    """admin.authentication's schemes and the authorizer, as the admin API applies them
    (admin/security.py): reads need DESCRIBE on the cluster, writes ALTER on the cluster."""
    from kafkalite.admin.security import (
        WWW_AUTHENTICATE,
        authenticate,
        authentication_modes,
        caller_of,
    )
    from kafkalite.protocol.acl import AclOperation as Op
    from kafkalite.protocol.acl import ResourceType as T
    from kafkalite.security.acl import CLUSTER_NAME
    from kafkalite.security.ratelimit import FailedAuthLimiter

    config = server.config
    modes = authentication_modes(config)
    limiter = FailedAuthLimiter.from_config(config)

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        principal = "User:ANONYMOUS"
        if modes:
            source = request.remote or ""
            presented = limiter is not None and "Authorization" in request.headers
            if presented:
                wait = limiter.retry_after(source)  # type: ignore[union-attr]
                if wait > 0:
                    return _error(
                        429,
                        42901,
                        "too many failed authentications from this address",
                        **{"Retry-After": str(max(1, int(wait + 0.999)))},
                    )
            found = await authenticate(server, request, modes)
            if found is None:
                if presented:
                    limiter.failed(source)  # type: ignore[union-attr]
                return _error(
                    401,
                    errors.UNAUTHORIZED,
                    "credentials required: " + " or ".join(sorted(modes)),
                    **{"WWW-Authenticate": WWW_AUTHENTICATE},
                )
            principal = found
        authorizer = getattr(server, "authorizer", None)
        if authorizer is not None:
            op = Op.DESCRIBE if request.method in ("GET", "HEAD") else Op.ALTER
            if not authorizer.allowed(caller_of(request, principal), op, T.CLUSTER, CLUSTER_NAME):
                return _error(403, errors.FORBIDDEN, f"{principal} may not {op.name} the cluster")
        return await handler(request)

    return middleware


def create_app(server: Any, registry: Registry) -> web.Application:
    from kafkalite.admin.security import document_security

    api = RegistryApi(registry)
    app = web.Application(
        middlewares=[error_middleware, security_middleware(server)],
        client_max_size=registry.max_schema_bytes * 2 + BODY_OVERHEAD,
    )
    for name, spec in route_specs():
        if spec.method == "GET":
            app.router.add_get(spec.path, getattr(api, name))
        else:
            app.router.add_route(spec.method, spec.path, getattr(api, name))
    schemes, _ = document_security(server)

    async def document(request: web.Request) -> web.Response:
        return web.json_response(openapi_document(schemes))

    app.router.add_get("/openapi.json", document)
    return app


class SchemaRegistryServer:
    def __init__(self, server: Any, url: str) -> None:
        self.server = server
        self.url = url
        self.runner: web.AppRunner | None = None
        self.site: web.TCPSite | None = None
        self.bound_port: int | None = None
        self.registry: Registry | None = None

    @staticmethod
    def parse_url(url: str) -> tuple[str, int]:
        from kafkalite.config import parse_endpoints

        endpoint = parse_endpoints(url, "schema.registry.listeners")[0]
        return endpoint.host, endpoint.port

    def _bootstrap(self) -> str:
        listener = self.server.inter_broker_listener
        endpoints = [
            e for e in self.server.advertised_endpoints if e.listener_name == listener
        ] or self.server.advertised_endpoints
        return ",".join(f"{e.host}:{e.port}" for e in endpoints)

    async def start(self) -> None:
        from kafkalite.admin.app import start_site

        config = self.server.config
        store = SchemaStore(self._bootstrap(), f"kafkalite-schema-registry-{self.server.broker_id}")
        self.registry = Registry(store, config.schema_registry_max_schema_bytes)
        host, port = self.parse_url(self.url)
        started = await start_site(
            create_app(self.server, self.registry),
            self.url,
            host,
            port,
            config,
            log,
            "schema registry",
        )
        if started is not None:
            self.runner, self.site, self.bound_port = started

    @property
    def bound_url(self) -> str | None:
        if self.site is None or self.bound_port is None:
            return None
        host, _ = self.parse_url(self.url)
        scheme = "https" if self.url.lower().startswith("https://") else "http"
        return f"{scheme}://{host or '127.0.0.1'}:{self.bound_port}"

    async def stop(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
        if self.registry is not None:
            await self.registry.close()
