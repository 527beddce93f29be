"""The console, the API reference page, the console's files and /openapi.json."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import route

CONSOLE_DIR = Path(__file__).parent.parent / "console"
CONSOLE_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def console_file(name: str) -> web.Response:
    """A file of the console (console/), by plain name only: no path leaves the directory."""
    kind = CONSOLE_TYPES.get(Path(name).suffix)
    path = CONSOLE_DIR / name
    if kind is None or "/" in name or name.startswith(".") or not path.is_file():
        raise AdminError.not_found(f"no console file {name!r}")
    return web.Response(
        body=path.read_bytes(),
        content_type=kind,
        charset="utf-8",
        headers={"Cache-Control": "no-cache"},
    )


class ConsoleRoutes(ApiBase):
    """The pages and files served from the package, and the OpenAPI document."""

    @route("GET", "/", summary="Console", tag="health", content_type="text/html")
    async def console(self, request: web.Request) -> web.Response:
        """The operator console: a single page (console/index.html and its modules) over
        this API."""
        return console_file("index.html")

    @route("GET", "/docs", summary="API reference", tag="health", content_type="text/html")
    async def docs(self, request: web.Request) -> web.Response:
        """A page rendering /openapi.json, served from the package (console/docs.html)."""
        return console_file("docs.html")

    async def console_asset(self, request: web.Request) -> web.Response:
        """The console's own files (console/*.js, *.css), not documented as API routes."""
        return console_file(request.match_info["file"])

    async def openapi(self, request: web.Request) -> web.Response:
        from kafkalite.admin.openapi import openapi_document
        from kafkalite.admin.security import document_security

        # not itself documented; states this broker's authentication and ACLs
        return web.json_response(openapi_document(*document_security(self.server)))
