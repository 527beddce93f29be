"""SocketServer: accepts Kafka protocol connections on the broker's listeners.

One asyncio server per entry of `listeners` (`PLAINTEXT://host:port`; port 0 binds a free port,
reported by `bound_endpoints`). Each accepted socket gets a `KafkaConnection` (framing and the
in-order pipeline, see connection.py) that hands frames to the `RequestDispatcher`.

Shutdown happens in the order Kafka's SocketServer uses: `stop_accepting()` closes the listening
sockets, `drain()` waits (with a deadline) for requests already read to be answered, and
`close_connections()` closes what remains. Connections without traffic for
`connections.max.idle.ms` are closed, as Kafka does. `stop_reading()` in between keeps clients from sending
more work on connections that are already open.
"""

from __future__ import annotations

import asyncio
import ctypes
import socket
import time

import structlog

from kafkalite.config import Endpoint
from kafkalite.network.connection import (
    DEFAULT_MAX_IN_FLIGHT,
    KafkaConnection,
    ReceiveBuffer,
    RequestDispatcher,
)

log = structlog.get_logger("kafkalite.network")

TRIM_AFTER_CLOSES = 256
TRIM_DELAY_SECONDS = 1.0


def _malloc_trim() -> None:
    """Give the C heap's free pages back to the OS (glibc's malloc_trim; a no-op elsewhere).

    glibc keeps what the buffers and transports of closed connections freed inside its heap
    (only the top of the heap is returned by free()); after thousands of connections closed,
    that is tens of MB the broker would keep for ever. One call takes a few ms."""
    trim = getattr(_libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None)
except OSError:
    _libc = None


def install_uvloop() -> bool:
    """Use uvloop's event loop policy when it is installed; return whether it is."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


class SocketServer:
    def __init__(
        self,
        endpoints: list[Endpoint],
        dispatcher: RequestDispatcher,
        *,
        max_request_bytes: int,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        connections_max_idle_ms: int = 600_000,
    ) -> None:
        self._endpoints = endpoints
        self._dispatcher = dispatcher
        self._max_request_bytes = max_request_bytes
        self._max_in_flight = max_in_flight
        self._servers: list[tuple[Endpoint, asyncio.Server]] = []
        self._connections: set[KafkaConnection] = set()
        self._receive_buffer = ReceiveBuffer()
        self._closed_since_trim = 0
        self._trim: asyncio.TimerHandle | None = None
        self._last_close = 0.0
        self._max_idle_s = connections_max_idle_ms / 1000
        self._idle_reaper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for endpoint in self._endpoints:
            name = endpoint.listener_name

            def factory(name: str = name) -> KafkaConnection:
                conn = KafkaConnection(
                    self._dispatcher,
                    name,
                    self._max_request_bytes,
                    max_in_flight=self._max_in_flight,
                    on_close=self._connection_closed,
                    receive_buffer=self._receive_buffer,
                )
                self._connections.add(conn)
                return conn

            server = await loop.create_server(
                factory,
                host=endpoint.host or None,
                port=endpoint.port,
                reuse_address=True,
                backlog=512,
            )
            for sock in server.sockets:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._servers.append((endpoint, server))
        log.info("listening", listeners=[e.connection_string for e in self.bound_endpoints])
        self._idle_reaper = loop.create_task(self._close_idle_connections(), name="idle-reaper")

    def _connection_closed(self, conn: KafkaConnection) -> None:
        self._connections.discard(conn)
        self._closed_since_trim += 1
        self._last_close = time.monotonic()
        if self._closed_since_trim >= TRIM_AFTER_CLOSES and self._trim is None:
            self._trim = asyncio.get_running_loop().call_later(
                TRIM_DELAY_SECONDS, self._release_freed_memory
            )

    def _release_freed_memory(self) -> None:
        """Trim once a burst of closes is over (one trim per burst, not one per close)."""
        quiet_for = time.monotonic() - self._last_close
        if quiet_for < TRIM_DELAY_SECONDS:
            self._trim = asyncio.get_running_loop().call_later(
                TRIM_DELAY_SECONDS - quiet_for, self._release_freed_memory
            )
            return
        self._trim = None
        self._closed_since_trim = 0
        _malloc_trim()

    async def _close_idle_connections(self) -> None:
        """Close connections idle for connections.max.idle.ms (checked every tenth of it)."""
        interval = max(0.01, min(self._max_idle_s / 10, 30.0))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self._connections):
                conn.close_if_idle(self._max_idle_s, now)

    @property
    def bound_endpoints(self) -> list[Endpoint]:
        """The listeners with the ports actually bound (differs from config for port 0)."""
        out = []
        for endpoint, server in self._servers:
            port = server.sockets[0].getsockname()[1] if server.sockets else endpoint.port
            out.append(Endpoint(endpoint.listener_name, endpoint.host, port))
        return out

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def stop_accepting(self) -> None:
        if self._idle_reaper is not None:
            self._idle_reaper.cancel()
            self._idle_reaper = None
        for _, server in self._servers:
            server.close()
        for _, server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 0.5)
            except TimeoutError:
                pass  # wait_closed waits for connections too (3.12+); we drain those ourselves

    def stop_reading(self) -> None:
        """Read no further requests on the open connections (shutdown); answers still go out."""
        for conn in list(self._connections):
            conn.stop_reading()

    async def drain(self, timeout: float) -> bool:
        """Wait until in-flight requests are answered; False if the deadline passed first."""
        waits = [conn.wait_idle() for conn in list(self._connections) if conn.in_flight]
        if not waits:
            return True
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
            return True
        except TimeoutError:
            return False

    def close_connections(self) -> None:
        for conn in list(self._connections):
            conn.close()
        self._connections.clear()

    async def shutdown(self, drain_timeout: float = 5.0) -> None:
        await self.stop_accepting()
        await self.drain(drain_timeout)
        self.close_connections()
