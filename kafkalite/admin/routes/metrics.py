"""The broker's counters: /metrics (Prometheus text format) and /metrics/history."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.access import Access
from kafkalite.admin.metrics import render_async
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import route


class MetricsRoutes(ApiBase):
    """The Prometheus exposition and the in-memory history of rates."""

    @route(
        "GET",
        "/metrics/history",
        summary="Metrics history",
        tag="metrics",
        answer=m.MetricsHistory,
        query=m.HistoryQuery,
    )
    async def metrics_history(self, request: web.Request, query: m.HistoryQuery) -> Any:
        return self.history.answer(query.topic, visible=Access(self.server, request).topic)

    @route(
        "GET",
        "/metrics",
        summary="Prometheus metrics",
        tag="metrics",
        content_type="text/plain",
    )
    async def metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        # series labelled by a topic or a group the principal may not see are left out
        body = await render_async(self.registry, Access(self.server, request).labels())
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response
