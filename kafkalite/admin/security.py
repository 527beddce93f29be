"""Authentication and authorisation of the HTTP admin API (an aiohttp middleware), and its TLS.

- ``admin.listener=https://host:port`` serves the API over TLS with the broker's ``ssl.*``
  key store (``admin_ssl_context``).
- ``admin.authentication``: ``auto`` (the default) asks for credentials whenever a Kafka
  listener authenticates its clients (SASL, or TLS with ``ssl.client.auth=required``) and
  leaves the API open otherwise; ``basic`` / ``bearer`` / ``basic,bearer`` always ask;
  ``none`` never does. HTTP basic is checked against the SCRAM users of the coordination
  store (the password is salted with the stored salt and iterations and must give the stored
  key) and the PLAIN users of the listeners' JAAS entries; the principal is ``User:<name>``.
  A bearer token is ``admin.bearer.token`` and authenticates as ``admin.bearer.principal``.
  Missing or wrong credentials: 401 with ``WWW-Authenticate``.
- Checking a SCRAM password means deriving its key (PBKDF2, up to 16,384 iterations): that runs
  in one of ``DERIVATION_THREADS`` worker threads of its own (hashlib releases the GIL), never on
  the event loop nor in the loop's default executor, and a password once verified is remembered
  (``VerifiedPasswords``: a keyed hash of it per stored credential, so a changed credential is
  checked afresh) and not derived again. Wrong credentials count against the client's address
  (security/ratelimit.py); an address over the limit gets 429 with ``Retry-After`` before its
  credentials are looked at.
- With an ACL authorizer, each route needs what the equivalent Kafka request needs (reading
  cluster state: DESCRIBE on the cluster; a topic's description: DESCRIBE on it; deleting a
  topic: DELETE on it; changing its config: ALTER_CONFIGS; adding partitions: ALTER; creating a
  topic: CREATE on the cluster or the topic; a group: DESCRIBE / DELETE / READ for resetting
  offsets, plus READ on each topic reset; reassignments and elections: ALTER on the cluster).
  Refused: 403.
- ``/health`` and ``/ready`` are always open (load balancers, orchestrators), and so are the
  console's and the reference page's own files (``/``, ``/docs``, ``/console/*``: markup and
  code, no cluster data), so a browser can show the console's login page. The console keeps
  the credentials typed there in the tab's sessionStorage and sends them in the
  ``Authorization`` header of its JSON requests, never in a URL; its requests carry
  ``X-Kafkalite-Console``, and their 401 challenges ``KafkaliteConsole`` instead of Basic, so
  the browser does not open its own credentials dialog.

ROUTE_ACLS is the one statement of all this per route (matched by canonical path; every route
the app serves has an entry, a test sees to it): the middleware applies it and the OpenAPI
document is generated from it (openapi.py: security schemes, 401 with WWW-Authenticate, 403).
ITEM_ACLS states what a handler checks besides (access.py: lists filtered by DESCRIBE, a reset's
READ on each topic, settings only with DESCRIBE_CONFIGS); `acl_statement` puts both in words,
the document's `x-required-acl` of each operation.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import math
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

from kafkalite.admin.models import Error
from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.acl import ResourceType as T
from kafkalite.security.acl import CLUSTER_NAME
from kafkalite.security.ratelimit import FailedAuthLimiter
from kafkalite.security.scram import MECHANISMS, hmac_, salted_password

PRINCIPAL_KEY: Any = (
    web.RequestKey("principal", str) if hasattr(web, "RequestKey") else "kafkalite.principal"
)
"""The authenticated principal of a request, for handlers that want it."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

Need = tuple[Op, T, str | None]
OPEN = None
"""A route anyone may call, without credentials (ROUTE_ACLS)."""

# (method, canonical path) -> (operation, resource type, match_info key or None = cluster), or
# OPEN. Every route the app serves has its entry (tests/admin/test_security_document.py): the
# middleware checks it and openapi.py documents it (security, 401, 403) from it. HEAD is GET.
ROUTE_ACLS: dict[tuple[str, str], Need | None] = {
    ("GET", "/health"): OPEN,
    ("GET", "/ready"): OPEN,
    # the console's and the reference page's own files: code and markup only, no cluster data;
    # open so that a browser can show the console's login page (the data they load is not)
    ("GET", "/"): OPEN,
    ("GET", "/docs"): OPEN,
    ("GET", "/console/{file}"): OPEN,
    ("GET", "/openapi.json"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/cluster"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/overview"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/brokers"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/brokers/{id}"): (Op.DESCRIBE, T.CLUSTER, None),
    # Kafka's DescribeLogDirs needs DESCRIBE on the cluster
    ("GET", "/brokers/{id}/storage"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/metrics"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/metrics/history"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/partitions"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/topics"): (Op.DESCRIBE, T.CLUSTER, None),
    ("POST", "/topics"): (Op.CREATE, T.CLUSTER, None),
    ("GET", "/topics/{name}"): (Op.DESCRIBE, T.TOPIC, "name"),
    ("DELETE", "/topics/{name}"): (Op.DELETE, T.TOPIC, "name"),
    ("PATCH", "/topics/{name}/config"): (Op.ALTER_CONFIGS, T.TOPIC, "name"),
    ("POST", "/topics/{name}/partitions"): (Op.ALTER, T.TOPIC, "name"),
    ("GET", "/topics/{name}/records"): (Op.READ, T.TOPIC, "name"),
    # as DescribeConfigs of the topic
    ("GET", "/topics/{name}/configs"): (Op.DESCRIBE_CONFIGS, T.TOPIC, "name"),
    ("GET", "/topics/{name}/groups"): (Op.DESCRIBE, T.TOPIC, "name"),
    # as Produce: WRITE on the topic
    ("POST", "/topics/{name}/records"): (Op.WRITE, T.TOPIC, "name"),
    ("GET", "/groups"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/groups/{id}"): (Op.DESCRIBE, T.GROUP, "id"),
    ("DELETE", "/groups/{id}"): (Op.DELETE, T.GROUP, "id"),
    ("POST", "/groups/{id}/offsets"): (Op.READ, T.GROUP, "id"),
    # as DeleteShareGroupOffsets and OffsetDelete: DELETE on the group
    ("DELETE", "/groups/{id}/offsets"): (Op.DELETE, T.GROUP, "id"),
    ("GET", "/transactions"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/transactions/{id}"): (Op.DESCRIBE, T.TRANSACTIONAL_ID, "id"),
    ("POST", "/transactions/{id}/abort"): (Op.ALTER, T.CLUSTER, None),
    ("GET", "/partitions/reassign"): (Op.DESCRIBE, T.CLUSTER, None),
    ("POST", "/partitions/reassign"): (Op.ALTER, T.CLUSTER, None),
    ("POST", "/partitions/elect-leaders"): (Op.ALTER, T.CLUSTER, None),
    # as DescribeAcls / CreateAcls / DeleteAcls
    ("GET", "/acls"): (Op.DESCRIBE, T.CLUSTER, None),
    ("POST", "/acls"): (Op.ALTER, T.CLUSTER, None),
    ("DELETE", "/acls"): (Op.ALTER, T.CLUSTER, None),
    # as DescribeUserScramCredentials / AlterUserScramCredentials
    ("GET", "/users"): (Op.DESCRIBE, T.CLUSTER, None),
    ("POST", "/users"): (Op.ALTER, T.CLUSTER, None),
    ("DELETE", "/users/{name}"): (Op.ALTER, T.CLUSTER, None),
    # as DescribeClientQuotas / AlterClientQuotas
    ("GET", "/quotas"): (Op.DESCRIBE_CONFIGS, T.CLUSTER, None),
    ("POST", "/quotas"): (Op.ALTER_CONFIGS, T.CLUSTER, None),
    ("DELETE", "/quotas"): (Op.ALTER_CONFIGS, T.CLUSTER, None),
    # as DescribeConfigs / IncrementalAlterConfigs of a BROKER resource
    ("GET", "/brokers/{id}/configs"): (Op.DESCRIBE_CONFIGS, T.CLUSTER, None),
    ("PATCH", "/brokers/{id}/configs"): (Op.ALTER_CONFIGS, T.CLUSTER, None),
    ("GET", "/cluster/broker-configs"): (Op.DESCRIBE_CONFIGS, T.CLUSTER, None),
    ("PATCH", "/cluster/broker-configs"): (Op.ALTER_CONFIGS, T.CLUSTER, None),
    # as the Schema Registry's own listener: reading DESCRIBE, changing ALTER on the cluster
    ("GET", "/schemas"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/schemas/subjects/{subject}"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/schemas/subjects/{subject}/versions/{version}"): (Op.DESCRIBE, T.CLUSTER, None),
    ("GET", "/schemas/subjects/{subject}/diff"): (Op.DESCRIBE, T.CLUSTER, None),
    ("PUT", "/schemas/config"): (Op.ALTER, T.CLUSTER, None),
    ("PUT", "/schemas/subjects/{subject}/config"): (Op.ALTER, T.CLUSTER, None),
}
OPEN_PATHS = frozenset(path for (_, path), need in ROUTE_ACLS.items() if need is OPEN)

# What a route checks beyond its ROUTE_ACLS entry, inside its handler (admin/access.py), as the
# equivalent Kafka request does. Lists leave out what may not be seen; a refused item is 403.
ITEM_ACLS: dict[tuple[str, str], str] = {
    ("GET", "/topics"): "lists the topics the principal may DESCRIBE (as Metadata)",
    ("GET", "/partitions"): "lists the partitions of topics the principal may DESCRIBE",
    ("GET", "/overview"): "counts the topics the principal may DESCRIBE",
    ("GET", "/topics/{name}"): "configs only with DESCRIBE_CONFIGS on the topic",
    ("GET", "/brokers/{id}/storage"): "settings only with DESCRIBE_CONFIGS on the cluster; "
    "secrets always null",
    ("GET", "/metrics"): "series labelled by a topic the principal may not DESCRIBE are left out",
    ("GET", "/metrics/history"): "rates of topics the principal may DESCRIBE",
    ("GET", "/groups"): "every group (as ListGroups answers a principal with DESCRIBE on the "
    "cluster)",
    ("GET", "/groups/{id}"): "offsets, lag and assignments of topics the principal may DESCRIBE "
    "(as OffsetFetch)",
    ("GET", "/topics/{name}/groups"): "the groups the principal may DESCRIBE (as ListGroups)",
    ("POST", "/groups/{id}/offsets"): "READ on each topic, dry run or not, checked before the "
    "topic is looked up: 403 TOPIC_AUTHORIZATION_FAILED (as OffsetCommit and "
    "AlterShareGroupOffsets)",
    ("DELETE", "/groups/{id}/offsets"): "READ on each topic, checked before the topic is "
    "looked up: 403 TOPIC_AUTHORIZATION_FAILED (as DeleteShareGroupOffsets and OffsetDelete)",
    ("GET", "/transactions"): "lists the transactional ids the principal may DESCRIBE "
    "(as ListTransactions)",
}


def acl_statement(method: str, canonical: str) -> str:
    """What calling the route needs, in words (the OpenAPI document's x-required-acl)."""
    need = route_need(method, canonical)
    if need is OPEN:
        return "none (no credentials)"
    op, rtype, key = need
    text = f"{op.name} on the cluster" if key is None else f"{op.name} on {rtype.name} {{{key}}}"
    if (method, canonical) == ("POST", "/topics"):
        text += ", or CREATE on TOPIC {name}"
    item = ITEM_ACLS.get(("GET" if method == "HEAD" else method, canonical))
    return f"{text}; {item}" if item else text


def route_need(method: str, canonical: str) -> Need | None:
    """What calling `method canonical` needs (OPEN: nothing). A path no route matches (404,
    405) needs what a route of its kind would: DESCRIBE on the cluster to read, ALTER to write."""
    method = "GET" if method == "HEAD" else method
    if (method, canonical) in ROUTE_ACLS:
        return ROUTE_ACLS[(method, canonical)]
    return (Op.DESCRIBE if method == "GET" else Op.ALTER, T.CLUSTER, None)


WWW_AUTHENTICATE = 'Basic realm="kafkalite", charset="UTF-8"'
SECURITY_SCHEMES: dict[str, dict[str, str]] = {
    "basic": {
        "type": "http",
        "scheme": "basic",
        "description": "a SCRAM user of the coordination store or a PLAIN user of a "
        "listener's JAAS entry; the principal is User:<name>",
    },
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "admin.bearer.token; the principal is admin.bearer.principal",
    },
}
"""admin.authentication's schemes as OpenAPI security schemes (openapi.py)."""


def document_security(server: Any) -> tuple[tuple[str, ...], bool]:
    """(the schemes this server asks for, whether it applies ACLs): what its document states."""
    config = getattr(server, "config", None)
    modes = authentication_modes(config) if hasattr(config, "listener_endpoints") else set()
    return tuple(sorted(modes)), getattr(server, "authorizer", None) is not None


def authentication_modes(config: Any) -> set[str]:
    """The schemes asked for ({} = the API is open), see the module docstring."""
    setting = (getattr(config, "admin_authentication", "auto") or "auto").lower()
    if setting == "none":
        return set()
    if setting == "auto":
        protected = any(
            config.security_protocol(e.listener_name).startswith("SASL_")
            or (
                config.security_protocol(e.listener_name) == "SSL"
                and config.listener_setting(e.listener_name, "ssl.client.auth") == "required"
            )
            for e in config.listener_endpoints
        )
        return {"basic", "bearer"} if protected else set()
    return {m.strip() for m in setting.split(",") if m.strip()}


def _plain_users(config: Any) -> dict[str, str]:
    from kafkalite.security.jaas import parse_jaas_config

    users: dict[str, str] = {}
    for endpoint in config.listener_endpoints:
        jaas = config.jaas_config(endpoint.listener_name, "PLAIN")
        if jaas:
            users.update(parse_jaas_config(jaas).plain_users)
    return users


class VerifiedPasswords:
    """Passwords already verified against a stored SCRAM credential: (user, mechanism, the
    credential's salt, iterations and stored key) -> HMAC(a per-process key, password). The
    password itself is never kept; a credential changed since no longer matches its entry.
    Emptied when it reaches `max_entries`."""

    def __init__(self, max_entries: int = 1024) -> None:
        self._key = os.urandom(32)
        self._max = max_entries
        self._entries: dict[tuple[Any, ...], bytes] = {}

    def _tag(self, password: bytes) -> bytes:
        return hmac.new(self._key, password, "sha256").digest()

    def verified(self, key: tuple[Any, ...], password: bytes) -> bool:
        tag = self._entries.get(key)
        return tag is not None and hmac.compare_digest(tag, self._tag(password))

    def remember(self, key: tuple[Any, ...], password: bytes) -> None:
        if len(self._entries) >= self._max:
            self._entries.clear()
        self._entries[key] = self._tag(password)

    def __len__(self) -> int:
        return len(self._entries)


VERIFIED = VerifiedPasswords()

DERIVATION_THREADS = 2
_derivation_executor: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """Key derivation's own threads: a burst of checks queues here and cannot take the default
    executor's threads from whatever else the broker runs there."""
    global _derivation_executor
    if _derivation_executor is None:
        _derivation_executor = ThreadPoolExecutor(
            DERIVATION_THREADS, thread_name_prefix="kafkalite-key-derivation"
        )
    return _derivation_executor


async def check_password(server: Any, user: str, password: str) -> bool:
    """True if `password` is the user's SCRAM (either mechanism) or PLAIN password. The key
    derivation runs in threads of its own (`_executor`), off the loop."""
    from kafkalite.zk.security import scram_credential

    for mechanism, digest in MECHANISMS.items():
        credential = await scram_credential(server.session, user, mechanism)
        if credential is None:
            continue
        secret = password.encode()
        key = (user, mechanism, credential.salt, credential.iterations, credential.stored_key)
        if VERIFIED.verified(key, secret):
            return True
        salted = await asyncio.get_running_loop().run_in_executor(
            _executor(), salted_password, mechanism, secret, credential.salt, credential.iterations
        )
        stored = hashlib.new(digest, hmac_(digest, salted, b"Client Key")).digest()
        ok = hmac.compare_digest(stored, credential.stored_key)
        if ok:
            VERIFIED.remember(key, secret)
        return ok
    expected = _plain_users(server.config).get(user)
    return expected is not None and hmac.compare_digest(expected.encode(), password.encode())


def _error(status: int, error: str, message: str, **headers: str) -> web.Response:
    body = Error(error=error, message=message).model_dump(mode="json", exclude_none=True)
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/json", headers=headers
    )


CONSOLE_HEADER = "X-Kafkalite-Console"
"""Sent by the console's own requests: their 401 names the schemes without a Basic challenge,
so the browser shows the console's login page, not its own credentials dialog."""
CONSOLE_CHALLENGE = 'KafkaliteConsole realm="kafkalite"'


def _unauthorized(message: str, request: web.Request | None = None) -> web.Response:
    console = request is not None and CONSOLE_HEADER in request.headers
    challenge = CONSOLE_CHALLENGE if console else WWW_AUTHENTICATE
    return _error(401, "unauthorized", message, **{"WWW-Authenticate": challenge})


def _forbidden(message: str) -> web.Response:
    return _error(403, "forbidden", message)


def _too_many(retry_after: float) -> web.Response:
    return _error(
        429,
        "too_many_requests",
        "too many failed authentications from this address",
        **{"Retry-After": str(max(1, math.ceil(retry_after)))},
    )


async def authenticate(server: Any, request: web.Request, modes: set[str]) -> str | None:
    """The principal of the request's credentials, None when they are missing or wrong."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    config = server.config
    if scheme == "bearer" and "bearer" in modes:
        token = getattr(config, "admin_bearer_token", None)
        if token and hmac.compare_digest(value.strip().encode(), token.encode()):
            return getattr(config, "admin_bearer_principal", "User:admin")
        return None
    if scheme == "basic" and "basic" in modes:
        try:
            user, sep, password = (
                base64.b64decode(value.strip(), validate=True).decode().partition(":")
            )
        except (ValueError, UnicodeDecodeError):
            return None
        if sep and user and await check_password(server, user, password):
            return f"User:{user}"
    return None


class _Connection:
    """What the authorizer needs of a caller (a Kafka connection's attributes)."""

    __slots__ = ("authenticated_principal", "client_host")

    def __init__(self, principal: str, host: str) -> None:
        self.authenticated_principal = principal
        self.client_host = host


def caller_of(request: web.Request, principal: str) -> _Connection:
    """The request as the authorizer sees a caller: its principal and address."""
    return _Connection(principal, request.remote or "")


def security_middleware(server: Any) -> Callable[[web.Request, Handler], Awaitable[Any]]:
    config = getattr(server, "config", None)
    modes = authentication_modes(config) if hasattr(config, "listener_endpoints") else set()
    limiter = FailedAuthLimiter.from_config(config)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        route = request.match_info.route.resource
        canonical = route.canonical if route is not None else request.path
        need = route_need(request.method, canonical)
        if need is OPEN:
            return await handler(request)
        principal = "User:ANONYMOUS"
        if modes:
            source = request.remote or ""
            presented = limiter is not None and "Authorization" in request.headers
            if presented:
                wait = limiter.retry_after(source)  # type: ignore[union-attr]
                if wait > 0:
                    return _too_many(wait)
            found = await authenticate(server, request, modes)
            if found is None:
                if presented:
                    limiter.failed(source)  # type: ignore[union-attr]
                return _unauthorized("credentials required: " + " or ".join(sorted(modes)), request)
            principal = found
        authorizer = getattr(server, "authorizer", None)
        if authorizer is not None:
            op, rtype, key = need
            name = request.match_info.get(key, "") if key else CLUSTER_NAME
            caller = caller_of(request, principal)
            allowed = authorizer.allowed(caller, op, rtype, name)
            if not allowed and (request.method, canonical) == ("POST", "/topics"):
                allowed = await _may_create_named_topic(request, authorizer, caller)
            if not allowed:
                return _forbidden(f"{principal} may not {op.name} {rtype.name} {name}")
        request[PRINCIPAL_KEY] = principal
        return await handler(request)

    return middleware


async def _may_create_named_topic(request: web.Request, authorizer: Any, caller: Any) -> bool:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        return False
    name = body.get("name") if isinstance(body, dict) else None
    return isinstance(name, str) and authorizer.allowed(caller, Op.CREATE, T.TOPIC, name)


def admin_ssl_context(config: Any) -> Any:
    """The TLS context of an https admin.listener: the broker-wide ssl.* key store."""
    from kafkalite.security.tls import server_context

    def get(key: str) -> str | None:
        value = config.listener_setting("ADMIN", key)
        return value if value not in ("", None) else None

    return server_context(get)
