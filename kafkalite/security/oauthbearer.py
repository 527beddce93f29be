"""SASL/OAUTHBEARER on the broker (RFC 7628, KIP-255; OIDC token validation, KIP-768).

The exchange, as Kafka's OAuthBearerSaslServer:

- The client's initial response is ``n,[a=<authzid>],`` then ``auth=Bearer <token>`` and any
  extensions ``key=value``, each followed by 0x01, and a final 0x01
  (``parse_client_initial_response``; anything else is refused, never an exception of another
  kind).
- A token the validator accepts completes the exchange: the principal is ``User:<claim>`` (the
  ``sub`` claim, or the configured one), an authzid must equal it, and the session lasts until
  the token's ``exp`` (KIP-368: the client is told, and a request after that closes the
  connection, unless it re-authenticated with a fresh token).
- A token it refuses is answered, without an error code, with Kafka's JSON challenge
  (``{"status":"invalid_token"}``); the client answers with a single 0x01 and the authentication
  then fails with SASL_AUTHENTICATION_FAILED carrying that JSON.

Two validators, chosen by ``[listener.name.<l>.oauthbearer.]sasl.server.callback.handler.class``:

- unset (or Kafka's unsecured handler): ``UnsecuredValidator``, Kafka's development-only
  validator of unsigned JWS (``alg: none``), with its JAAS options
  ``unsecuredValidatorPrincipalClaimName``, ``...ScopeClaimName``, ``...RequiredScope`` and
  ``...AllowableClockSkewMs``;
- Kafka's ``OAuthBearerValidatorCallbackHandler``: ``JwtValidator``, signed JWTs (RS*, PS*, ES*)
  checked against a JWKS (``sasl.oauthbearer.jwks.endpoint.url``, a ``file:`` URL read at
  start-up or an http(s) one fetched at start-up and refreshed), with the expected audience and
  issuer, the clock skew and the scope and subject claim names.

Invariants: validation never blocks the event loop (JWKS fetches run in a worker thread); a key
id the JWKS does not have triggers at most one refresh per id a minute (at most one fetch in
flight), which the authentication waits for (bounded) before it is refused; every setting is
checked by ``build_validator`` at start-up, and a bad one raises OAuthConfigError naming its key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from .scram import ScramError
from .tls import TlsConfigError

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)
VALIDATOR_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
"""Kafka 4's system property (here a broker property): the exact URLs the broker may read a
JWKS from, comma-separated; empty (the default) allows none."""

SIGNATURE_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
)
"""The JWS algorithms a signed token may use (asymmetric: a JWKS publishes public keys)."""

_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
MISSING_KID_RECHECK_S = 60.0  # Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
MISSING_KID_CACHE = 16
MAX_KID_LENGTH = 1000
JWKS_FETCH_TIMEOUT_S = 10.0
JWKS_MAX_BYTES = 1 << 20
EXPEDITED_REFRESH_WAIT_S = 10.0
"""How long an authentication with an unknown key id waits for the JWKS refresh it caused."""


class OAuthBearerError(ScramError):
    """The exchange fails: SASL_AUTHENTICATION_FAILED with this message."""


class OAuthConfigError(TlsConfigError):
    """A bad OAUTHBEARER setting; ``key`` names it. Start-up stops."""


# ---------------------------------------------------------------- the client's initial response

_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_INITIAL = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEP})*){_SEP}"
)
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)


@dataclass(frozen=True)
class ClientInitialResponse:
    token: str
    authzid: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


def parse_client_initial_response(data: bytes) -> ClientInitialResponse:
    """RFC 7628's client initial response, as Kafka's OAuthBearerClientInitialResponse reads
    it; OAuthBearerError (and nothing else) for anything that is not one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message") from None
    m = _INITIAL.fullmatch(text)
    if m is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message")
    properties: dict[str, str] = {}
    for pair in m.group("kvpairs").split(_SEP):
        if pair:
            key, _, value = pair.partition("=")
            properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in properties.items():  # the pattern already holds them to this; kept explicit
        if not _KEY_RE.fullmatch(key) or not _VALUE_RE.fullmatch(value):
            raise OAuthBearerError(f"Extension name {key} is invalid")
    a = _AUTH.fullmatch(auth)
    if a is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a.group("scheme").lower() != "bearer":
        raise OAuthBearerError(
            f"Invalid scheme in OAUTHBEARER client first message: {a.group('scheme')}"
        )
    return ClientInitialResponse(a.group("token"), m.group("authzid") or "", properties)


# ---------------------------------------------------------------- validation results


@dataclass(frozen=True)
class BearerToken:
    """A validated token: what the session is made of."""

    value: str
    principal_name: str
    lifetime_ms: int
    """The token's expiry (``exp``), milliseconds since the epoch."""
    scope: frozenset[str] = frozenset()
    start_time_ms: int | None = None


@dataclass(frozen=True)
class Invalid:
    """A refused token: the challenge sent back, and the reason (logged, never sent)."""

    reason: str
    status: str = "invalid_token"
    scope: str | None = None

    def challenge(self) -> str:
        """Kafka's jsonErrorResponse, byte for byte."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        return text + "}"


Validation = BearerToken | Invalid


class Validator:
    def validate(self, token: str) -> Validation | Awaitable[Validation]:
        raise NotImplementedError


def _b64decode(part: str) -> bytes:
    """A JWS part: base64url (also the standard alphabet, which Kafka's unsecured decoder
    reads), padding optional."""
    data = part.replace("-", "+").replace("_", "/")
    data += "=" * (-len(data) % 4)
    return base64.b64decode(data, validate=True)


def _json_object(part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64decode(part))
    except (binascii.Error, ValueError, RecursionError):
        raise _Refused("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(value, dict):
        raise _Refused("malformed JSON")
    return value


class _Refused(Exception):
    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---------------------------------------------------------------- Kafka's unsecured validator


def _kafka_text(value: Any) -> Any:
    """A claim as Kafka's unsecured JWS holds it (Jackson's asText): numbers stay numbers,
    arrays become lists of text, anything else text."""
    if isinstance(value, list):
        return [_kafka_text_scalar(v) for v in value]
    if _number(value):
        return value
    return _kafka_text_scalar(value)


def _kafka_text_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if _number(value):
        return json.dumps(value)
    return ""


_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")


def parse_scope(text: str) -> list[str]:
    """A space-delimited scope (OAuthBearerScopeUtils); ValueError for an invalid item."""
    items = []
    for item in text.split(" "):
        if item:
            if not _SCOPE_ITEM.fullmatch(item):
                raise ValueError(f"Invalid scope value: {item}")
            items.append(item)
    return items


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


class UnsecuredValidator(Validator):
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: an unsigned JWS (``alg: none``,
    empty signature) with a string principal claim and a numeric ``exp``, optional ``iat``;
    not expired, not issued in the future, with the required scope. For development only, as in
    Kafka: anyone can write such a token."""

    OPTIONS = (
        "unsecuredValidatorPrincipalClaimName",
        "unsecuredValidatorScopeClaimName",
        "unsecuredValidatorRequiredScope",
        "unsecuredValidatorAllowableClockSkewMs",
    )

    def __init__(
        self, options: Mapping[str, str], *, clock: Callable[[], float] = time.time
    ) -> None:
        """ValueError naming the JAAS option for a bad value."""
        self.principal_claim = (options.get(self.OPTIONS[0]) or "").strip() or "sub"
        self.scope_claim = (options.get(self.OPTIONS[1]) or "").strip() or "scope"
        try:
            self.required_scope = parse_scope((options.get(self.OPTIONS[2]) or "").strip())
        except ValueError as e:
            raise ValueError(f"{self.OPTIONS[2]}: {e}") from None
        raw = (options.get(self.OPTIONS[3]) or "").strip()
        try:
            self.clock_skew_ms = int(raw) if raw else 0
        except ValueError:
            raise ValueError(f"{self.OPTIONS[3]}: not an integer: {raw!r}") from None
        if not 0 <= self.clock_skew_ms <= 2**31 - 1:
            raise ValueError(f"{self.OPTIONS[3]}: must not be negative: {raw}")
        self.clock = clock

    def validate(self, token: str) -> Validation:
        try:
            return self._validate(token)
        except _Refused as e:
            if e.scope is not None:
                return Invalid(str(e), "insufficient_scope", e.scope)
            return Invalid(str(e))

    def _validate(self, token: str) -> BearerToken:
        if ".." in token:
            raise _Refused("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise _Refused(
                "Unsecured JWS compact serializations must have 3 dot-separated "
                "Base64URL-encoded values"
            )
        header = _json_object(parts[0])
        claims = {k: _kafka_text(v) for k, v in _json_object(parts[1]).items()}
        if header.get("alg") != "none":
            raise _Refused("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise _Refused("Unsecured JWS must not contain a digital signature")
        scope_claim = claims.get(self.scope_claim)
        if isinstance(scope_claim, str):
            scope = frozenset({scope_claim.strip()} if scope_claim.strip() else ())
        elif isinstance(scope_claim, list) or scope_claim is None:
            scope = frozenset(s.strip() for s in scope_claim or () if s.strip())
        else:
            raise _Refused(f"The '{self.scope_claim}' claim was not of type List")
        exp, iat = claims.get("exp"), claims.get("iat")
        if exp is None:
            raise _Refused("No expiration time in JWT")
        if not _number(exp):
            raise _Refused("The 'exp' claim was not of type Number")
        if iat is not None and not _number(iat):
            raise _Refused("The 'iat' claim was not of type Number")
        principal = claims.get(self.principal_claim)
        if principal is not None and not isinstance(principal, str):
            raise _Refused(f"The '{self.principal_claim}' claim was not of type String")
        if principal is None or not principal.strip():
            raise _Refused(f"No principal name in JWT claim: {self.principal_claim}")
        now_ms = self.clock() * 1000
        skew = self.clock_skew_ms
        if iat is not None and 1000 * iat > now_ms + skew:
            raise _Refused("The Issued At value was after the indicated time plus clock skew")
        if now_ms - skew >= 1000 * exp:
            raise _Refused(
                "The indicated time minus clock skew was on or after the Expiration Time"
            )
        if iat is not None and exp <= iat:
            raise _Refused("The Expiration Time time was not after the Issued At time")
        for item in self.required_scope:
            if item not in scope:
                raise _Refused(
                    f"The provided scope was missing a required scope ({item})",
                    scope=_java_list(self.required_scope),
                )
        return BearerToken(
            token,
            principal,
            _ms(exp),
            scope,
            None if iat is None else _ms(iat),
        )


def _ms(seconds: float) -> int:
    try:
        if math.isfinite(seconds) and abs(seconds) < 2**53:
            return round(seconds * 1000)
    except OverflowError:  # an integer too large for a float
        pass
    raise _Refused("a time claim is out of range")


# ---------------------------------------------------------------- signed JWTs (KIP-768)


def _import_keys(document: Any) -> list[Any]:
    """The keys of a JWKS document; ValueError when it is not one. Keys of a type or with
    parameters this broker cannot use are left out, as jose4j does."""
    from joserfc.errors import JoseError
    from joserfc.jwk import JWKRegistry

    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError('not a JWKS (a JSON object with a "keys" array)')
    keys = []
    for entry in document["keys"]:
        if not isinstance(entry, dict):
            continue
        try:
            keys.append(JWKRegistry.import_key(entry))
        except (JoseError, ValueError, TypeError, KeyError):
            continue
    return keys


def _candidates(keys: list[Any], header: Mapping[str, Any]) -> list[Any]:
    """jose4j's VerificationJwkSelector: the keys that may have signed a JWS with this header
    (its kid when it has one, the algorithm's key type and curve, a signing key)."""
    alg = header.get("alg")
    kid = header.get("kid")
    kty = {"R": "RSA", "P": "RSA", "E": "EC"}.get(str(alg)[:1])
    out = []
    for key in keys:
        if kid is not None and key.kid != kid:
            continue
        if key.key_type != kty:
            continue
        params = key.as_dict(private=False)
        if params.get("use") not in (None, "sig"):
            continue
        if params.get("alg") not in (None, alg):
            continue
        if kty == "EC" and params.get("crv") != _EC_CURVES.get(str(alg)):
            continue
        out.append(key)
    return out


class StaticKeys:
    """A JWKS read once (a ``file:`` URL, as Kafka's JwksFileVerificationKeyResolver)."""

    def __init__(self, keys: list[Any]) -> None:
        self.keys = keys

    def candidates(self, header: Mapping[str, Any]) -> list[Any]:
        return _candidates(self.keys, header)

    def refresh_for(self, kid: str | None) -> Awaitable[None] | None:
        return None


class JwksEndpoint:
    """A JWKS served over http(s), as Kafka's RefreshingHttpsJwks: fetched at start-up, again
    once it is ``refresh_ms`` old (in the background, on the next use), and at once for a key
    id it does not have (at most once a minute per id, 16 ids remembered). Fetches run in a
    worker thread, one at a time, retried with back-off up to ``backoff_max_ms``; a failed
    refresh keeps the keys already known."""

    def __init__(
        self,
        url: str,
        *,
        refresh_ms: int = 3_600_000,
        backoff_ms: int = 100,
        backoff_max_ms: int = 10_000,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.refresh_ms = refresh_ms
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = backoff_max_ms
        self.ssl_context = ssl_context
        self.clock = clock
        self.keys: list[Any] = []
        self.fetched_at: float | None = None
        self.fetches = 0
        self._missing: OrderedDict[str, float] = OrderedDict()
        self._refreshing: asyncio.Future[None] | None = None

    def fetch_blocking(self) -> list[Any]:
        """One GET of the document (in a worker thread); OSError or ValueError on failure."""
        # urllib.request (http.client, email) is imported by the first fetch, not by every
        # broker's start through security/sasl.py (decision 0061)
        import urllib.request

        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(  # noqa: S310 - the URL is on the allowed list
            request, timeout=JWKS_FETCH_TIMEOUT_S, context=self.ssl_context
        ) as response:
            body = response.read(JWKS_MAX_BYTES + 1)
        if len(body) > JWKS_MAX_BYTES:
            raise ValueError(f"the JWKS is larger than {JWKS_MAX_BYTES} bytes")
        return _import_keys(json.loads(body))

    async def start(self) -> None:
        """The first fetch; OSError / ValueError when it fails (start-up stops)."""
        self.keys = await asyncio.to_thread(self.fetch_blocking)
        self.fetches += 1
        self.fetched_at = self.clock()

    def candidates(self, header: Mapping[str, Any]) -> list[Any]:
        if (
            self.fetched_at is not None
            and (self.clock() - self.fetched_at) * 1000 >= self.refresh_ms
            and self._refreshing is None
        ):
            self._start_refresh()
        return _candidates(self.keys, header)

    def refresh_for(self, kid: str | None) -> Awaitable[None] | None:
        """A refresh for a key id the JWKS lacks (None when this id was tried within the last
        minute, or is too long to be a real one); the awaitable ends when it is done, or after
        EXPEDITED_REFRESH_WAIT_S."""
        key = "" if kid is None else str(kid)
        if len(key) > MAX_KID_LENGTH:
            return None
        now = self.clock()
        next_check = self._missing.get(key)
        if next_check is not None and next_check > now:
            return None
        self._missing[key] = now + MISSING_KID_RECHECK_S
        self._missing.move_to_end(key)
        while len(self._missing) > MISSING_KID_CACHE:
            self._missing.popitem(last=False)
        refreshing = self._start_refresh()
        if refreshing is None:
            return None

        async def wait() -> None:
            try:
                await asyncio.wait_for(asyncio.shield(refreshing), EXPEDITED_REFRESH_WAIT_S)
            except (TimeoutError, asyncio.CancelledError):
                pass

        return wait()

    def _start_refresh(self) -> asyncio.Future[None] | None:
        if self._refreshing is not None:
            return self._refreshing
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        task = loop.create_task(self._refresh())
        self._refreshing = task
        task.add_done_callback(self._refreshed)
        return task

    def _refreshed(self, task: asyncio.Future[None]) -> None:
        self._refreshing = None
        if not task.cancelled():
            task.exception()  # retrieved: a failed refresh is logged in _refresh

    async def _refresh(self) -> None:
        from structlog import get_logger

        backoff = self.backoff_ms / 1000
        waited = 0.0
        while True:
            try:
                keys = await asyncio.to_thread(self.fetch_blocking)
            except (OSError, ValueError) as e:
                if waited + backoff > self.backoff_max_ms / 1000:
                    get_logger(__name__).warning(
                        "JWKS refresh failed; keeping the keys known", url=self.url, error=str(e)
                    )
                    return
                await asyncio.sleep(backoff)
                waited += backoff
                backoff *= 2
                continue
            self.keys = keys
            self.fetches += 1
            self.fetched_at = self.clock()
            for k in keys:
                self._missing.pop(k.kid or "", None)
            return


KeySource = StaticKeys | JwksEndpoint


class JwtValidator(Validator):
    """Kafka's OAuthBearerValidatorCallbackHandler (jose4j's JwtConsumer as Kafka builds it):
    a signed JWT whose key is in the JWKS; ``exp`` and ``iat`` required, not expired (``exp`` +
    clock skew), not before ``nbf`` (- clock skew); the audience, when expected, among the
    token's; the issuer, when expected, equal; the subject claim a non-blank string; the scope
    claim a string or a list of distinct non-blank strings."""

    def __init__(
        self,
        keys: KeySource,
        *,
        audience: frozenset[str] = frozenset(),
        issuer: str | None = None,
        clock_skew_s: int = 30,
        scope_claim: str = "scope",
        sub_claim: str = "sub",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.clock_skew_s = clock_skew_s
        self.scope_claim = scope_claim
        self.sub_claim = sub_claim
        self.clock = clock

    def validate(self, token: str) -> Validation | Awaitable[Validation]:
        try:
            header = self._header(token)
            candidates = self.keys.candidates(header)
            if not candidates:
                refresh = self.keys.refresh_for(header.get("kid"))
                if refresh is not None:
                    return self._after(refresh, token, header)
                raise _Refused(f"no key in the JWKS for the token's key id {header.get('kid')!r}")
            return self._verified(token, candidates)
        except _Refused as e:
            return Invalid(f"Could not validate the access token: {e}")

    async def _after(self, refresh: Awaitable[None], token: str, header: dict) -> Validation:
        await refresh
        try:
            candidates = self.keys.candidates(header)
            if not candidates:
                raise _Refused(f"no key in the JWKS for the token's key id {header.get('kid')!r}")
            return self._verified(token, candidates)
        except _Refused as e:
            return Invalid(f"Could not validate the access token: {e}")

    def _header(self, token: str) -> dict[str, Any]:
        parts = token.strip().split(".")
        if len(parts) != 3 or not all(parts):
            raise _Refused(
                "Malformed JWT provided; expected three sections (header, payload, and signature)"
            )
        header = _json_object(parts[0])
        if header.get("alg") not in SIGNATURE_ALGORITHMS:
            raise _Refused(f"the algorithm {header.get('alg')!r} is not allowed")
        return header

    def _verified(self, token: str, candidates: list[Any]) -> BearerToken:
        from joserfc import jwt
        from joserfc.errors import JoseError
        from joserfc.jws import JWSRegistry

        header = self._header(token)
        # unknown header parameters are accepted, as jose4j does (a "crit" one is not)
        registry = JWSRegistry(algorithms=SIGNATURE_ALGORITHMS, strict_check_header=False)
        claims = None
        for key in candidates:
            try:
                claims = jwt.decode(
                    token.strip(), key, algorithms=[header["alg"]], registry=registry
                ).claims
                break
            except (JoseError, ValueError, TypeError):
                continue
        if claims is None:
            raise _Refused("the signature does not verify with the JWKS's keys")
        return self._claims(token, claims)

    def _claims(self, token: str, claims: Mapping[str, Any]) -> BearerToken:
        now = self.clock()
        skew = self.clock_skew_s
        for name in ("exp", "iat"):
            value = claims.get(name)
            if value is None:
                raise _Refused(f"No {name} claim present")
            if not _number(value) or value < 0:
                raise _Refused(f"The {name} claim is not a non-negative number")
        exp: float = claims["exp"]
        iat: float = claims["iat"]
        nbf = claims.get("nbf")
        if nbf is not None and (not _number(nbf) or now + skew < nbf):
            raise _Refused("The JWT is not yet valid (nbf)")
        if now - skew >= exp:
            raise _Refused("The JWT is no longer valid (exp)")
        if self.audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else None
            if auds is None:
                raise _Refused("No Audience (aud) claim present")
            if not any(isinstance(a, str) and a in self.audience for a in auds):
                raise _Refused(f"Audience (aud) claim {aud} doesn't contain an acceptable one")
        if self.issuer is not None:
            iss = claims.get("iss")
            if iss != self.issuer:
                raise _Refused(f"Issuer (iss) claim value ({iss}) doesn't match expected value")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise _Refused(f"{self.sub_claim} value must be a non-blank string")
        raw_scope = claims.get(self.scope_claim)
        items = (
            [raw_scope]
            if isinstance(raw_scope, str)
            else raw_scope
            if isinstance(raw_scope, list)
            else []
        )
        scope: set[str] = set()
        for item in items:
            if not isinstance(item, str) or not item.strip():
                raise _Refused(f"{self.scope_claim} values must be non-blank strings")
            if item.strip() in scope:
                raise _Refused(f"{self.scope_claim} value must not contain duplicates")
            scope.add(item.strip())
        return BearerToken(token, sub.strip(), _ms(exp), frozenset(scope), _ms(iat))


# ---------------------------------------------------------------- the SASL server


class OAuthBearerSaslServer:
    """One exchange (Kafka's OAuthBearerSaslServer); ``evaluate`` returns the server's answer,
    an OAuthBearerError (SASL_AUTHENTICATION_FAILED), or an awaitable of one of those."""

    __slots__ = ("validator", "token", "error_message", "complete", "extensions", "refused")

    def __init__(self, validator: Validator) -> None:
        self.validator = validator
        self.token: BearerToken | None = None
        self.error_message: str | None = None
        self.complete = False
        self.extensions: Mapping[str, str] = {}
        self.refused: Invalid | None = None
        """The last validation failure (its reason is for the broker's log)."""

    def evaluate(self, response: bytes) -> bytes | ScramError | Awaitable[bytes | ScramError]:
        if self.complete:
            return OAuthBearerError("unexpected token after the OAUTHBEARER exchange")
        if response == b"\x01" and self.error_message is not None:
            return OAuthBearerError(self.error_message)
        self.error_message = None
        try:
            initial = parse_client_initial_response(response)
        except OAuthBearerError as e:
            return e
        result = self.validator.validate(initial.token)
        if isinstance(result, BearerToken | Invalid):
            return self._process(result, initial)

        async def later() -> bytes | ScramError:
            return self._process(await result, initial)

        return later()

    def _process(self, result: Validation, initial: ClientInitialResponse) -> bytes | ScramError:
        if isinstance(result, Invalid):
            self.refused = result
            self.error_message = result.challenge()
            return self.error_message.encode()
        if initial.authzid and initial.authzid != result.principal_name:
            return OAuthBearerError(
                "Authentication failed: Client requested an authorization id "
                f"({initial.authzid}) that is different from the token's principal name "
                f"({result.principal_name})"
            )
        self.token = result
        self.extensions = dict(initial.extensions)  # both validators accept every extension
        self.complete = True
        return b""


# ---------------------------------------------------------------- start-up


Getter = Callable[[str], tuple[str, str | None]]
"""A setting's value for one listener and the key it came from (for error messages)."""


def _int(get: Getter, name: str, minimum: int, default: int) -> int:
    key, raw = get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except (TypeError, ValueError):
        raise OAuthConfigError(key, f"{key}: not an integer: {raw!r}") from None
    if value < minimum:
        raise OAuthConfigError(key, f"{key}: must be at least {minimum}, not {value}")
    return value


def _file_from_url(key: str, url: str) -> Path:
    parts = urlsplit(url)
    path = Path(unquote(parts.path))
    if parts.netloc not in ("", "localhost") or not path.is_absolute():
        raise OAuthConfigError(key, f"{key}: a file URL must name an absolute local path: {url}")
    if not path.exists():
        raise OAuthConfigError(key, f"{key}: {path}: no such file")
    if path.is_dir():
        raise OAuthConfigError(key, f"{key}: {path} is a directory, not a file")
    return path


def build_validator(
    get: Getter,
    jaas_options: Mapping[str, str],
    allowed_urls: str,
    *,
    ssl_context_for: Callable[[Mapping[str, str]], ssl.SSLContext | None] | None = None,
) -> Validator:
    """The listener's validator from its settings; OAuthConfigError naming the key of a bad
    one (a JWKS file is read, and its keys checked, here)."""
    handler_key, handler = get("sasl.server.callback.handler.class")
    handler = (handler or "").strip()
    if handler in ("", UNSECURED_HANDLER):
        try:
            return UnsecuredValidator(jaas_options)
        except ValueError as e:
            jaas_key, _ = get("sasl.jaas.config")
            raise OAuthConfigError(jaas_key, f"{jaas_key}: {e}") from None
    if handler not in VALIDATOR_HANDLERS:
        raise OAuthConfigError(
            handler_key,
            f"{handler_key}: {handler} is not available; use {VALIDATOR_HANDLERS[0]} (signed "
            "JWTs, KIP-768) or leave it unset (Kafka's unsecured validator)",
        )
    url_key, url = get("sasl.oauthbearer.jwks.endpoint.url")
    url = (url or "").strip()
    if not url:
        raise OAuthConfigError(url_key, f"{url_key}: required by {handler}")
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "file"):
        raise OAuthConfigError(
            url_key,
            f"{url_key}: {url} has the protocol {scheme or 'none'!r}; only http, https and "
            "file are supported",
        )
    if url not in {u.strip() for u in allowed_urls.split(",")}:
        raise OAuthConfigError(
            url_key,
            f"{url_key}: the URL cannot be accessed due to restrictions; add it to "
            f"{ALLOWED_URLS} to allow it",
        )
    keys: KeySource
    if scheme == "file":
        path = _file_from_url(url_key, url)
        try:
            keys = StaticKeys(_import_keys(json.loads(path.read_bytes())))
        except (OSError, ValueError) as e:
            raise OAuthConfigError(url_key, f"{url_key}: {path}: {e}") from None
    else:
        keys = JwksEndpoint(
            url,
            refresh_ms=_int(get, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 1, 3_600_000),
            backoff_ms=_int(get, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 0, 100),
            backoff_max_ms=_int(
                get, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 0, 10_000
            ),
            ssl_context=ssl_context_for(jaas_options) if ssl_context_for else None,
        )
    _, audience = get("sasl.oauthbearer.expected.audience")
    _, issuer = get("sasl.oauthbearer.expected.issuer")
    names = {}
    for name, default in (("scope", "scope"), ("sub", "sub")):
        key, value = get(f"sasl.oauthbearer.{name}.claim.name")
        value = default if value is None else value.strip()
        if not value:
            raise OAuthConfigError(key, f"{key}: must not be blank")
        names[name] = value
    return JwtValidator(
        keys,
        audience=frozenset(a.strip() for a in (audience or "").split(",") if a.strip()),
        issuer=(issuer or "").strip() or None,
        clock_skew_s=_int(get, "sasl.oauthbearer.clock.skew.seconds", 0, 30),
        scope_claim=names["scope"],
        sub_claim=names["sub"],
    )


async def start_validator(validator: Validator, get: Getter) -> None:
    """A JWKS endpoint's first fetch; OAuthConfigError naming the URL's key when it fails."""
    if isinstance(validator, JwtValidator) and isinstance(validator.keys, JwksEndpoint):
        try:
            await validator.keys.start()
        except (OSError, ValueError) as e:
            key, _ = get("sasl.oauthbearer.jwks.endpoint.url")
            raise OAuthConfigError(
                key, f"{key}: could not fetch the JWKS from {validator.keys.url}: {e}"
            ) from None
