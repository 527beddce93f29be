"""A loopback TCP proxy in front of each broker of a test cluster: real network faults.

Every broker of a ``Cluster`` advertises its proxy's port, so clients and the other brokers
(replica fetchers, the controller's channel, forwarded admin requests) all reach it through
the proxy. The proxy tells who is connecting from the first request's client id, as kafkalite
brokers name their connections (``controller-<id>``, ``broker-<id>-fetcher``,
``broker-<id>-controlled-shutdown``, ``kafkalite-forwarded-by-broker-<id>``,
``kafkalite-admin-<id>``); anything else is a client. Faults are per link (source, broker):

- cut: existing connections on the link are reset and new ones closed at once (a real partition
  as a client sees it: errors, reconnects, timeouts);
- held: bytes stop flowing both ways, connections stay open (a frozen peer: requests time out);
- latency: every chunk forwarded on the link waits that long first, in order.

One ``ProxyNetwork`` owns the link table and every ``BrokerProxy``; it runs on the cluster's
event loop. Not thread-safe: call it from that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
from collections.abc import Iterable

CLIENT = -1
"""The source of a connection that is not one of the brokers'."""

_BROKER_CLIENT_ID = re.compile(
    rb"^(?:controller-|broker-|kafkalite-forwarded-by-broker-|kafkalite-admin-)(\d+)"
)
_CHUNK = 65536


def source_of(frame: bytes) -> int:
    """The broker id a request frame (without its size) comes from, else CLIENT."""
    if len(frame) < 10:
        return CLIENT
    (length,) = struct.unpack_from(">h", frame, 8)
    if length < 0:
        return CLIENT
    match = _BROKER_CLIENT_ID.match(frame[10 : 10 + length])
    return int(match.group(1)) if match else CLIENT


class _Link:
    __slots__ = ("flowing", "latency_s")

    def __init__(self) -> None:
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.latency_s = 0.0


class ProxyNetwork:
    """The links between sources (brokers and CLIENT) and brokers, and the proxies."""

    def __init__(self) -> None:
        self.proxies: dict[int, BrokerProxy] = {}
        self._cut: set[tuple[int, int]] = set()
        self._links: dict[tuple[int, int], _Link] = {}

    def link(self, source: int, broker: int) -> _Link:
        key = (source, broker)
        found = self._links.get(key)
        if found is None:
            found = self._links[key] = _Link()
        return found

    def is_cut(self, source: int, broker: int) -> bool:
        return (source, broker) in self._cut

    async def add(self, broker_id: int, host: str = "127.0.0.1") -> BrokerProxy:
        proxy = BrokerProxy(self, broker_id, host)
        await proxy.start()
        self.proxies[broker_id] = proxy
        return proxy

    def sources(self) -> list[int]:
        return [CLIENT, *self.proxies]

    # -- faults --

    def cut(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Cut the links (source, broker), both directions of each connection on them."""
        fresh = set(pairs) - self._cut
        self._cut |= fresh
        for proxy in self.proxies.values():
            proxy.reset_where(lambda source, broker: (source, broker) in fresh)

    def cut_between(self, side_a: Iterable[int], side_b: Iterable[int]) -> None:
        """Cut every link between the brokers of two sides (both ways)."""
        a, b = set(side_a), set(side_b)
        self.cut([(x, y) for x in a for y in b] + [(y, x) for x in a for y in b])

    def hold(self, broker_id: int) -> None:
        """Stop the bytes on every link to and from ``broker_id`` (sockets stay open)."""
        for source, broker in self._links_of(broker_id):
            self.link(source, broker).flowing.clear()

    def release(self, broker_id: int) -> None:
        for source, broker in self._links_of(broker_id):
            self.link(source, broker).flowing.set()

    def set_latency(self, broker_id: int, latency_ms: float) -> None:
        for source, broker in self._links_of(broker_id):
            self.link(source, broker).latency_s = latency_ms / 1000

    def heal(self) -> None:
        """Every link cut, held or slowed is back to normal."""
        self._cut.clear()
        for link in self._links.values():
            link.flowing.set()
            link.latency_s = 0.0

    def _links_of(self, broker_id: int) -> list[tuple[int, int]]:
        links = [(source, broker_id) for source in self.sources()]
        links += [(broker_id, other) for other in self.proxies if other != broker_id]
        return links

    async def close(self) -> None:
        for proxy in self.proxies.values():
            await proxy.close()
        self.proxies.clear()


class BrokerProxy:
    """Listens on a port of its own and forwards to the broker's current port (``target``,
    changed when the broker restarts on another port). A connection made while the broker is
    starting waits for its port; once the broker is down (``set_target(None)``) connections
    are closed at once, as a closed port refuses them."""

    def __init__(self, network: ProxyNetwork, broker_id: int, host: str) -> None:
        self.network = network
        self.broker_id = broker_id
        self.host = host
        self.port = 0
        self.target: int | None = None
        self.down = False
        self._target_known = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def set_target(self, port: int | None) -> None:
        self.target = port
        self.down = port is None
        if port is None:
            self._target_known.clear()
            self.reset_where(lambda source, broker: True)
        else:
            self._target_known.set()

    def starting(self) -> None:
        """The broker is starting: connections wait for its port."""
        self.down = False

    def reset_where(self, predicate) -> None:
        for connection in list(self._connections):
            if predicate(connection.source, self.broker_id):
                connection.reset()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.reset()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(self, reader, writer)
        self._connections.add(connection)
        try:
            await connection.run()
        finally:
            self._connections.discard(connection)
            connection.reset()


class _Connection:
    def __init__(
        self, proxy: BrokerProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.source = CLIENT
        self.upstream: asyncio.StreamWriter | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        try:
            head = await self.reader.readexactly(4)
            (size,) = struct.unpack(">i", head)
            if size < 0 or size > 100 * 1024 * 1024:
                return
            body = await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        self.source = source_of(body)
        network, broker = self.proxy.network, self.proxy.broker_id
        if network.is_cut(self.source, broker) or self.proxy.down:
            return
        await self.proxy._target_known.wait()
        if self.proxy.target is None:
            return
        link = network.link(self.source, broker)
        await link.flowing.wait()
        try:
            up_reader, self.upstream = await asyncio.open_connection(
                self.proxy.host, self.proxy.target
            )
        except OSError:
            return
        await self._forward(link, head + body, self.upstream)
        reverse = network.link(self.source, broker)  # one link carries both directions
        self._tasks = [
            asyncio.create_task(self._pump(self.reader, self.upstream, link)),
            asyncio.create_task(self._pump(up_reader, self.writer, reverse)),
        ]
        _done, pending = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _forward(self, link: _Link, data: bytes, writer: asyncio.StreamWriter) -> None:
        if not link.flowing.is_set():
            await link.flowing.wait()
        if link.latency_s:
            await asyncio.sleep(link.latency_s)
        writer.write(data)
        await writer.drain()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    return
                await self._forward(link, data, writer)

    def reset(self) -> None:
        """Close both sides at once, without flushing (a reset, not a FIN after the data)."""
        for task in self._tasks:
            task.cancel()
        for writer in (self.writer, self.upstream):
            if writer is not None and not writer.is_closing():
                writer.transport.abort()


class RawProxy:
    """A plain TCP forwarder (no protocol knowledge): a broker's own way to its ZooKeeper, so
    that the broker can be cut off from the store (``cut``: connections reset, new ones closed
    at once) while everything else still reaches it."""

    def __init__(self, target_host: str, target_port: int, host: str = "127.0.0.1") -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.host = host
        self.port = 0
        self.cut = False
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> RawProxy:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            for writer in list(self._writers):
                if not writer.is_closing():
                    writer.transport.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await source.read(_CHUNK):
                    sink.write(data)
                    await sink.drain()

        try:
            tasks = [
                asyncio.create_task(pump(reader, up_writer)),
                asyncio.create_task(pump(up_reader, writer)),
            ]
            _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                if not w.is_closing():
                    w.transport.abort()

    async def close(self) -> None:
        self.set_cut(True)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now (a broker that must be reachable before it says which port it got)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
