"""What keeps a browser from driving the admin API for another site (cross-site request
forgery) and the console from being framed or fed another site's script.

A browser attaches basic credentials to any request it sends to the API, whatever page sends
it; a page of another site can send a POST with a "simple" content type (text/plain, a form)
without asking the API first. So:

- a request with a body must say ``Content-Type: application/json`` (415
  UNSUPPORTED_MEDIA_TYPE otherwise): another site's page cannot send that type without a CORS
  preflight, which the API never grants;
- a state-changing request (POST, PUT, PATCH, DELETE) whose ``Origin`` (or, without one,
  ``Referer``) is not the API's own origin is refused 403 CROSS_ORIGIN_REQUEST. Same origin means
  the same scheme, host and port as the request's own (its ``Host`` header, over http or
  https as it arrived); ``Origin: null`` (a sandboxed or file page) is cross-origin. A request
  with neither header (curl, the CLI, kafkalite.testing) is not a browser's and passes;
- every response carries ``Content-Security-Policy`` (scripts, styles and connections from the
  API's own origin only; no framing, no plugins), ``X-Frame-Options: DENY``,
  ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin``.

The check runs before authentication, so a forged request is refused whoever it would act for.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON = "application/json"
DEFAULT_PORTS = {"http": 80, "https": 443}

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL or Origin value; None when it has none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def own_origin(request: web.Request) -> tuple[str, str, int] | None:
    """The request's own origin: how it arrived (http/https) and its Host header."""
    return _origin(f"{request.scheme}://{request.host}")


def is_cross_origin(request: web.Request) -> bool:
    """True when the request's Origin (else Referer) names another origin than its own."""
    claimed = request.headers.get("Origin")
    if claimed is None:
        claimed = request.headers.get("Referer")
        if claimed is None:
            return False
    found = _origin(claimed)
    return found is None or found != own_origin(request)


def _refuse(status: int, error: str, message: str) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps({"error": error, "message": message}),
        content_type=JSON,
    )


@web.middleware
async def csrf_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method in STATE_CHANGING and is_cross_origin(request):
        return _refuse(
            403,
            "CROSS_ORIGIN_REQUEST",
            "a state-changing request from another origin (Origin / Referer) is refused",
        )
    if request.body_exists and request.content_type != JSON:
        return _refuse(
            415,
            "UNSUPPORTED_MEDIA_TYPE",
            f"a request body must be {JSON}, got {request.content_type or 'none'}",
        )
    return await handler(request)


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """An on_response_prepare hook: every answer, errors and aiohttp's own included."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
