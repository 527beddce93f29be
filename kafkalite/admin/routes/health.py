"""Liveness and readiness: /health and /ready."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import Reply, route


class HealthRoutes(ApiBase):
    """/health and /ready (open: no credentials)."""

    @route("GET", "/health", summary="Health", tag="health", answer=m.Health)
    async def health(self, request: web.Request) -> Any:
        return {"status": "ok", "broker_id": self.server.broker_id}

    @route("GET", "/ready", summary="Readiness", tag="health", answer=m.Ready, also=(503,))
    async def ready(self, request: web.Request) -> Any:
        from kafkalite.coord.base import SessionState

        server = self.server
        session = server.services.store
        checks = {
            "listening": bool(server.socket_server is not None and server.bound_endpoints),
            "coordination_session": bool(
                session is not None and session.state is SessionState.CONNECTED
            ),
            "logs_loaded": server.log_manager is not None,
            "started": bool(server.dispatcher.ready.is_set()),
        }
        ok = all(checks.values())
        return Reply({"ready": ok, "checks": checks}, 200 if ok else 503)
