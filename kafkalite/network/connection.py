"""One client connection: Kafka's size-prefixed framing and the in-order response pipeline.

Wire format: every request is `int32 size` followed by `size` bytes (request header + body).
A frame with a negative size or one above `socket.request.max.bytes` closes the connection
(Kafka's `InvalidReceiveException`), as does a frame the dispatcher cannot parse; the reason is
logged once, with the client address, and no other connection is affected. Until a SASL
listener's connection has authenticated, the limit is `sasl.server.max.receive.size` instead
(Kafka's SaslServerAuthenticator): the size prefix alone decides, so an unauthenticated client
cannot make the broker hold more than that for it.

Invariants:
- Responses are written strictly in request order, even though requests are handled
  concurrently (a pipelined client may have many requests in flight; a Produce with acks=all may
  finish after a later Metadata). Each request gets a slot in a FIFO; a slot's response is written
  only when every slot before it has been written.
- A request for which the dispatcher returns `NO_RESPONSE` (Produce with acks=0) occupies a
  slot but writes nothing.
- A request the dispatcher returns as `Exclusive` (a body still being decoded off the loop) is
  taken alone: no later request of the connection is taken until it is done, as Kafka mutes a
  channel while its request is handled. A body it then finds malformed closes the connection
  before anything after it is looked at, as a frame that fails to parse in `dispatch` does.
- No new request is taken while `max_in_flight` requests are pending or the transport's write
  buffer is above its high-water mark: frames already received wait in the receive buffer and
  reading pauses, so a client that pipelines requests without reading the answers costs a
  bounded amount of memory and work, and other connections are served meanwhile (Kafka mutes
  a channel until its response is sent).
- A close whose responses the peer never reads is turned into an abort after
  `CLOSE_LINGER_SECONDS` (a graceful close waits for the write buffer to drain).

Reading uses `asyncio.BufferedProtocol` and costs an idle connection no buffer at all: every
connection of a `SocketServer` reads into one shared `ReceiveBuffer` (the loop runs one
transport's get_buffer / recv / buffer_updated at a time, and nothing is left in it when
buffer_updated returns). Complete frames are cut out of it (one copy per frame, into the
`bytearray` the handler owns and may patch in place: the broker writes offsets into record
batches before appending them). The incomplete frame a read ends in gets its own `bytearray`
at once and the rest of it is received straight into that (no further copy); it starts at the
frame's size, capped at 1 MiB (64 KiB before authentication), and doubles as bytes arrive (a
declared size alone reserves no more than that). Only a header fragment, or frames that must
wait while the connection is busy, are kept (`_partial`). So a connection holds memory in proportion to what it is doing, and all of
it is dropped with the frame or the connection (10,000 idle connections were 2.5 GB when each
kept its own 256 KiB receive buffer).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from kafkalite.network.zerocopy import RegionTruncated, write_parts
from kafkalite.observability import LogRateLimiter
from kafkalite.protocol.errors import KafkaError
from kafkalite.security.sasl import ANONYMOUS, CloseAfter

log = structlog.get_logger("kafkalite.network")

# One line a minute per reason a connection is closed for (see KafkaConnection._abort).
ABORT_LOG_LIMITER = LogRateLimiter()

RECEIVE_BUFFER_BYTES = 256 * 1024
DEFAULT_MAX_IN_FLIGHT = 256
CLOSE_LINGER_SECONDS = 5.0
BIG_FRAME_INITIAL_BYTES = 1 << 20
UNAUTHENTICATED_INITIAL_BYTES = 64 * 1024
"""The first allocation of a frame received before authentication (sasl.server.max.receive.size
bounds it; a prefix alone must not reserve that much on each of many connections)."""

Buffers = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]
"""A response: one buffer, or a sequence of buffers written back to back (e.g. a Fetch response
header followed by record-data slices straight from the log)."""


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE: Any = _NoResponse()
"""Returned by a dispatcher for requests Kafka never answers (Produce with acks=0)."""


class Exclusive:
    """An awaitable request the connection takes alone (module docstring): no later request
    of the connection is taken until it is done. Awaitable itself, for callers that do not
    know the difference."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable

    def __await__(self) -> Any:
        return self.awaitable.__await__()


class CloseConnection(Exception):
    """Raised by a handler to close the connection without a response (Kafka does this for a
    failed acks=0 produce, so the client notices and refreshes its metadata)."""


_connection_ids = itertools.count(1)


@dataclass(slots=True)
class ConnectionInfo:
    """What a handler may know about the connection a request came from."""

    client_host: str
    client_port: int
    listener_name: str
    connection_id: int = field(default_factory=lambda: next(_connection_ids))
    principal: str = ANONYMOUS
    """Kafka's KafkaPrincipal as text: User:ANONYMOUS, the mapped TLS subject, or (once
    authenticated) the SASL user; see `authenticated_principal`."""
    authenticator: Any = None
    """The SASL authenticator of a SASL listener's connection (security/sasl.py), else None."""
    throttled_until: float = 0.0
    """time.monotonic() until which the connection is muted once its next response is written
    (a quota was exceeded, KIP-219); set by the dispatcher."""

    @property
    def client_address(self) -> str:
        return f"{self.client_host}:{self.client_port}"

    @property
    def authenticated_principal(self) -> str:
        auth = self.authenticator
        if auth is not None and auth.principal is not None:
            return auth.principal
        return self.principal


class RequestDispatcher(Protocol):
    def dispatch(
        self, frame: bytearray, connection: ConnectionInfo
    ) -> Awaitable[Buffers | Any] | Buffers | Any:
        """Handle one request frame (header + body, no size prefix).

        Return the encoded response (size prefix included), `NO_RESPONSE`, or an awaitable of one
        of those (an `Exclusive` one to be taken alone). Raise synchronously for a frame that
        cannot be parsed (the connection is closed).
        """
        ...


def _header_fields(error: Exception) -> dict[str, Any]:
    """api_key / api_version / correlation_id / client_id of the request an error is about."""
    header = getattr(error, "header", None)
    if header is None:
        return {}
    return {
        "api_key": getattr(header, "api_key", None),
        "api_version": getattr(header, "api_version", None),
        "correlation_id": getattr(header, "correlation_id", None),
        "client_id": getattr(header, "client_id", None),
    }


class _Slot:
    __slots__ = ("done", "response", "task")

    def __init__(self, task: asyncio.Future[Any] | None = None) -> None:
        self.done = False
        self.response: Any = None
        self.task = task


_NO_PENDING: tuple[()] = ()
"""`_pending` of a connection with nothing in flight: most are idle, and an empty deque is
more than half a KiB."""


class ReceiveBuffer:
    """The scratch buffer the connections of one event loop read into (module docstring).

    Safe to share because a transport calls get_buffer, reads, and calls buffer_updated without
    running any other callback in between, and buffer_updated leaves nothing in it."""

    __slots__ = ("buf", "view")

    def __init__(self, size: int = RECEIVE_BUFFER_BYTES) -> None:
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)


class KafkaConnection(asyncio.BufferedProtocol):
    """The protocol object of one accepted socket (see the module docstring)."""

    __slots__ = (
        "_dispatcher",
        "_listener_name",
        "_max_request_bytes",
        "_max_unauthenticated_bytes",
        "_max_in_flight",
        "_on_close",
        "_on_made",
        "_transport",
        "_fileno",
        "info",
        "_shared",
        "_partial",
        "_big",
        "_big_filled",
        "_big_size",
        "_pending",
        "_reading_paused",
        "_writing_paused",
        "_closing",
        "_stopped_reading",
        "_muted",
        "_exclusive",
        "_idle",
        "_linger",
        "last_active",
        "__weakref__",
    )

    def __init__(
        self,
        dispatcher: RequestDispatcher,
        listener_name: str,
        max_request_bytes: int,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        on_close: Callable[[KafkaConnection], None] | None = None,
        receive_buffer: ReceiveBuffer | None = None,
        info: ConnectionInfo | None = None,
        on_made: Callable[[ConnectionInfo, asyncio.BaseTransport], None] | None = None,
        max_unauthenticated_bytes: int | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._on_made = on_made
        """Called with the transport before any byte is read (TLS principal, SASL state)."""
        self._listener_name = listener_name
        self._max_request_bytes = max_request_bytes
        self._max_unauthenticated_bytes = (
            max_request_bytes if max_unauthenticated_bytes is None else max_unauthenticated_bytes
        )
        """The frame limit while a SASL authenticator has not completed (module docstring)."""
        self._max_in_flight = max_in_flight
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._fileno = -1
        """The socket's descriptor, for sendfile of record data (zerocopy.py); -1: none."""
        self.info: ConnectionInfo | None = info
        """Given by the acceptor (the address it counted), else made from the peer name."""
        self._shared = receive_buffer if receive_buffer is not None else ReceiveBuffer()
        self._partial: bytearray | None = None
        """Received bytes not yet taken: a header fragment, or frames waiting for a slot."""
        self._big: bytearray | None = None
        self._big_filled = 0
        self._big_size = 0
        self._pending: collections.deque[_Slot] | tuple[()] = _NO_PENDING
        """One slot per request taken and not yet written, in request order."""
        self._reading_paused = False
        self._writing_paused = False
        self._closing = False
        self._stopped_reading = False
        self._muted = False
        self._exclusive: asyncio.Future[Any] | None = None
        """The request taken alone (``Exclusive``) while it is in flight."""
        self._idle: asyncio.Event | None = None
        self._linger: asyncio.TimerHandle | None = None
        self.last_active = time.monotonic()
        """Last time a request was read or a response written (connections.max.idle.ms)."""

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        # Record bytes go straight to the socket (sendfile) only on a plaintext transport: under
        # TLS the socket carries ciphertext, and they go through the transport like any bytes.
        if sock is not None and transport.get_extra_info("ssl_object") is None:
            self._fileno = sock.fileno()
        if self.info is None:
            peer = transport.get_extra_info("peername") or ("?", 0)
            self.info = ConnectionInfo(str(peer[0]), int(peer[1]), self._listener_name)
        if self._on_made is not None:
            self._on_made(self.info, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        for slot in self._pending:
            if slot.task is not None:
                slot.task.cancel()
        self._pending = _NO_PENDING
        self._set_idle()
        # Nothing of a closed connection outlives it: no buffers, no reference to the transport
        # (which refers back to this protocol), no timer keeping either alive.
        self._partial = self._big = None
        self._transport = None
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._take_buffered_frames()

    def get_buffer(self, sizehint: int) -> memoryview:
        big = self._big
        if big is not None:
            if self._big_filled == len(big):
                # Grown as the bytes arrive (here, where no view of it is alive), so a declared
                # size costs memory only once the client actually sends that much.
                big += bytearray(min(self._big_size, 2 * len(big)) - len(big))
            return memoryview(big)[self._big_filled :]
        return self._shared.view

    def buffer_updated(self, nbytes: int) -> None:
        if self._closing or self._stopped_reading:
            return  # a read that raced stop_reading(): the request is not taken
        self.last_active = time.monotonic()
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
                frame, self._big = self._big, None
                self._handle_frame(frame)
            return
        partial = self._partial
        if partial is None:
            self._cut_frames(self._shared.buf, nbytes)
        else:
            partial += self._shared.view[:nbytes]
            self._cut_frames(partial, len(partial))

    def eof_received(self) -> bool:
        return False  # close our side too

    # ------------------------------------------------------------------ framing

    def _can_take_request(self) -> bool:
        return not (
            self._closing
            or self._muted
            or self._exclusive is not None
            or self._stopped_reading
            or self._writing_paused
            or len(self._pending) >= self._max_in_flight
        )

    def _take_buffered_frames(self) -> None:
        """Requests received while the connection was busy, then reading again if it may."""
        partial = self._partial
        if self._big is None and partial is not None and len(partial) >= 4:
            self._cut_frames(partial, len(partial))
        self._update_reading()

    def _cut_frames(self, buf: bytearray, end: int) -> None:
        """Take the frames in `buf[:end]` (the shared buffer or `_partial`) while requests may be
        taken; what remains is kept in `_partial`, or becomes the frame received in place."""
        pos = 0
        while end - pos >= 4 and self._can_take_request():
            size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            limit = self._frame_limit()
            if size < 0 or size > limit:
                self._abort(
                    "invalid frame size"
                    if limit == self._max_request_bytes
                    else "invalid frame size before authentication",
                    size=size,
                    max_size=limit,
                )
                return
            start = pos + 4
            if end - start >= size:
                frame = buf[start : start + size]
                pos = start + size
                self._handle_frame(frame)
                continue
            # Incomplete: the rest is received straight into the frame, which starts at its
            # size up to 1 MiB (a typical large produce needs no growth) and grows with what
            # arrives.
            have = end - start
            initial = (
                BIG_FRAME_INITIAL_BYTES
                if limit == self._max_request_bytes
                else UNAUTHENTICATED_INITIAL_BYTES
            )
            big = bytearray(min(size, max(initial, have)))
            with memoryview(buf) as view:
                big[:have] = view[start:end]
            self._big, self._big_filled, self._big_size = big, have, size
            pos = end
            break
        if pos == end:
            self._partial = None
        elif buf is self._partial:
            del buf[:pos]
        else:
            self._partial = buf[pos:end]
        if not self._can_take_request():
            # Frames left in the buffer wait for a slot: stop reading so it cannot fill up
            # (an empty get_buffer is a fatal error for the transport).
            self._update_reading()

    def _frame_limit(self) -> int:
        info = self.info
        auth = info.authenticator if info is not None else None
        if auth is not None and not auth.complete:
            return self._max_unauthenticated_bytes
        return self._max_request_bytes

    def _handle_frame(self, frame: bytearray) -> None:
        if self._closing:
            return
        try:
            result = self._dispatcher.dispatch(frame, self.info)  # type: ignore[arg-type]
        except KafkaError as e:
            self._abort(
                "invalid request",
                error=str(e),
                error_code=e.error_code.name,
                frame_head=bytes(frame[:96]).hex(),
                **_header_fields(e),
            )
            return
        except Exception as e:  # a parse failure of any kind closes this connection only
            self._abort("unparsable request", error=repr(e))
            return
        info = self.info
        if info is not None and info.throttled_until and not self._muted:
            # over a quota: read nothing more until the throttle time has passed (requests
            # already received wait), as Kafka's channel muted from the throttled request on
            self._mute(info.throttled_until)
        if inspect.isawaitable(result):  # an Exclusive is awaitable too: checked only here
            if isinstance(result, Exclusive):
                task = self._exclusive = asyncio.ensure_future(result.awaitable)
            else:
                task = asyncio.ensure_future(result)
            slot = _Slot(task)
            pending = self._pending
            if pending is _NO_PENDING:
                pending = self._pending = collections.deque()
            pending.append(slot)  # type: ignore[union-attr]
            task.add_done_callback(functools.partial(self._request_done, slot=slot))
            self._update_reading()
        elif self._pending:
            slot = _Slot()
            slot.done, slot.response = True, result
            self._pending.append(slot)
            self._update_reading()  # an answered slot still counts until it is written
        else:
            self._write(result)

    def _request_done(self, task: asyncio.Future[Any], slot: _Slot) -> None:
        slot.task = None
        if task is self._exclusive:
            self._exclusive = None
        if task.cancelled():
            return
        error = task.exception()  # retrieved even when closing, or asyncio reports it
        if self._closing:
            return
        if error is not None:
            if isinstance(error, CloseConnection):
                log.debug("closing connection", reason=str(error))
                self._close()
            elif isinstance(error, KafkaError):
                self._abort(
                    "invalid request",
                    error=str(error),
                    error_code=error.error_code.name,
                    **_header_fields(error),
                )
            else:
                log.error(
                    "request handler failed; closing connection",
                    client=self.info.client_address if self.info else "?",
                    exc_info=error,
                )
                self._close()
            return
        slot.done, slot.response = True, task.result()
        pending = self._pending
        while pending and pending[0].done:
            self._write(pending.popleft().response)
        if not pending:
            self._pending = _NO_PENDING
        self._take_buffered_frames()
        if not self._pending:
            self._set_idle()

    def _write(self, response: Any) -> None:
        if response is NO_RESPONSE or response is None or self._transport is None:
            return
        self.last_active = time.monotonic()
        if isinstance(response, bytes | bytearray | memoryview):
            self._transport.write(response)
        elif isinstance(response, CloseAfter):  # a failed SASL authentication
            self._transport.write(response.response)
            self._close()
        else:
            try:
                write_parts(self._transport, self._fileno, response)
            except RegionTruncated as e:
                self._abort("response records truncated before they were sent", error=str(e))
                return
        info = self.info
        if info is not None and info.throttled_until and not self._muted:
            self._mute(info.throttled_until)

    def _mute(self, until: float) -> None:
        """Read nothing more until `until` (a throttled client, Kafka's muted channel)."""
        delay = until - time.monotonic()
        if delay <= 0:
            return
        self._muted = True
        self._update_reading()
        asyncio.get_running_loop().call_later(delay, self._unmute)

    def _unmute(self) -> None:
        self._muted = False
        if self.info is not None and self.info.throttled_until <= time.monotonic():
            self.info.throttled_until = 0.0
        self._take_buffered_frames()

    # ------------------------------------------------------------------ flow control and close

    def _update_reading(self) -> None:
        if self._transport is None or self._closing:
            return
        should_pause = (
            self._stopped_reading
            or self._muted
            or self._exclusive is not None
            or self._writing_paused
            or len(self._pending) >= self._max_in_flight
        )
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self._transport.resume_reading()

    def _abort(self, reason: str, **details: Any) -> None:
        """Close the connection for a protocol violation, logged once a minute per reason
        (with how many were not logged since): a client looping on garbage must not flood
        the log."""
        suppressed = ABORT_LOG_LIMITER.allow(reason)
        if suppressed is not None:
            log.warning(
                "closing connection: " + reason,
                client=self.info.client_address if self.info else "?",
                listener=self._listener_name,
                suppressed_since_last=suppressed,
                **details,
            )
        self._close()

    def _close(self) -> None:
        if self._closing:
            return
        self._closing = True
        # Responses already computed for earlier requests still go out before the close.
        pending = self._pending
        while pending and pending[0].done:
            self._write(pending.popleft().response)
        if self._transport is not None:
            self._transport.close()
            # close() waits until the write buffer drains, which a peer that stopped reading
            # never lets happen: then the socket is aborted (Kafka closes it outright).
            self._linger = asyncio.get_running_loop().call_later(
                CLOSE_LINGER_SECONDS, self._transport.abort
            )

    def _set_idle(self) -> None:
        if self._idle is not None:
            self._idle.set()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def wait_idle(self) -> None:
        """Wait until every request read so far has been answered (graceful shutdown)."""
        while self._pending and not self._closing:
            self._idle = asyncio.Event()
            await self._idle.wait()

    def close_if_idle(self, max_idle_s: float, now: float) -> bool:
        """Close the connection when nothing moved for `max_idle_s` and nothing is pending
        (Kafka's connections.max.idle.ms); whether it was closed."""
        if self._closing or self._pending or now - self.last_active < max_idle_s:
            return False
        log.debug("closing idle connection", client=self.info.client_address if self.info else "?")
        self._close()
        return True

    def stop_reading(self) -> None:
        """Stop reading requests for good (shutdown); pending responses are still written."""
        self._stopped_reading = True
        if self._transport is not None and not self._closing and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()

    def close(self) -> None:
        self._close()
