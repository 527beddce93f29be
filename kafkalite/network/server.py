"""SocketServer: accepts Kafka protocol connections on the broker's listeners.

Listening sockets for each entry of `listeners` (`PLAINTEXT://host:port`; port 0 binds a free
port, reported by `bound_endpoints`), each with its acceptor task, Kafka's Acceptor: it accepts
one connection, waits for a slot and counts it under the connection limits (quotas.py: at
`max.connections` it accepts nothing more until a connection closes; one address past
`max.connections.per.ip` is closed at once), then gives it a `KafkaConnection` (framing and the
in-order pipeline, see connection.py) that hands frames to the `RequestDispatcher`. Accepted
sockets get TCP_NODELAY and SO_KEEPALIVE, as in Kafka. `start()` raises the soft limit of open
files to the hard one (the JVM does so for Kafka), so the limits above, not the process's file
descriptors, decide how many clients are served.

Security (kafkalite/security/): a listener with a TLS context (SSL, SASL_SSL) wraps each
accepted socket in TLS; the handshake runs on its own task, not in the acceptor. Before the first
byte is read, the connection gets its principal from the client certificate (mTLS,
ssl.principal.mapping.rules) and, on a SASL listener, the SASL authenticator the dispatcher
consults before anything else; until it has authenticated, the connection's frames are capped at
`sasl.server.max.receive.size`, and its failed attempts count against its address (one
`FailedAuthLimiter` for all listeners) and are answered after
`connection.failed.authentication.delay.ms`.

Shutdown happens in the order Kafka's SocketServer uses: `stop_accepting()` closes the listening
sockets, `drain()` waits (with a deadline) for requests already read to be answered, and
`close_connections()` closes what remains. Connections without traffic for
`connections.max.idle.ms` are closed, as Kafka does. `stop_reading()` in between keeps clients from sending
more work on connections that are already open.

Memory after connections close: nothing of a closed connection stays in the server's tables
(`_connections`, the quotas' per-address counts). Once a burst of at least `TRIM_AFTER_CLOSES`
closes has been quiet for `TRIM_DELAY_SECONDS`, the server gives back what the burst left:
`_connections` is copied into a set of its present size when it has shrunk to a quarter of its
peak (a Python set never shrinks its table: 10,000 connections left 1 MiB behind), and glibc's
`malloc_trim(0)` returns the free pages of the C heap to the OS, on an executor thread (it
walks the whole heap) and at most once per `TRIM_MIN_INTERVAL_SECONDS`. CPython's small-object
allocator returns an arena only once every object in it is freed, and the broker's steady work
keeps a few objects in every arena of a burst (decisions 0040 and 0067); the C extension
`_pools` gives back all but the first page of each empty 16 KiB pool in those arenas (decision
0074), on the loop, right before the trim.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import resource
import socket
import time
from typing import Any

import structlog

from kafkalite.config import Endpoint, native_module
from kafkalite.network.connection import (
    DEFAULT_MAX_IN_FLIGHT,
    ConnectionInfo,
    KafkaConnection,
    ReceiveBuffer,
    RequestDispatcher,
)
from kafkalite.network.quotas import ConnectionQuotas
from kafkalite.security.listeners import ListenerSecurity
from kafkalite.security.ratelimit import FailedAuthLimiter
from kafkalite.security.sasl import CredentialLookup
from kafkalite.security.tls import subject_dn

log = structlog.get_logger("kafkalite.network")

LISTEN_BACKLOG = 512
ACCEPT_ERROR_BACKOFF_SECONDS = 0.1
TRIM_AFTER_CLOSES = 256
TRIM_DELAY_SECONDS = 1.0
TRIM_MIN_INTERVAL_SECONDS = 10.0
SHRINK_BELOW_SHARE_OF_PEAK = 0.25
TLS_HANDSHAKE_TIMEOUT_S = 10.0


def _malloc_trim() -> None:
    """Give the C heap's free pages back to the OS (glibc's malloc_trim; a no-op elsewhere).

    glibc keeps what the buffers and transports of closed connections freed inside its heap
    (only the top of the heap is returned by free()); after thousands of connections closed,
    that is tens of MB the broker would keep for ever. One call takes a few ms."""
    if _libc_malloc_trim is not None:
        _libc_malloc_trim(0)


try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None)
except OSError:
    _libc = None
_libc_malloc_trim = getattr(_libc, "malloc_trim", None)
"""Looked up once, at import: ctypes makes the function object (and its dicts) on first use,
which would otherwise be at the end of the first burst of closes, among the objects that pin
that burst's arenas (decision 0067)."""


_pools = native_module("kafkalite.network._pools")
"""Imported with this module, early in a broker's start: the extension keeps the address of
every arena CPython allocates from its import on, and only those arenas are visited. None
without the C extension or with KAFKALITE_NO_NATIVE set: the empty pools stay resident."""
_release_empty_pools = None if _pools is None else _pools.release


def release_empty_pools() -> tuple[int, int, int] | None:
    """Give back the pages of the empty pools in CPython's arenas (decision 0074): (arenas
    visited, pools, bytes), or None when the extension is missing or has stopped (a pool
    header it does not recognise, an arena allocator installed after it: said once in the log,
    and nothing is changed then or later)."""
    global _release_empty_pools
    if _release_empty_pools is None:
        return None
    try:
        return _release_empty_pools()
    except RuntimeError as e:
        _release_empty_pools = None
        log.warning("empty pools are no longer given back", reason=str(e))
        return None


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and soft != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open file limit", soft=soft, hard=hard, error=str(e))
    return soft


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
        max_unauthenticated_bytes: int | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        connections_max_idle_ms: int = 600_000,
        quotas: ConnectionQuotas | None = None,
        security: dict[str, ListenerSecurity] | None = None,
        credentials: CredentialLookup | None = None,
        failed_authentication_delay_ms: int = 0,
        auth_limiter: FailedAuthLimiter | None = None,
        scram_unknown_user_secret: bytes | None = None,
    ) -> None:
        self._endpoints = endpoints
        self._security = security or {}
        """Listener name -> its TLS context and SASL settings (absent: PLAINTEXT)."""
        self._credentials = credentials
        self._failed_authentication_delay_ms = failed_authentication_delay_ms
        self._scram_unknown_user_secret = scram_unknown_user_secret
        self.auth_limiter = auth_limiter
        """Failed SASL authentications per client address, for every listener (None: no
        limit)."""
        self._dispatcher = dispatcher
        self._max_request_bytes = max_request_bytes
        self._max_unauthenticated_bytes = max_unauthenticated_bytes
        """sasl.server.max.receive.size: the frame limit of a SASL connection until it has
        authenticated (connection.py)."""
        self._max_in_flight = max_in_flight
        self.quotas = quotas or ConnectionQuotas(
            listeners=tuple(e.listener_name for e in endpoints)
        )
        self._listening: list[tuple[Endpoint, socket.socket]] = []
        self._acceptors: list[asyncio.Task[None]] = []
        self._bound_ports: list[tuple[Endpoint, int]] = []
        self._connections: set[KafkaConnection] = set()
        self._receive_buffer = ReceiveBuffer()
        self._connections_peak = 0
        """The most connections `_connections` held since it was last rebuilt."""
        self._closed_since_trim = 0
        self._trim: asyncio.TimerHandle | None = None
        self._last_close = 0.0
        self._last_trim = -TRIM_MIN_INTERVAL_SECONDS
        self._max_idle_s = connections_max_idle_ms / 1000
        self._idle_reaper: asyncio.Task[None] | None = None

    def replace_ssl_context(self, listener: str, ssl_context: Any) -> None:
        """A new TLS context for `listener` (a dynamic keystore or truststore change): the
        connections accepted from now on use it; those already made keep theirs."""
        security = self._security.get(listener)
        if security is not None:
            security.ssl_context = ssl_context

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        raise_open_file_limit()
        await self.quotas.resolve_overrides()
        try:
            for endpoint in self._endpoints:
                for sock in await _listening_sockets(loop, endpoint):
                    self._listening.append((endpoint, sock))
                    self._bound_ports.append((endpoint, sock.getsockname()[1]))
        except BaseException:
            for _, sock in self._listening:
                sock.close()
            self._listening.clear()
            raise
        for endpoint, sock in self._listening:
            acceptor = loop.create_task(
                self._accept_connections(endpoint.listener_name, sock),
                name=f"acceptor-{endpoint.listener_name}",
            )
            acceptor.add_done_callback(_report_acceptor_failure)
            self._acceptors.append(acceptor)
        log.info("listening", listeners=[e.connection_string for e in self.bound_endpoints])
        self._idle_reaper = loop.create_task(self._close_idle_connections(), name="idle-reaper")

    async def _accept_connections(self, listener: str, sock: socket.socket) -> None:
        """Kafka's Acceptor for one listening socket (module docstring)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn_sock, address = await loop.sock_accept(sock)
            except OSError as e:
                # Out of file descriptors, or the peer gone before accept: keep listening.
                log.warning("accept failed", listener=listener, error=str(e))
                await asyncio.sleep(ACCEPT_ERROR_BACKOFF_SECONDS)
                continue
            try:
                await self._take_connection(listener, conn_sock, address)
            finally:
                del conn_sock, address  # a closed connection is not kept by this frame

    async def _take_connection(
        self, listener: str, conn_sock: socket.socket, address: tuple[Any, ...]
    ) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        try:
            await quotas.wait_for_slot(listener)
        except BaseException:
            conn_sock.close()
            raise
        ip = str(address[0])
        if not quotas.inc(listener, ip):
            log.info(
                "rejected connection: the address already has its maximum of connections",
                client=ip,
                max_connections=quotas.limit_for(ip),
                listener=listener,
            )
            conn_sock.close()
            quotas.dec(listener, ip)
            return
        info = ConnectionInfo(ip, int(address[1]), listener)
        security = self._security.get(listener)
        conn = KafkaConnection(
            self._dispatcher,
            listener,
            self._max_request_bytes,
            max_in_flight=self._max_in_flight,
            on_close=self._connection_closed,
            receive_buffer=self._receive_buffer,
            info=info,
            on_made=None if security is None else self._secure_connection_made,
            max_unauthenticated_bytes=self._max_unauthenticated_bytes,
        )
        self._connections.add(conn)
        if len(self._connections) > self._connections_peak:
            self._connections_peak = len(self._connections)
        try:
            conn_sock.setblocking(False)
            if conn_sock.family in (socket.AF_INET, socket.AF_INET6):
                conn_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn_sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            ssl_context = security.ssl_context if security is not None else None
            if ssl_context is not None:
                # The TLS handshake runs on its own: the acceptor does not wait for it (one slow
                # client would hold every other connection of the listener).
                setup = asyncio.ensure_future(
                    loop.connect_accepted_socket(
                        lambda: conn,
                        conn_sock,
                        ssl=ssl_context,
                        ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
                    )
                )
                setup.add_done_callback(functools.partial(self._tls_setup_done, conn=conn, ip=ip))
                return
            setup = asyncio.ensure_future(loop.connect_accepted_socket(lambda: conn, conn_sock))
            setup.add_done_callback(_retrieve_outcome)
            # Shielded: a shutdown that stops accepting lets a connection already accepted
            # be set up (and then drained and closed like the others), as asyncio's server
            # does; closing it half-made sent a client into reconnecting mid-shutdown.
            await asyncio.shield(setup)
        except OSError as e:  # reset by the peer meanwhile
            conn_sock.close()
            self._connection_closed(conn)  # released once: a later connection_lost is a no-op
            log.info("connection lost while being set up", client=ip, error=str(e))
            return
        if quotas.protected_listener == listener:
            self._close_one_over_the_limit()

    def _tls_setup_done(self, task: asyncio.Future[Any], conn: KafkaConnection, ip: str) -> None:
        if task.cancelled() or task.exception() is not None:
            error = "cancelled" if task.cancelled() else repr(task.exception())
            log.info("TLS handshake failed", client=ip, error=error)
            self._connection_closed(conn)  # released once: a later connection_lost is a no-op

    def _secure_connection_made(
        self, info: ConnectionInfo, transport: asyncio.BaseTransport
    ) -> None:
        """Before the first byte is read: the TLS principal (mTLS) and, on a SASL listener, the
        SASL authenticator that gates every request until the client has authenticated."""
        security = self._security[info.listener_name]
        if security.principal_mapper is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            peercert = ssl_object.getpeercert() if ssl_object is not None else None
            dn = subject_dn(peercert)
            if dn is not None:
                try:
                    info.principal = "User:" + security.principal_mapper.name(dn)
                except ValueError as e:
                    log.info("no principal for the client certificate", error=str(e))
        if security.sasl:
            info.authenticator = security.authenticator(
                self._credentials,
                client_host=info.client_host,
                limiter=self.auth_limiter,
                failed_delay_ms=self._failed_authentication_delay_ms,
                scram_unknown_user_secret=self._scram_unknown_user_secret,
            )

    def _close_one_over_the_limit(self) -> None:
        """A connection taken by the protected inter-broker listener past max.connections:
        close the least recently active connection of another listener (Kafka)."""
        candidates = [
            c
            for c in self._connections
            if c.info is not None and self.quotas.over_limit_for(c.info.listener_name)
        ]
        if candidates:
            victim = min(candidates, key=lambda c: c.last_active)
            log.info(
                "closing the least recently used connection: max.connections reached",
                client=victim.info.client_address if victim.info else "?",
            )
            victim.close()

    def _connection_closed(self, conn: KafkaConnection) -> None:
        if conn not in self._connections:
            return  # already released
        self._connections.remove(conn)
        if conn.info is not None:
            self.quotas.dec(conn.info.listener_name, conn.info.client_host)
        self._closed_since_trim += 1
        self._last_close = time.monotonic()
        if self._closed_since_trim >= TRIM_AFTER_CLOSES and self._trim is None:
            self._trim = asyncio.get_running_loop().call_later(
                TRIM_DELAY_SECONDS, self._release_freed_memory
            )

    def _release_freed_memory(self) -> None:
        """Once a burst of closes is over (one call per burst, not one per close): shrink the
        connection table and trim the C heap (module docstring)."""
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        wait = max(
            TRIM_DELAY_SECONDS - (now - self._last_close),
            TRIM_MIN_INTERVAL_SECONDS - (now - self._last_trim),
        )
        if wait > 0:
            self._trim = loop.call_later(wait, self._release_freed_memory)
            return
        self._trim = None
        self._closed_since_trim = 0
        self._last_trim = now
        self.shrink_tables()
        # on the loop: it holds the GIL throughout (no object may be allocated while it looks),
        # so a thread would hold the loop as long; about 1 ms per 100 arenas, plus 3 us per pool
        released = release_empty_pools()
        if released is not None:
            log.debug(
                "empty pools given back", arenas=released[0], pools=released[1], bytes=released[2]
            )
        try:
            loop.run_in_executor(None, _malloc_trim).add_done_callback(_retrieve_outcome)
        except RuntimeError:  # the loop's executor already shut down (the broker stopping)
            pass

    def shrink_tables(self) -> None:
        """Copy `_connections` into a set of its present size when it holds a quarter of its
        peak or less: a set's table keeps the size of its largest moment otherwise."""
        if len(self._connections) <= self._connections_peak * SHRINK_BELOW_SHARE_OF_PEAK:
            # the same set object, emptied (which frees its table) and refilled: a new set
            # would be made now, inside the arenas the burst emptied, and keep one of them
            kept = list(self._connections)
            self._connections.clear()
            self._connections.update(kept)
            self._connections_peak = len(self._connections)

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
        for endpoint in self._endpoints:
            ports = [port for e, port in self._bound_ports if e is endpoint]
            out.append(
                Endpoint(
                    endpoint.listener_name, endpoint.host, ports[0] if ports else endpoint.port
                )
            )
        return out

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def stop_accepting(self) -> None:
        if self._idle_reaper is not None:
            self._idle_reaper.cancel()
            self._idle_reaper = None
        # The listening sockets close at once, as asyncio's Server.close() does: a client
        # connecting from now on is refused rather than left in the backlog unanswered.
        loop = asyncio.get_running_loop()
        for _, sock in self._listening:
            if sock.fileno() != -1:  # not closed by an earlier call
                loop.remove_reader(sock.fileno())
                sock.close()
        for task in self._acceptors:
            task.cancel()
        await asyncio.gather(*self._acceptors, return_exceptions=True)
        self._acceptors.clear()

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
            async with asyncio.timeout(timeout):
                await asyncio.gather(*waits)
            return True
        except TimeoutError:
            return False

    def close_connections(self) -> None:
        for conn in list(self._connections):
            conn.close()

    async def shutdown(self, drain_timeout: float = 5.0) -> None:
        await self.stop_accepting()
        await self.drain(drain_timeout)
        self.close_connections()


def _retrieve_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an error after the acceptor stopped waiting: nobody else reads it


def _report_acceptor_failure(task: asyncio.Task[None]) -> None:
    """An acceptor ends only when cancelled; anything else is a bug that stops the listener
    taking connections, so it is logged loudly rather than left in a task nobody awaits."""
    if not task.cancelled() and task.exception() is not None:
        log.error(
            "acceptor failed: the listener takes no more connections",
            acceptor=task.get_name(),
            exc_info=task.exception(),
        )


async def _listening_sockets(
    loop: asyncio.AbstractEventLoop, endpoint: Endpoint
) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for one listener (every address its host
    resolves to; an empty host listens on all interfaces), as loop.create_server makes them."""
    infos = await loop.getaddrinfo(
        endpoint.host or None,
        endpoint.port,
        type=socket.SOCK_STREAM,
        flags=socket.AI_PASSIVE,
    )
    socks: list[socket.socket] = []
    try:
        for family, type_, proto, _, address in dict.fromkeys(infos):
            try:
                sock = socket.socket(family, type_, proto)
            except OSError as e:
                # e.g. no IPv6 in this kernel: listen on the other families, as asyncio does
                log.warning("cannot listen on this address family", address=address, error=str(e))
                continue
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as e:
                host, port = address[:2]
                raise OSError(
                    e.errno, f"cannot listen on {host}:{port!s}: {(e.strerror or str(e)).lower()}"
                ) from None
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    if not socks:
        raise OSError(f"cannot listen on {endpoint.connection_string}: no usable address")
    return socks
