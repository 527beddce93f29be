"""KafkaConnection + SocketServer over real loopback sockets with a scripted dispatcher."""

import asyncio
import contextlib
import gc
import os
import struct
import tracemalloc
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.config import Endpoint
from kafkalite.network.connection import (
    NO_RESPONSE,
    RECEIVE_BUFFER_BYTES,
    ConnectionInfo,
    KafkaConnection,
    ReceiveBuffer,
)
from kafkalite.network.server import SocketServer
from tests.controller.shell_support import eventually
from tests.network.support import ScriptedDispatcher, frame, read_response


@pytest.fixture
async def server():
    dispatcher = ScriptedDispatcher()
    srv = SocketServer(
        [Endpoint("PLAINTEXT", "127.0.0.1", 0)], dispatcher, max_request_bytes=1_000_000
    )
    await srv.start()
    srv.dispatcher = dispatcher
    yield srv
    await srv.shutdown(1.0)


@contextlib.asynccontextmanager
async def serving(**options):
    """A started SocketServer over a ScriptedDispatcher (``srv.dispatcher``), shut down after."""
    dispatcher = ScriptedDispatcher()
    srv = SocketServer([Endpoint("PLAINTEXT", "127.0.0.1", 0)], dispatcher, **options)
    await srv.start()
    srv.dispatcher = dispatcher
    try:
        yield srv
    finally:
        await srv.shutdown(1.0)


async def connect(srv):
    port = srv.bound_endpoints[0].port
    return await asyncio.open_connection("127.0.0.1", port)


async def test_responses_are_written_in_request_order(server):
    reader, writer = await connect(server)
    for ident in range(1, 6):
        writer.write(frame(ident.to_bytes(4, "big") + (b"W" if ident % 2 else b"E")))
    await writer.drain()
    await eventually(lambda: len(server.dispatcher.seen) == 5, message="all five requests read")
    for ident in (5, 3, 1):  # complete the slow ones in reverse
        server.dispatcher.release(ident)
    got = [(await read_response(reader))[0] for _ in range(5)]
    assert got == [1, 2, 3, 4, 5]
    writer.close()


async def test_no_response_requests_are_skipped(server):
    reader, writer = await connect(server)
    writer.write(frame(b"\0\0\0\x01N") + frame(b"\0\0\0\x02E"))
    assert (await read_response(reader))[0] == 2
    writer.close()


async def test_frame_larger_than_receive_buffer(server):
    reader, writer = await connect(server)
    payload = b"\0\0\0\x07E" + os.urandom(RECEIVE_BUFFER_BYTES * 2)
    data = frame(payload) + frame(b"\0\0\0\x08E")
    for i in range(0, len(data), 10_000):  # arrive in pieces
        writer.write(data[i : i + 10_000])
        await writer.drain()
    assert await read_response(reader) == (7, len(payload))
    assert (await read_response(reader))[0] == 8
    writer.close()


@pytest.mark.parametrize(
    "bad",
    [
        struct.pack(">i", 2_000_000) + b"x" * 10,  # above socket.request.max.bytes
        struct.pack(">i", -5),  # negative size
        frame(b"\0\0\0\x09X"),  # unparsable
        frame(b""),  # empty frame
    ],
)
async def test_bad_frames_close_only_that_connection(server, bad):
    good_reader, good_writer = await connect(server)
    bad_reader, bad_writer = await connect(server)
    bad_writer.write(frame(b"\0\0\0\x01E") + bad)
    assert (await read_response(bad_reader))[0] == 1  # the earlier response still went out
    assert await asyncio.wait_for(bad_reader.read(), 5) == b""  # then EOF
    good_writer.write(frame(b"\0\0\0\x02E"))
    assert (await read_response(good_reader))[0] == 2
    good_writer.close()
    bad_writer.close()


async def test_a_flood_of_bad_frames_is_logged_once(server, monkeypatch):
    """Twenty connections sending a negative frame size: each is closed, one line is logged
    for the reason, and the next line says how many were not logged."""
    from structlog.testing import capture_logs

    from kafkalite.network import connection as connection_module
    from kafkalite.observability import LogRateLimiter

    now = [0.0]
    monkeypatch.setattr(
        connection_module, "ABORT_LOG_LIMITER", LogRateLimiter(60.0, clock=lambda: now[0])
    )

    async def send_bad_frame() -> bytes:
        reader, writer = await connect(server)
        writer.write(struct.pack(">i", -5))
        closed = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return closed

    with capture_logs() as logs:
        assert [await send_bad_frame() for _ in range(20)] == [b""] * 20
        now[0] = 61.0
        assert await send_bad_frame() == b""
    lines = [e for e in logs if e["event"].startswith("closing connection")]
    assert [line["suppressed_since_last"] for line in lines] == [0, 19]


async def test_a_handler_failing_as_its_connection_closes_leaves_nothing_unretrieved(server):
    """The handler's task ended with an exception in the loop iteration that closed its
    connection (its done-callback runs after): the exception is still retrieved, or asyncio
    prints 'Task exception was never retrieved' with a traceback."""
    from kafkalite.network.connection import _Slot

    reader, writer = await connect(server)
    writer.write(frame(b"\0\0\0\x01E"))
    await read_response(reader)
    [conn] = list(server._connections)
    failed = asyncio.get_running_loop().create_future()
    failed.set_exception(RuntimeError("handler failed"))
    conn._close()
    conn._request_done(failed, _Slot(failed))
    assert not failed._log_traceback  # retrieved
    writer.close()


def test_log_rate_limiter_lets_one_line_a_kind_through_per_interval():
    from kafkalite.observability import LogRateLimiter

    now = [0.0]
    limiter = LogRateLimiter(10.0, clock=lambda: now[0])
    assert [limiter.allow("a"), limiter.allow("a"), limiter.allow("b")] == [0, None, 0]
    now[0] = 9.9
    assert limiter.allow("a") is None
    now[0] = 10.0
    assert limiter.allow("a") == 2
    assert limiter.allow("a") is None


async def test_drain_waits_for_in_flight_requests(server):
    reader, writer = await connect(server)
    writer.write(frame(b"\0\0\0\x0aW"))
    await writer.drain()
    await eventually(lambda: server.dispatcher.seen, message="the request read")
    await server.stop_accepting()
    drained = asyncio.ensure_future(server.drain(5))
    server.dispatcher.release(10)
    assert await drained is True
    assert (await read_response(reader))[0] == 10
    writer.close()


async def test_stop_reading_answers_pending_requests_but_takes_no_new_ones(server):
    reader, writer = await connect(server)
    writer.write(frame(b"\0\0\0\x0bW"))
    await writer.drain()
    await eventually(lambda: server.dispatcher.seen, message="the request read")
    server.stop_reading()
    writer.write(frame(b"\0\0\0\x0cE"))  # sent after the broker stopped reading
    await writer.drain()
    server.dispatcher.release(11)
    assert await server.drain(5) is True
    assert (await read_response(reader))[0] == 11
    assert server.dispatcher.seen == [11]
    writer.close()


async def test_idle_connections_are_closed():
    dispatcher = ScriptedDispatcher()
    srv = SocketServer(
        [Endpoint("PLAINTEXT", "127.0.0.1", 0)],
        dispatcher,
        max_request_bytes=1000,
        connections_max_idle_ms=200,
    )
    await srv.start()
    try:
        reader, writer = await connect(srv)
        writer.write(frame(b"\0\0\0\x01E"))
        assert (await read_response(reader))[0] == 1
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed once idle
        writer.close()
    finally:
        await srv.shutdown(1.0)


async def test_pipelined_requests_wait_in_the_buffer_beyond_max_in_flight():
    """Frames already received are not all taken at once: at most max_in_flight requests are
    being handled, the rest wait in the receive buffer (one write of many small requests used to
    start every one of them, however many, and buffer every answer)."""
    async with serving(max_request_bytes=1_000_000, max_in_flight=4) as srv:
        dispatcher = srv.dispatcher
        reader, writer = await connect(srv)
        writer.write(b"".join(frame(struct.pack(">i", i) + b"W") for i in range(10)))
        await writer.drain()
        await eventually(lambda: len(dispatcher.seen) >= 4)
        assert dispatcher.seen == [0, 1, 2, 3]
        dispatcher.release(0)
        assert (await read_response(reader))[0] == 0
        assert dispatcher.seen == [0, 1, 2, 3, 4]  # one answer out, one more request in
        for i in range(1, 10):
            dispatcher.release(i)
        assert [(await read_response(reader))[0] for _ in range(1, 10)] == list(range(1, 10))
        writer.close()


async def test_a_big_frame_reserves_memory_only_as_its_bytes_arrive():
    """A declared size costs nothing until sent (8 bytes declaring 50 MB used to allocate
    50 MB); a frame bigger than the first allocation still arrives whole."""
    async with serving(max_request_bytes=64 * 1024 * 1024) as srv:
        reader, writer = await connect(srv)
        writer.write(struct.pack(">i", 50 * 1024 * 1024) + b"\0\0\0\x01E" + b"x" * 10)
        await writer.drain()
        await eventually(lambda: any(c._big is not None for c in srv._connections))
        [conn] = srv._connections
        assert len(conn._big) <= 1024 * 1024
        writer.close()
        reader, writer = await connect(srv)
        payload = b"\0\0\0\x02E" + os.urandom(3 * 1024 * 1024)
        data = frame(payload)
        for i in range(0, len(data), 64 * 1024):
            writer.write(data[i : i + 64 * 1024])
            await writer.drain()
        assert await read_response(reader) == (2, len(payload))
        writer.close()


async def test_answers_queued_behind_a_slow_request_pause_reading_before_the_buffer_fills():
    """One slow request, then thousands answered at once: their answers wait behind it and
    count as in flight, so reading pauses (a full receive buffer gave the transport an empty
    buffer, a fatal error that dropped the connection)."""
    errors = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(context))
    async with serving(max_request_bytes=1_000_000, max_in_flight=4) as srv:
        dispatcher = srv.dispatcher
        reader, writer = await connect(srv)
        count = 5000
        writer.write(
            frame(struct.pack(">i", 0) + b"W")
            + b"".join(frame(struct.pack(">i", i) + b"E" + b"p" * 100) for i in range(1, count))
        )
        await eventually(lambda: len(dispatcher.seen) >= 4)
        [conn] = srv._connections
        assert conn._reading_paused and len(dispatcher.seen) == 4
        dispatcher.release(0)
        async with asyncio.timeout(30):
            got = [(await read_response(reader))[0] for _ in range(count)]
        assert got == list(range(count)) and errors == []
        writer.close()


# ---------------------------------------------------------------------- memory per connection


class FakeTransport:
    """Just enough of a transport to drive a KafkaConnection by hand."""

    def __init__(self):
        self.written = []
        self.closed = False
        self.reading = True

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def write(self, data):
        self.written.append(bytes(data))

    def writelines(self, parts):
        self.written.append(b"".join(bytes(p) for p in parts))

    def pause_reading(self):
        self.reading = False

    def resume_reading(self):
        self.reading = True

    def close(self):
        self.closed = True

    abort = close


class RecordingDispatcher:
    def __init__(self):
        self.frames = []

    def dispatch(self, frame_bytes, connection):
        self.frames.append(bytes(frame_bytes))
        return NO_RESPONSE


def feed(conn, data: bytes, chunk: int) -> None:
    """Deliver `data` as the transport would: into whatever get_buffer offers, `chunk` bytes at
    most per read."""
    pos = 0
    while pos < len(data):
        view = conn.get_buffer(-1)
        n = min(len(view), chunk, len(data) - pos)
        view[:n] = data[pos : pos + n]
        conn.buffer_updated(n)
        pos += n


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(
        st.tuples(st.lists(st.binary(min_size=1, max_size=300), max_size=6), st.integers(1, 97)),
        min_size=2,
        max_size=2,
    ),
    order=st.lists(st.booleans(), max_size=40),
)
def test_connections_sharing_a_receive_buffer_get_their_own_frames_intact(payloads, order):
    """Two connections read through one small shared buffer, their streams cut at arbitrary
    points and interleaved: each dispatcher sees exactly its frames, in order, whole (frames
    larger than the buffer and split headers included)."""
    shared = ReceiveBuffer(64)
    conns = []
    for frames_, chunk in payloads:
        dispatcher = RecordingDispatcher()
        conn = KafkaConnection(dispatcher, "PLAINTEXT", 1_000_000, receive_buffer=shared)
        conn.connection_made(FakeTransport())
        stream = b"".join(frame(p) for p in frames_)
        conns.append([conn, dispatcher, stream, chunk, frames_])
    turns = iter(order)
    while any(c[2] for c in conns):
        side = conns[next(turns, False)]
        if not side[2]:
            side = conns[0] if conns[0][2] else conns[1]
        conn, _, stream, chunk, _ = side
        step = min(chunk, len(stream))
        feed(conn, stream[:step], step)
        side[2] = stream[step:]
    for conn, dispatcher, _, _, frames_ in conns:
        assert dispatcher.frames == frames_
        assert conn._partial is None and conn._big is None  # nothing kept once idle


async def test_an_exclusive_request_is_taken_alone():
    """Two frames in one read: the second waits in the buffer, and reading pauses, until the
    first (Exclusive) is answered; then it is taken and answered after it."""
    dispatcher = ScriptedDispatcher()
    conn = KafkaConnection(dispatcher, "PLAINTEXT", 1_000_000)
    transport = FakeTransport()
    conn.connection_made(transport)
    feed(conn, frame(b"\0\0\0\x01A") + frame(b"\0\0\0\x02E"), 1_000)
    assert dispatcher.seen == [1]
    assert transport.reading is False
    dispatcher.release(1)
    await eventually(lambda: len(transport.written) == 2, message="both answers written")
    assert dispatcher.seen == [1, 2]
    assert [struct.unpack_from(">ii", w, 4)[0] for w in transport.written] == [1, 2]
    assert transport.reading is True and not transport.closed


async def test_an_exclusive_request_found_malformed_closes_before_the_next_is_taken():
    """The first request fails as a malformed one after dispatch returned: the connection
    closes, and the request behind it was never looked at (as when dispatch itself raises)."""
    dispatcher = ScriptedDispatcher()
    conn = KafkaConnection(dispatcher, "PLAINTEXT", 1_000_000)
    transport = FakeTransport()
    conn.connection_made(transport)
    feed(conn, frame(b"\0\0\0\x03W") + frame(b"\0\0\0\x04F") + frame(b"\0\0\0\x05E"), 1_000)
    assert dispatcher.seen == [3, 4]
    dispatcher.release(4)
    await eventually(lambda: transport.closed, message="the connection closed")
    assert dispatcher.seen == [3, 4]
    assert transport.written == []


async def test_idle_connections_hold_no_receive_buffer():
    """Every connection used to keep its own 256 KiB receive buffer (2,000 idle connections
    took 500 MB): idle ones, even after a request, now cost a few KiB of objects."""
    count = 200
    async with serving(max_request_bytes=1_000_000) as srv:
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            clients = [await connect(srv) for _ in range(count)]
            for i, (_, writer) in enumerate(clients):
                writer.write(frame(struct.pack(">i", i) + b"E" + b"x" * 10_000))
            for reader, _ in clients:
                await read_response(reader)
            await eventually(lambda: srv.connection_count == count)
            per_connection = (tracemalloc.get_traced_memory()[0] - start) / count
        finally:
            tracemalloc.stop()
        # both ends of each socket are in this process: the limit covers client objects too
        assert per_connection <= 16 * 1024, per_connection
        assert all(c._partial is None and c._big is None for c in srv._connections)
        for _, writer in clients:
            writer.close()


async def test_closed_connections_are_freed_without_the_garbage_collector():
    """A closed connection leaves no reference cycle (protocol <-> transport, the close
    linger timer) that would keep it and its buffers alive until a full GC."""
    async with serving(max_request_bytes=1_000_000) as srv:
        clients = [await connect(srv) for _ in range(20)]
        for i, (_, writer) in enumerate(clients):
            writer.write(frame(struct.pack(">i", i) + b"E"))
        for reader, _ in clients:
            await read_response(reader)
        await eventually(lambda: srv.connection_count == 20)
        refs = [weakref.ref(c) for c in srv._connections]
        gc.collect()
        gc.disable()
        try:
            # half closed by the clients, the rest by the broker
            for _, writer in clients[:10]:
                writer.close()
            await eventually(lambda: srv.connection_count == 10)
            srv.close_connections()
            await eventually(lambda: srv.connection_count == 0)
            for _, writer in clients[10:]:
                writer.close()
            await eventually(lambda: all(ref() is None for ref in refs), message="freed")
        finally:
            gc.enable()


async def test_stop_accepting_refuses_new_connections_at_once_and_may_be_repeated(server):
    """The listening socket closes at once (a connection attempted meanwhile is refused, not
    left unanswered in the backlog), the bound port is still reported, and the shutdown that
    follows an explicit stop_accepting does not fail on the closed socket."""
    port = server.bound_endpoints[0].port
    await server.stop_accepting()
    with pytest.raises(ConnectionRefusedError):
        await connect(server)
    assert server.bound_endpoints[0].port == port
    await server.stop_accepting()


class PendingAuthenticator:
    """A SASL authenticator as the connection sees it (security/sasl.py)."""

    complete = False
    principal = None


def feed_released(conn, data: bytes, chunk: int) -> None:
    """`feed`, dropping each view before the next read as a transport does (the frame being
    received may grow in between, which a live view of it would forbid)."""
    pos = 0
    while pos < len(data):
        view = conn.get_buffer(-1)
        n = min(len(view), chunk, len(data) - pos)
        view[:n] = data[pos : pos + n]
        del view
        conn.buffer_updated(n)
        pos += n


def unauthenticated_connection(limit: int = 524288):
    dispatcher = RecordingDispatcher()
    info = ConnectionInfo("127.0.0.1", 5555, "SASL_SSL")
    info.authenticator = PendingAuthenticator()
    conn = KafkaConnection(
        dispatcher, "SASL_SSL", 100 * 1024 * 1024, info=info, max_unauthenticated_bytes=limit
    )
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport, dispatcher, info


async def test_before_authentication_a_size_above_the_sasl_limit_closes_on_the_prefix():
    conn, transport, dispatcher, _ = unauthenticated_connection()
    feed_released(conn, struct.pack(">i", 90 * 1024 * 1024) + b"x" * 100, 1000)
    assert transport.closed
    assert conn._big is None and conn._partial is None and dispatcher.frames == []


async def test_before_authentication_a_frame_reserves_little_until_its_bytes_arrive():
    conn, transport, dispatcher, info = unauthenticated_connection()
    payload = os.urandom(524288)
    data = frame(payload)
    feed_released(conn, data[:5], 5)
    assert not transport.closed and len(conn._big) <= 64 * 1024
    feed_released(conn, data[5:], 65536)
    assert dispatcher.frames == [payload]  # at the limit: received whole
    info.authenticator.complete = True  # authenticated: socket.request.max.bytes applies
    big = os.urandom(2 * 1024 * 1024)
    feed_released(conn, frame(big), 65536)
    assert dispatcher.frames[-1] == big and not transport.closed
