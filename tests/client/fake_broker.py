"""An in-test Kafka broker stand-in speaking the wire protocol through kafkalite's own codec.

It answers ApiVersions (with a configurable table, and the v0 UNSUPPORTED_VERSION fallback for
versions above it), Metadata (its configured brokers and topics), and whatever ``handlers``
(api_key -> callable(header, request) -> response | None) provide; None means "no answer".
Every decoded request is recorded in ``requests``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import Any

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, response_class, supported_versions
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.frames import (
    RequestHeader,
    api_versions_fallback,
    api_versions_response,
    decode_request,
    encode_response,
    parse_request_header,
)

Handler = Callable[[RequestHeader, Any], Any]


class FakeBroker:
    def __init__(
        self,
        node_id: int = 0,
        versions: dict[int, tuple[int, int]] | None = None,
        handlers: dict[int, Handler] | None = None,
    ) -> None:
        self.node_id = node_id
        self.versions = versions or {
            int(k): v
            for k, v in supported_versions(
                [
                    ApiKey.METADATA,
                    ApiKey.PRODUCE,
                    ApiKey.FETCH,
                    ApiKey.LIST_OFFSETS,
                    ApiKey.CREATE_TOPICS,
                    ApiKey.DELETE_TOPICS,
                ]
            ).items()
        }
        self.handlers = handlers or {}
        self.api_versions_error = ErrorCode.NONE
        self.requests: list[tuple[RequestHeader, Any]] = []
        self.cluster: list[tuple[int, int]] = []  # (node_id, port) of every broker
        self.controller_id = node_id
        self.topics: dict[str, list[int]] = {}  # topic -> leader per partition
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        if not self.cluster:
            self.cluster = [(self.node_id, self.port)]
        return self

    async def stop(self) -> None:
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def drop_connections(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()

    def reset_connections(self) -> None:
        """Close every connection with a reset (RST), as the kernel of a killed peer does."""
        for writer in list(self._writers):
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

    def requests_of(self, api_key: int) -> list[tuple[RequestHeader, Any]]:
        return [(h, r) for h, r in self.requests if h.api_key == api_key]

    def metadata(self, header: RequestHeader, request: Any) -> Any:
        cls = response_class(ApiKey.METADATA, header.api_version)
        wanted = None if request.topics is None else [t.name for t in request.topics]
        names = sorted(self.topics) if wanted is None else wanted
        return build_message(
            cls,
            brokers=[{"node_id": n, "host": "127.0.0.1", "port": p} for n, p in self.cluster],
            cluster_id="fake",
            controller_id=self.controller_id,
            topics=[
                {
                    "name": name,
                    "error_code": 0 if name in self.topics else 3,
                    "partitions": [
                        {
                            "partition_index": i,
                            "leader_id": leader,
                            "leader_epoch": 0,
                            "replica_nodes": [leader],
                            "isr_nodes": [leader],
                        }
                        for i, leader in enumerate(self.topics.get(name, []))
                    ],
                }
                for name in names
            ],
        )

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                payload = await reader.readexactly(size)
                header, offset = parse_request_header(payload)
                key = header.api_key
                if key == ApiKey.API_VERSIONS and header.api_version > self.versions[key][1]:
                    self.requests.append((header, None))
                    writer.write(api_versions_fallback(header.correlation_id, self.versions))
                    continue
                request = decode_request(header, payload, offset)
                self.requests.append((header, request))
                if key == ApiKey.API_VERSIONS:
                    response = api_versions_response(
                        header.api_version, self.versions, error_code=self.api_versions_error
                    )
                elif key in self.handlers:
                    response = self.handlers[key](header, request)
                    if asyncio.iscoroutine(response):
                        response = await response
                elif key == ApiKey.METADATA:
                    response = self.metadata(header, request)
                else:
                    response = None
                if response is not None:
                    writer.write(
                        response
                        if isinstance(response, bytes)
                        else encode_response(header, response)
                    )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
