"""ApiDispatcher: frame -> header -> handler -> encoded response (network's RequestDispatcher).

Kafka's rules for requests the broker cannot serve (SocketServer / RequestContext.parseRequest):
- ApiVersions at a version above ours: answered, as ApiVersions v0 with UNSUPPORTED_VERSION and
  our version list, so the client can retry with a version we know (KIP-511).
- Any other unknown API key or unsupported version, or a body that does not decode: the
  connection is closed. Bytes after a complete body are ignored, as Kafka does (the protocol
  layer's decoder; Produce has its own, same rule) (an InvalidRequestError raised synchronously; the network layer logs it
  once with the client address).

Parsing and decoding happen synchronously in `dispatch`, so a bad frame closes the connection
before any later request on it is looked at. Handlers that return a plain value are encoded at once
(no task is created); `async` handlers return an awaitable the connection schedules.
"""

from __future__ import annotations

import asyncio
import inspect
from time import perf_counter
from typing import Any

import structlog

from kafkalite.admin.metrics import RequestStats, response_size
from kafkalite.apis.base import DECODERS, HANDLERS, BrokerServices, RequestContext
from kafkalite.network.connection import NO_RESPONSE, ConnectionInfo
from kafkalite.protocol import frames
from kafkalite.protocol.api import (
    ADVERTISED_VERSIONS,
    INTER_BROKER_KEYS,
    ApiKey,
    response_class,
    supported_versions,
)

log = structlog.get_logger("kafkalite.apis")

ALWAYS_SERVED = frozenset({*INTER_BROKER_KEYS, ApiKey.API_VERSIONS})
"""Served while the broker is still starting: what the controller's channel needs."""


def advertised_versions(handlers: dict[int, Any] | None = None) -> dict[int, tuple[int, int]]:
    """What ApiVersions advertises: the advertised ranges of the keys that have a handler."""
    keys = HANDLERS if handlers is None else handlers
    return {
        int(k): v
        for k, v in supported_versions(k for k in keys if k in ADVERTISED_VERSIONS).items()
    }


class ApiDispatcher:
    def __init__(self, services: BrokerServices, handlers: dict[int, Any] | None = None) -> None:
        self.services = services
        self.handlers = HANDLERS if handlers is None else handlers
        self.versions = advertised_versions(self.handlers)
        services.api_versions = self.versions
        self.stats = RequestStats()
        """Per-API count, latency and bytes (the admin API's /metrics); one record per request."""
        self.ready = asyncio.Event()
        """Set when the broker has started; client requests read before that wait for it.
        Controller requests (LeaderAndIsr, UpdateMetadata, ...) are served at once: start-up
        waits for the controller's first UpdateMetadata."""

    def dispatch(self, frame: bytearray, connection: ConnectionInfo) -> Any:
        started = perf_counter()
        header, body_offset = frames.parse_request_header(frame)
        api_key = header.api_key
        if not self.ready.is_set() and api_key not in ALWAYS_SERVED:
            return self._dispatch_when_ready(frame, connection)
        if api_key == ApiKey.API_VERSIONS and header.api_version > self.versions[api_key][1]:
            return frames.api_versions_fallback(header.correlation_id, self.versions)
        frames.ensure_supported(header, self.versions)
        handler = self.handlers[api_key]
        decoder = DECODERS.get(api_key) or frames.decode_request
        request = decoder(header, frame, body_offset)
        ctx = RequestContext(
            header, connection, self.services, response_class(api_key, header.api_version)
        )
        result = handler(ctx, request)
        if inspect.isawaitable(result):
            return self._finish(header, result, started, len(frame))
        encoded = self._encode(header, result)
        self.stats.record(api_key, perf_counter() - started, len(frame), response_size(encoded))
        return encoded

    async def _dispatch_when_ready(self, frame: bytearray, connection: ConnectionInfo) -> Any:
        await self.ready.wait()
        result = self.dispatch(frame, connection)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _finish(self, header: Any, pending: Any, started: float, bytes_in: int) -> Any:
        encoded = self._encode(header, await pending)
        self.stats.record(
            header.api_key, perf_counter() - started, bytes_in, response_size(encoded)
        )
        return encoded

    @staticmethod
    def _encode(header: Any, result: Any) -> Any:
        if result is NO_RESPONSE or isinstance(result, list):
            return result  # nothing to send, or an already encoded frame (Fetch)
        return frames.encode_response(header, result)
