"""Kafka's SaslServerAuthenticator for one connection of a SASL_PLAINTEXT / SASL_SSL listener.

A state machine over request frames, consulted by the dispatcher before anything else
(``intercept``). Until the client has authenticated only ApiVersions (answered as usual),
SaslHandshake and SaslAuthenticate are served; any other request closes the connection
(ILLEGAL_SASL_STATE, as Kafka). States, as Kafka's:

    HANDSHAKE_OR_VERSIONS --SaslHandshake v1--> AUTHENTICATE --(exchange done)--> COMPLETE
                          --SaslHandshake v0--> RAW_TOKENS   --(exchange done)--> COMPLETE

- SaslHandshake names a mechanism; one not enabled on the listener is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection is closed.
- After a v1 handshake the tokens travel in SaslAuthenticate v0-2; after a v0 handshake (old
  clients) as raw size-prefixed frames without a request header.
- A failed exchange is answered SASL_AUTHENTICATION_FAILED (with Kafka's message) and the
  connection is closed once the answer is written; in raw mode it is closed at once. Both
  happen ``failed_delay_ms`` after the failure (Kafka's
  ``connection.failed.authentication.delay.ms``), on a timer: nothing else waits for it.
- Failed authentications count against the client's address (ratelimit.py); an address over
  the limit has its next attempts failed the same way without any credential being checked.
- A token out of turn (a SCRAM client-final pipelined before the server-first answer) or one
  that does not parse fails the authentication; client input never trips an assertion.
- Session lifetime (KIP-368): with ``connections.max.reauth.ms`` > 0, SaslAuthenticate v1+
  tells the client how long the session lasts; a request that arrives after that without a
  re-authentication closes the connection. Re-authentication (SaslHandshake + SaslAuthenticate on
  an authenticated connection) must use the same mechanism and principal.

Mechanisms: PLAIN (users from the listener's JAAS ``user_<name>`` options), SCRAM-SHA-256/512
(credentials looked up through an async ``credentials(user, mechanism)`` callable, i.e. the
coordination store's ``/config/users/<user>``) and OAUTHBEARER (oauthbearer.py: a token checked
by the listener's validator). An OAUTHBEARER session ends when its token expires (or after
``connections.max.reauth.ms``, whichever comes first), as Kafka's; a token refused by the
validator is counted against the address at once, not only when the client gives up.

Pure: no sockets; ``intercept`` returns what to send (encoded frames) or an awaitable of it.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import struct
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, response_class
from kafkalite.protocol.errors import ErrorCode, KafkaError

from .oauthbearer import MECHANISM as OAUTHBEARER
from .oauthbearer import OAuthBearerError, OAuthBearerSaslServer, Validator
from .ratelimit import FailedAuthLimiter
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramCredential, ScramError, ScramSaslServer, parse_client_first

CredentialLookup = Callable[[str, str], Awaitable["ScramCredential | None"]]

ANONYMOUS = "User:ANONYMOUS"
_SIZE = struct.Struct(">i")

HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS"
AUTHENTICATE = "AUTHENTICATE"
RAW_TOKENS = "RAW_TOKENS"
COMPLETE = "COMPLETE"
FAILED = "FAILED"


class SaslRefused(KafkaError):
    """A request the SASL state does not allow: the connection is closed."""

    error_code = ErrorCode.ILLEGAL_SASL_STATE


class _RateLimited(ScramError):
    """An attempt refused, unchecked, because its address failed too often (ratelimit.py)."""


class _AlreadyCounted(OAuthBearerError):
    """The end of an exchange whose refused token was already counted (ratelimit.py)."""


class CloseAfter:
    """A response after which the connection must be closed (a failed authentication)."""

    __slots__ = ("response",)

    def __init__(self, response: bytes) -> None:
        self.response = response


class SaslServerAuthenticator:
    __slots__ = (
        "mechanisms",
        "plain_users",
        "credentials",
        "reauth_ms",
        "clock",
        "state",
        "mechanism",
        "principal",
        "expires_at",
        "_scram",
        "_reauthenticating",
        "_previous_principal",
        "client_host",
        "limiter",
        "failed_delay_ms",
        "scram_unknown_user_secret",
        "oauth_validator",
        "wall_clock",
        "_oauth",
    )

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        *,
        plain_users: dict[str, str] | None = None,
        credentials: CredentialLookup | None = None,
        reauth_ms: Callable[[str], int] | int = 0,
        clock: Callable[[], float] = time.monotonic,
        client_host: str = "",
        limiter: FailedAuthLimiter | None = None,
        failed_delay_ms: int = 0,
        scram_unknown_user_secret: bytes | None = None,
        oauth_validator: Validator | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.mechanisms = mechanisms
        self.oauth_validator = oauth_validator
        self.wall_clock = wall_clock
        """What a token's ``exp`` is compared with (``clock`` may be monotonic)."""
        self._oauth: OAuthBearerSaslServer | None = None
        self.client_host = client_host
        self.limiter = limiter
        self.failed_delay_ms = failed_delay_ms
        self.scram_unknown_user_secret = scram_unknown_user_secret
        """What unknown users' salts are derived from (scram.fake_credential); None: the
        process's own."""
        self.plain_users = plain_users or {}
        self.credentials = credentials
        self.reauth_ms = reauth_ms
        self.clock = clock
        self.state = HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.expires_at: float | None = None
        self._scram: ScramSaslServer | None = None
        self._reauthenticating = False
        self._previous_principal: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    # ------------------------------------------------------------------ the dispatcher's entry

    def intercept(self, frame: bytearray) -> Any:
        """None: the frame is an ordinary request, to be dispatched. Otherwise what to answer:
        an encoded frame, a CloseAfter, or an awaitable of one of those. Raises SaslRefused
        (close the connection) for a request the state does not allow."""
        state = self.state
        if state == COMPLETE:
            api_key = _api_key(frame)
            if api_key == ApiKey.SASL_HANDSHAKE:
                return self._handshake(frame, reauthentication=True)
            if api_key == ApiKey.SASL_AUTHENTICATE and self._reauthenticating:
                return self._authenticate(frame)
            if self.expires_at is not None and self.clock() > self.expires_at:
                raise SaslRefused("SASL session expired: the client did not re-authenticate")
            return None
        if state == RAW_TOKENS:
            return self._raw_token(frame)
        api_key = _api_key(frame)
        if state == HANDSHAKE_OR_VERSIONS:
            if api_key == ApiKey.API_VERSIONS:
                return None
            if api_key == ApiKey.SASL_HANDSHAKE:
                return self._handshake(frame, reauthentication=False)
        elif state == AUTHENTICATE and api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(frame)
        self.state = FAILED
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
        raise SaslRefused(f"unexpected {name} request in SASL state {state}")

    # ------------------------------------------------------------------ handshake

    def _handshake(self, frame: bytearray, *, reauthentication: bool) -> Any:
        header, offset = frames.parse_request_header(frame)
        request = frames.decode_request(header, frame, offset)
        mechanism = request.mechanism
        enabled = mechanism in self.mechanisms
        if reauthentication and (header.api_version < 1 or mechanism != self.mechanism):
            enabled = False  # KIP-368: same mechanism, and only with SaslAuthenticate
        cls = response_class(ApiKey.SASL_HANDSHAKE, header.api_version)
        code = ErrorCode.NONE if enabled else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        response = frames.encode_response(
            header, cls(error_code=code, mechanisms=tuple(self.mechanisms))
        )
        if not enabled:
            self.state = FAILED
            return CloseAfter(response)
        self.mechanism = mechanism
        self._scram = None
        self._oauth = None
        if reauthentication:
            self._reauthenticating = True
            self._previous_principal = self.principal
        else:
            self.state = AUTHENTICATE if header.api_version >= 1 else RAW_TOKENS
        return response

    # ------------------------------------------------------------------ tokens

    def _authenticate(self, frame: bytearray) -> Any:
        header, offset = frames.parse_request_header(frame)
        request = frames.decode_request(header, frame, offset)
        cls = response_class(ApiKey.SASL_AUTHENTICATE, header.api_version)

        def answer(result: bytes | ScramError) -> Any:
            if isinstance(result, ScramError):
                self._failed(result)
                return self._after_failure_delay(
                    CloseAfter(
                        frames.encode_response(
                            header,
                            _build(
                                cls,
                                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                error_message=str(result),
                                auth_bytes=b"",
                            ),
                        )
                    )
                )
            fields: dict[str, Any] = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "auth_bytes": result,
            }
            if self.principal is not None and self._done():
                lifetime = self._start_session()
                fields["session_lifetime"] = timedelta(milliseconds=lifetime)
            return frames.encode_response(header, _build(cls, **fields))

        step = self._evaluate(bytes(request.auth_bytes))
        if isinstance(step, bytes | ScramError):
            return answer(step)
        return _then(step, answer)

    def _raw_token(self, frame: bytearray) -> Any:
        def answer(result: bytes | ScramError) -> Any:
            if isinstance(result, ScramError):
                self._failed(result)
                return self._after_failure_delay(
                    SaslRefused(f"SASL authentication failed: {result}")
                )
            if self._done():
                self._start_session()
            return _SIZE.pack(len(result)) + result

        step = self._evaluate(bytes(frame))
        if isinstance(step, bytes | ScramError):
            return answer(step)
        return _then(step, answer)

    def _failed(self, error: ScramError) -> None:
        self.state = FAILED
        # refused attempts take nothing: the address gets `per_second` checks, not none
        if self.limiter is not None and not isinstance(error, _RateLimited | _AlreadyCounted):
            self.limiter.failed(self.client_host)

    def _after_failure_delay(self, outcome: CloseAfter | SaslRefused) -> Any:
        """The failure's answer (or, raised, the close of a raw-token exchange), held back by
        ``failed_delay_ms`` without holding anything else."""
        if self.failed_delay_ms <= 0:
            if isinstance(outcome, SaslRefused):
                raise outcome
            return outcome
        delay = self.failed_delay_ms / 1000

        async def delayed() -> CloseAfter:
            await asyncio.sleep(delay)
            if isinstance(outcome, SaslRefused):
                raise outcome
            return outcome

        return delayed()

    def _done(self) -> bool:
        if self.mechanism == OAUTHBEARER:
            return self._oauth is not None and self._oauth.complete
        return self.mechanism == "PLAIN" or (self._scram is not None and self._scram.complete)

    def _start_session(self) -> int:
        """The exchange is over: the connection is authenticated; its lifetime in ms (0 = none)."""
        if self._reauthenticating:
            self._reauthenticating = False
            if self.principal != self._previous_principal:
                self.state = FAILED
                raise SaslRefused("re-authentication changed the principal")
        self.state = COMPLETE
        reauth = (
            self.reauth_ms(self.mechanism or "") if callable(self.reauth_ms) else self.reauth_ms
        )
        token = self._oauth.token if self._oauth is not None else None
        if token is not None:
            # Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the credential's expiry
            # bounds the session, connections.max.reauth.ms too when set
            remaining = max(0, token.lifetime_ms - int(self.wall_clock() * 1000))
            reauth = min(remaining, reauth) if reauth > 0 else remaining
            self.expires_at = self.clock() + reauth / 1000
            return reauth
        self.expires_at = self.clock() + reauth / 1000 if reauth > 0 else None
        return reauth

    def _evaluate(self, token: bytes) -> bytes | ScramError | Awaitable[bytes | ScramError]:
        limiter = self.limiter
        if limiter is not None and limiter.retry_after(self.client_host) > 0:
            return _RateLimited(
                "Authentication failed: too many failed authentications from this address"
            )
        mechanism = self.mechanism
        if mechanism == "PLAIN":
            return self._plain(token)
        if mechanism in SCRAM_MECHANISMS:
            return self._scram_step(token, mechanism)
        if mechanism == OAUTHBEARER and self.oauth_validator is not None:
            return self._oauthbearer_step(token)
        return ScramError(f"mechanism {mechanism} is not enabled")

    def _plain(self, token: bytes) -> bytes | ScramError:
        """Kafka's PlainSaslServer: [authzid] NUL authcid NUL passwd."""
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return ScramError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            return ScramError("Invalid SASL/PLAIN response: not UTF-8")
        if not user:
            return ScramError("Authentication failed: username not specified")
        if not password:
            return ScramError("Authentication failed: password not specified")
        expected = self.plain_users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return ScramError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            return ScramError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.principal = f"User:{user}"
        return b""

    def _scram_step(
        self, token: bytes, mechanism: str
    ) -> bytes | ScramError | Awaitable[bytes | ScramError]:
        server = self._scram
        try:
            if server is None:
                first = parse_client_first(token)
                if first.authzid and first.authzid != first.username:
                    raise ScramError("Authentication failed: authorization id is not the user")
                secret = self.scram_unknown_user_secret
                self._scram = (
                    ScramSaslServer(mechanism)
                    if secret is None
                    else ScramSaslServer(mechanism, secret)
                )
                lookup = self.credentials

                async def with_credential() -> bytes | ScramError:
                    credential = None
                    if lookup is not None:
                        credential = await lookup(first.username, mechanism)
                    try:
                        return self._scram.first(first, credential)  # type: ignore[union-attr]
                    except ScramError as e:
                        return e

                return with_credential()
            if server.complete:
                raise ScramError("unexpected token after the SCRAM exchange")
            final = server.final(token)
            if server.client_first is None:  # final() refuses that; kept without an assert
                raise ScramError("Authentication failed: unexpected client-final-message")
            self.principal = f"User:{server.client_first.username}"
            return final
        except ScramError as e:
            return e

    def _oauthbearer_step(self, token: bytes) -> bytes | ScramError | Awaitable[Any]:
        server = self._oauth
        if server is None:
            assert self.oauth_validator is not None  # _evaluate checked
            server = self._oauth = OAuthBearerSaslServer(self.oauth_validator)
        already_refused = server.error_message is not None

        def settle(result: bytes | ScramError) -> bytes | ScramError:
            if isinstance(result, ScramError):
                if already_refused and token == b"\x01":
                    return _AlreadyCounted(str(result))
                return result
            if server.complete and server.token is not None:
                self.principal = f"User:{server.token.principal_name}"
            elif server.error_message is not None and self.limiter is not None:
                # counted now: a client may try token after token without ever giving up
                self.limiter.failed(self.client_host)
            return result

        step = server.evaluate(token)
        if isinstance(step, bytes | ScramError):
            return settle(step)

        async def later() -> bytes | ScramError:
            return settle(await step)

        return later()


def _api_key(frame: bytearray) -> int:
    if len(frame) < 2:
        raise SaslRefused("a request too short for its API key")
    return int.from_bytes(frame[0:2], "big", signed=True)


def _build(cls: type, **fields: Any) -> Any:
    names = {f for f in getattr(cls, "__dataclass_fields__", {})}
    return cls(**{k: v for k, v in fields.items() if k in names})


async def _then(step: Awaitable[Any], answer: Callable[[Any], Any]) -> Any:
    result = answer(await step)
    if inspect.isawaitable(result):  # a failure, answered after the delay
        result = await result
    return result
