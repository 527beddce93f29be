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
(no task is created); `async` handlers return an awaitable the connection schedules. One
exception: a controller request (LeaderAndIsr, UpdateMetadata, StopReplica) of at least
`OFF_LOOP_DECODE_BYTES` is decoded in a worker thread, so that the length walk and the decode
of thousands of partitions (tens of milliseconds, more on a busy machine) do not hold the event
loop; the loop gets the interpreter back at every switch interval meanwhile. Its awaitable is
`Exclusive`: the connection takes nothing after it until it is done, so a body found malformed
in the thread still closes the connection before any later request is looked at (the
awaitable raises the decode's KafkaError, which the connection treats as a parse failure).

Requests that decode but cannot be served are answered, never dropped (Kafka's
RequestHandlerHelper.handleError / AbstractRequest.getErrorResponse): a body with a null its
schema forbids or a value out of range (protocol/request_checks.py) gets the API's error
response with INVALID_REQUEST; an exception escaping a handler gets it with the exception's
error code (a KafkaError's own, UNKNOWN_SERVER_ERROR for anything else). Every topic, partition,
group or resource the request named carries the error (protocol/error_response.py). A Produce
with acks=0 has no response to carry it, so its connection is closed instead, as Kafka does.
The awaitable returned for an async handler never raises anything but CloseConnection (and
cancellation; one decoded off the loop also the decode's KafkaError), so no task fails unseen.
Failures are logged once per (API, exception class) per `ERROR_LOG_INTERVAL_S`, with how many
were suppressed in between (RateLimitedErrorLog): a flood of bad requests does not flood the
log.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from time import monotonic, perf_counter
from typing import Any

import structlog

from kafkalite.apis.base import DECODERS, HANDLERS, BrokerServices, RequestContext
from kafkalite.network.connection import (
    NO_RESPONSE,
    CloseConnection,
    ConnectionInfo,
    Exclusive,
)
from kafkalite.observability import LogRateLimiter, RequestStats, response_size
from kafkalite.protocol import frames
from kafkalite.protocol.api import (
    ADVERTISED_VERSIONS,
    INTER_BROKER_KEYS,
    ApiKey,
    response_class,
    supported_versions,
)
from kafkalite.protocol.error_response import error_response
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.request_checks import InvalidRequestFieldError

log = structlog.get_logger("kafkalite.apis")

ERROR_LOG_INTERVAL_S = 60.0

OFF_LOOP_DECODE_KEYS = frozenset(
    {int(ApiKey.LEADER_AND_ISR), int(ApiKey.UPDATE_METADATA), int(ApiKey.STOP_REPLICA)}
)
OFF_LOOP_DECODE_BYTES = 64 * 1024
"""Frames of OFF_LOOP_DECODE_KEYS at least this long are decoded in a worker thread (see the
module docstring): about 1,000 partitions of a LeaderAndIsr or an UpdateMetadata, whose decode
takes a few milliseconds on the loop; smaller ones are decoded at once, as other requests."""


class RateLimitedErrorLog:
    """Logs a failure once per (API key, exception class) per `interval_s`; the ones in
    between are counted and reported with the next line logged for that pair."""

    def __init__(
        self, interval_s: float = ERROR_LOG_INTERVAL_S, clock: Callable[[], float] = monotonic
    ) -> None:
        self._limiter = LogRateLimiter(interval_s, clock)

    def report(
        self, header: Any, error: BaseException, connection: ConnectionInfo, *, expected: bool
    ) -> bool:
        """Log `error` unless its kind was logged less than `interval_s` ago; whether it was.
        Unexpected errors (handler bugs) are logged at error level with their traceback,
        expected ones (a malformed request, a KafkaError) as a warning without."""
        suppressed = self._limiter.allow((int(header.api_key), type(error).__qualname__))
        if suppressed is None:
            return False
        fields: dict[str, Any] = {
            "api_key": _api_name(header.api_key),
            "api_version": header.api_version,
            "correlation_id": header.correlation_id,
            "client_id": header.client_id,
            "client": connection.client_address,
            "error": str(error) or type(error).__name__,
            "error_class": type(error).__qualname__,
            "suppressed_since_last": suppressed,
        }
        if expected:
            log.warning("request refused", **fields)
        else:
            log.error("request handler failed; answered with an error", exc_info=error, **fields)
        return True


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


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
    def __init__(
        self,
        services: BrokerServices,
        handlers: dict[int, Any] | None = None,
        *,
        stats: RequestStats | None = None,
    ) -> None:
        self.services = services
        self.handlers = HANDLERS if handlers is None else handlers
        self.versions = advertised_versions(self.handlers)
        services.api_versions = self.versions
        self.error_log = RateLimitedErrorLog()
        self.stats = stats if stats is not None else RequestStats()
        """Per-API count, latency and bytes, one record per request; given by the composition
        root, which hands the same counters to the admin API (/metrics)."""
        self.ready = asyncio.Event()
        """Set when the broker has started; client requests read before that wait for it.
        Controller requests (LeaderAndIsr, UpdateMetadata, ...) are served at once: start-up
        waits for the controller's first UpdateMetadata."""
        self.roles_ready = asyncio.Event()
        self.roles_ready.set()
        """Cleared by a broker whose listener opens before its logs are loaded: until it is set
        again (the replica manager exists) only ApiVersions is served, controller requests
        wait for it."""
        self.off_loop_decode_bytes = OFF_LOOP_DECODE_BYTES
        self.served_early: dict[int, asyncio.Event] = {}
        """Client APIs served before ``ready`` once their event is set (Metadata once the
        controller's UpdateMetadata has filled the cache); their requests wait for it."""

    def dispatch(self, frame: bytearray, connection: ConnectionInfo) -> Any:
        auth = connection.authenticator if connection is not None else None
        if auth is not None:  # a SASL listener: nothing is served before authentication
            answer = auth.intercept(frame)
            if answer is not None:
                return answer
        started = perf_counter()
        header, body_offset = frames.parse_request_header(frame)
        api_key = header.api_key
        if not self.ready.is_set():
            early = self.served_early.get(api_key)
            if early is not None:
                if not early.is_set():
                    return self._dispatch_when_ready(frame, connection, early)
            elif api_key not in ALWAYS_SERVED:
                return self._dispatch_when_ready(frame, connection, self.ready)
            if api_key != ApiKey.API_VERSIONS and not self.roles_ready.is_set():
                return self._dispatch_when_ready(frame, connection, self.roles_ready)
        if api_key == ApiKey.API_VERSIONS and header.api_version > self.versions[api_key][1]:
            return frames.api_versions_fallback(header.correlation_id, self.versions)
        frames.ensure_supported(header, self.versions)
        decoder = DECODERS.get(api_key) or frames.decode_request
        if api_key in OFF_LOOP_DECODE_KEYS and len(frame) >= self.off_loop_decode_bytes:
            return Exclusive(
                self._decoded_off_loop(decoder, header, frame, body_offset, connection, started)
            )
        try:
            request = decoder(header, frame, body_offset)
        except InvalidRequestFieldError as e:
            return self._refused(header, e, connection, started, len(frame))
        return self._handle(header, request, connection, started, len(frame))

    async def _decoded_off_loop(
        self,
        decoder: Callable[[Any, bytearray, int], Any],
        header: Any,
        frame: bytearray,
        body_offset: int,
        connection: ConnectionInfo,
        started: float,
    ) -> Any:
        """A request decoded in a worker thread, then handled as ``dispatch`` handles it. The
        frame is this request's alone (nothing else reads or changes it meanwhile)."""
        try:
            request = await asyncio.to_thread(decoder, header, frame, body_offset)
        except InvalidRequestFieldError as e:
            return self._refused(header, e, connection, started, len(frame))
        result = self._handle(header, request, connection, started, len(frame))
        if inspect.isawaitable(result):
            result = await result
        return result

    def _refused(
        self,
        header: Any,
        error: InvalidRequestFieldError,
        connection: ConnectionInfo,
        started: float,
        bytes_in: int,
    ) -> Any:
        """The answer to a request that decodes but has a forbidden null or a value out of
        range: the API's error response with INVALID_REQUEST."""
        encoded = self._error_answer(header, error.request, error, connection, expected=True)
        return self._recorded(header, encoded, started, bytes_in)

    def _handle(
        self,
        header: Any,
        request: Any,
        connection: ConnectionInfo,
        started: float,
        bytes_in: int,
    ) -> Any:
        """The decoded ``request`` to its handler: the encoded answer, or an awaitable of it."""
        api_key = header.api_key
        handler = self.handlers[api_key]
        ctx = RequestContext(
            header, connection, self.services, response_class(api_key, header.api_version)
        )
        try:
            result = handler(ctx, request)
            if inspect.isawaitable(result):
                return self._finish(header, request, connection, result, started, bytes_in)
            encoded = self._encode(header, result)
        except CloseConnection:
            raise
        except Exception as e:
            encoded = self._error_answer(header, request, e, connection)
        return self._recorded(header, encoded, started, bytes_in)

    async def _dispatch_when_ready(
        self, frame: bytearray, connection: ConnectionInfo, event: asyncio.Event
    ) -> Any:
        await event.wait()
        result = self.dispatch(frame, connection)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _finish(
        self,
        header: Any,
        request: Any,
        connection: ConnectionInfo,
        pending: Any,
        started: float,
        bytes_in: int,
    ) -> Any:
        try:
            encoded = self._encode(header, await pending)
        except CloseConnection:
            raise
        except Exception as e:
            encoded = self._error_answer(header, request, e, connection)
        if inspect.isawaitable(encoded):
            return await encoded  # acks=0: closes the connection
        return self._recorded(header, encoded, started, bytes_in)

    def _recorded(self, header: Any, encoded: Any, started: float, bytes_in: int) -> Any:
        if not inspect.isawaitable(encoded):
            self.stats.record(
                header.api_key, perf_counter() - started, bytes_in, response_size(encoded)
            )
        return encoded

    def _error_answer(
        self,
        header: Any,
        request: Any,
        error: Exception,
        connection: ConnectionInfo,
        *,
        expected: bool = False,
    ) -> Any:
        """The encoded error response for a request that failed as a whole (see the module
        docstring); an awaitable that closes the connection for an acks=0 Produce."""
        code = error.error_code if isinstance(error, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        self.error_log.report(
            header, error, connection, expected=expected or isinstance(error, KafkaError)
        )
        if header.api_key == ApiKey.PRODUCE and getattr(request, "acks", None) == 0:
            return _close_connection(f"acks=0 produce failed: {error}")
        # A KafkaError's own message (without the "[Error n] NAME:" prefix of its str());
        # anything else gets the code's default text, not the internals of a bug.
        message = error.args[0] if isinstance(error, KafkaError) and error.args else None
        response = error_response(
            header.api_key,
            request,
            response_class(header.api_key, header.api_version),
            code,
            message,
        )
        return frames.encode_response(header, response)

    @staticmethod
    def _encode(header: Any, result: Any) -> Any:
        if result is NO_RESPONSE or isinstance(result, list):
            return result  # nothing to send, or an already encoded frame (Fetch)
        encode_frame = getattr(result, "encode_frame", None)
        if encode_frame is not None:
            return encode_frame(header)  # a response that encodes itself (Metadata)
        return frames.encode_response(header, result)


async def _close_connection(reason: str) -> Any:
    raise CloseConnection(reason)
