"""One TCP connection to a Kafka broker: correlation ids, pipelining, version negotiation.

``KafkaConnection`` is what Kafka's ``NetworkClient`` keeps per node, reduced to one socket:

- ``connect()`` opens the socket and sends ApiVersions at the newest version the codec has; a
  broker that does not know that version answers with an ApiVersions v0 UNSUPPORTED_VERSION
  response listing its range, and the request is repeated at the broker's newest (KIP-511).
  The broker's table is kept in ``api_versions``; ``pick_version`` intersects it with the codec.
- ``send()`` writes a frame at once and waits for its response. Many sends may be in flight:
  each gets the next correlation id and a future, and one reader task completes futures by the
  correlation id of each response (brokers answer in order, but nothing here relies on it).
- A response that does not arrive within ``request_timeout`` raises ``KafkaTimeoutError``; its
  correlation id is remembered so a late response is dropped instead of being taken for a
  protocol error. Produce with acks=0 gets no response: ``send`` returns None once written.
- Any socket error, EOF, or a response that cannot be decoded closes the connection and fails
  every pending request with ``KafkaConnectionError``; later sends raise it too. A closed
  connection is not reopened: ``KafkaClient`` makes a new one.

Invariant: an entry in ``_pending`` exists exactly while its future is not done.
Not thread-safe; use from one event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.api import CODEC_VERSIONS, ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode, KafkaError, UnsupportedVersionError
from kafkalite.protocol.frames import decode_response, encode_request, peek_correlation_id

from .errors import KafkaConnectionError, KafkaTimeoutError
from .messages import build_message

if TYPE_CHECKING:  # imported when a connection authenticates: a PLAINTEXT client never needs
    # the security package (TLS, OAuth's HTTP client, JAAS parsing)
    from kafkalite.security.listeners import ClientSecurity

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
# How long close() waits for a graceful close before it aborts the connection.
CLOSE_TIMEOUT_S = 2.0
# Timeouts here use asyncio.timeout, never wait_for: Python 3.11's wait_for returns the inner
# result when it completes as the caller is being cancelled, and the cancellation is lost (a
# controller channel closing a connection while the broker stopped then never ended).

RequestSpec = Any  # a message dataclass, a dict of field values, or version -> message

DEFAULT_SECURITY: ClientSecurity | None = None
"""The security of connections made without an explicit ``security``: a broker sets it at
start-up to its inter-broker settings (TLS context, SASL mechanism and credentials), so every
connection it makes to other brokers (controller channel, replica fetchers, forwarding,
controlled shutdown) uses the inter-broker listener's protocol. None: PLAINTEXT."""


def set_default_security(security: ClientSecurity | None) -> None:
    global DEFAULT_SECURITY
    DEFAULT_SECURITY = security


class KafkaConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "kafkalite",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        node_id: int | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.security = security if security is not None else DEFAULT_SECURITY
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.node_id = node_id
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._correlation_ids = itertools.count(1)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._abandoned: set[int] = set()
        self._closed_error: KafkaConnectionError | None = None

    def __repr__(self) -> str:
        node = "" if self.node_id is None else f" node={self.node_id}"
        return f"<KafkaConnection {self.host}:{self.port}{node}>"

    @property
    def connected(self) -> bool:
        task = self._read_task
        return (
            self._writer is not None
            and self._closed_error is None
            and (task is None or not task.done())
        )

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def connect(self) -> None:
        """Open the socket and negotiate API versions. Raises KafkaConnectionError."""
        try:
            async with asyncio.timeout(self.connect_timeout):
                tls = self.security.ssl_context if self.security is not None else None
                self._reader, self._writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=tls,
                    server_hostname=self.host if tls is not None else None,
                )
        except (OSError, TimeoutError) as e:
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"kafka-conn-{self.host}:{self.port}"
        )
        try:
            await self._negotiate_versions()
            if self.security is not None and self.security.mechanism is not None:
                async with asyncio.timeout(self.connect_timeout):
                    await self._authenticate(self.security)
        except BaseException:
            await self.close()
            raise

    async def _negotiate_versions(self) -> None:
        version = CODEC_VERSIONS[ApiKey.API_VERSIONS][1]
        for _attempt in range(2):
            request = build_message(
                request_class(ApiKey.API_VERSIONS, version),
                client_software_name="kafkalite",
                client_software_version="0.1.0",
            )
            response = await self._send_versioned(ApiKey.API_VERSIONS, version, request)
            table = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
            }
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
                low, high = table.get(ApiKey.API_VERSIONS, (0, 0))
                codec_low, codec_high = CODEC_VERSIONS[ApiKey.API_VERSIONS]
                version = min(high, codec_high)
                if version < max(low, codec_low):
                    break
                continue
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(
                    f"ApiVersions failed on {self.host}:{self.port}",
                    error_code=ErrorCode.of(response.error_code),
                )
            self.api_versions = table
            return
        raise UnsupportedVersionError(f"no common ApiVersions version with {self.host}:{self.port}")

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1 then SaslAuthenticate tokens (PLAIN or SCRAM-SHA-256/512)."""
        mechanism = security.mechanism or ""
        username, password = security.username or "", security.password or ""
        handshake = await self.send(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism}, 1)
        if handshake.error_code != ErrorCode.NONE:
            raise KafkaError(
                f"{self.host}:{self.port} refused SASL mechanism {mechanism} "
                f"(enabled: {', '.join(handshake.mechanisms)})",
                error_code=ErrorCode.of(int(handshake.error_code)),
            )

        async def token(data: bytes) -> bytes:
            response = await self.send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": data})
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(
                    response.error_message or "SASL authentication failed",
                    error_code=ErrorCode.of(int(response.error_code)),
                )
            return bytes(response.auth_bytes)

        if mechanism == "PLAIN":
            await token(f"\0{username}\0{password}".encode())
        elif mechanism.startswith("SCRAM-"):
            from kafkalite.security.scram import MECHANISMS as SCRAM_MECHANISMS
            from kafkalite.security.scram import ScramClient, ScramError

            if mechanism not in SCRAM_MECHANISMS:
                raise KafkaError(
                    f"SASL mechanism {mechanism} is not supported by kafkalite's client",
                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                )
            scram = ScramClient(mechanism, username, password)
            try:
                server_first = await token(scram.first())
                scram.verify(await token(scram.final(server_first)))
            except ScramError as e:
                raise KafkaError(
                    f"SCRAM with {self.host}:{self.port}: {e}",
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                ) from None
        else:
            raise KafkaError(
                f"SASL mechanism {mechanism} is not supported by kafkalite's client",
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            )

    def pick_version(self, api_key: int, version: int | None = None) -> int:
        """The version to use for ``api_key``: ``version`` if both sides support it, else the
        newest both support. Raises UnsupportedVersionError."""
        name = ApiKey(api_key).name
        broker = self.api_versions.get(api_key)
        if broker is None:
            raise UnsupportedVersionError(f"{self.host}:{self.port} does not support {name}")
        low = max(broker[0], CODEC_VERSIONS[ApiKey(api_key)][0])
        high = min(broker[1], CODEC_VERSIONS[ApiKey(api_key)][1])
        if version is not None:
            if not low <= version <= high:
                raise UnsupportedVersionError(
                    f"{name} v{version} not in common range v{low}-v{high}"
                )
            return version
        if low > high:
            raise UnsupportedVersionError(f"no common {name} version with {self.host}:{self.port}")
        return high

    async def send(self, api_key: int, request: RequestSpec, version: int | None = None) -> Any:
        """Send a request and return its response (None for Produce with acks=0).

        ``request`` is a message dataclass (its class fixes the version), a dict of field
        values, or a callable ``version -> message``; for the last two the version is
        ``pick_version(api_key, version)``."""
        if isinstance(request, dict):
            values = request
            version = self.pick_version(api_key, version)
            message = build_message(request_class(api_key, version), **values)
        elif callable(request) and not hasattr(type(request), "__api_key__"):
            version = self.pick_version(api_key, version)
            message = request(version)
        else:
            message = request
            version = int(type(message).__version__)
            if self.api_versions:
                self.pick_version(api_key, version)
        return await self._send_versioned(api_key, version, message)

    async def _send_versioned(self, api_key: int, version: int, message: Any) -> Any:
        if self._closed_error is not None:
            raise KafkaConnectionError(str(self._closed_error))
        if self._writer is None:
            raise KafkaConnectionError(f"{self!r} is not connected")
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, self.client_id, message)
        expects_response = not (api_key == ApiKey.PRODUCE and message.acks == 0)
        future: asyncio.Future[Any] | None = None
        if expects_response:
            future = asyncio.get_running_loop().create_future()
            self._pending[correlation_id] = (api_key, version, future)
        try:
            self._writer.write(frame)
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self._fail(KafkaConnectionError(f"write to {self.host}:{self.port} failed: {e}"))
        if future is None:
            return None
        try:
            async with asyncio.timeout(self.request_timeout):
                return await asyncio.shield(future)
        except KafkaConnectionError as shared:
            # The error `_fail` gave every pending request and keeps as `_closed_error`: raised
            # here it took a traceback through this frame, which holds this connection, the
            # future and the request (a controller's thousands of partition states): a
            # reference cycle only the cyclic collector frees, and never once frozen
            # (gc_freeze.py). The shared one keeps no traceback; the caller gets a copy.
            shared.__traceback__ = None
            failure: Exception = KafkaConnectionError(str(shared))
        except TimeoutError:
            # Nobody waits for this request's answer any more: drop its future before failing
            # the others, or its exception is never retrieved (and asyncio reports it).
            if self._pending.pop(correlation_id, None) is not None:
                self._abandoned.add(correlation_id)
                future.cancel()
            message = (
                f"{ApiKey(api_key).name} v{version} to {self.host}:{self.port}: no response "
                f"in {self.request_timeout}s"
            )
            # Kafka's NetworkClient disconnects on a request timeout: the peer may be hung or
            # the link half-open, and the next request must not wait on the same socket.
            self._fail(KafkaConnectionError(f"{message}; disconnected"))
            failure = KafkaTimeoutError(message)
        except asyncio.CancelledError:
            if self._pending.pop(correlation_id, None) is not None:
                self._abandoned.add(correlation_id)
                future.cancel()
            raise
        # Raised outside the handlers, so it has no context (the timeout's TimeoutError, whose
        # traceback holds the timeout and through it this task: a cycle), and the name is
        # dropped as it leaves (this frame, kept by its traceback, would refer back to it).
        try:
            raise failure
        finally:
            del failure

    async def _read_loop(self) -> None:
        assert self._reader is not None
        reader = self._reader
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise KafkaConnectionError(f"invalid response size {size}")
                payload = await reader.readexactly(size)
                self._complete(payload)
        except asyncio.IncompleteReadError:
            self._fail(KafkaConnectionError(f"{self.host}:{self.port} closed the connection"))
        except asyncio.CancelledError:
            self._fail(KafkaConnectionError(f"connection to {self.host}:{self.port} closed"))
            raise
        except Exception as e:  # whatever ends the read loop ends the connection, loudly
            self._fail(
                e
                if isinstance(e, KafkaConnectionError)
                else KafkaConnectionError(f"connection to {self.host}:{self.port} failed: {e!r}")
            )

    def _complete(self, payload: bytes) -> None:
        correlation_id = peek_correlation_id(payload)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            if correlation_id in self._abandoned:
                self._abandoned.discard(correlation_id)
                return
            raise KafkaConnectionError(f"response with unknown correlation id {correlation_id}")
        api_key, version, future = entry
        try:
            _cid, response = decode_response(api_key, version, payload)
        except Exception as e:  # the codec's own errors included (a value out of its bounds)
            error = KafkaConnectionError(
                f"undecodable {ApiKey(api_key).name} v{version} response: {e!r}"
            )
            future.set_exception(error)
            raise error from e
        if not future.done():
            future.set_result(response)

    def _fail(self, error: KafkaConnectionError) -> None:
        # Kept, and given to every pending request, without a traceback: one raised by the read
        # loop holds its frame, and so this connection (a cycle; see `_send_versioned`).
        error.__traceback__ = None
        if self._closed_error is None:
            self._closed_error = error
        pending, self._pending = self._pending, {}
        for _key, _version, future in pending.values():
            if not future.done():
                future.set_exception(error)
        if self._writer is not None:
            self._writer.close()

    async def close(self) -> None:
        """Close the socket; pending requests fail with KafkaConnectionError. Idempotent."""
        self._fail(KafkaConnectionError(f"connection to {self.host}:{self.port} closed"))
        task, self._read_task = self._read_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            # asyncio.wait, not `await task` under suppress(CancelledError): a cancellation of
            # the caller (a fetcher or controller channel being stopped while it reconnects)
            # must propagate, not be taken for the read task's and swallowed.
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: the read loop's failure was already reported
        if self._writer is not None:
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await self._writer.wait_closed()
            except TimeoutError:
                # A peer that stopped reading keeps unsent bytes in the buffer, and a graceful
                # close waits for them forever: drop the connection instead.
                self._writer.transport.abort()
            except (OSError, RuntimeError) as error:
                # A reset by the peer, kept by the stream's close waiter: raised here it took a
                # traceback through this frame, and so back to this connection (a cycle, kept
                # for the process's life once frozen; decision 0072).
                error.__traceback__ = None

    async def __aenter__(self) -> KafkaConnection:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def request_builder(api_key: int, **values: Any) -> Callable[[int], Any]:
    """A ``version -> message`` callable for ``send`` from field values (see build_message)."""

    def build(version: int) -> Any:
        return build_message(request_class(api_key, version), **values)

    return build
