"""The request-handler registry and what every handler gets (RequestContext, BrokerServices).

One module per API key registers its handler with `@handles(ApiKey.X)`. A handler is
`handler(ctx: RequestContext, request) -> response` or an `async def` of the same shape; the request
is the decoded message for the version in `ctx.header.api_version`, the response a message of the
matching response class (build it with `ctx.response(**fields)` or `build(cls, ...)`, which fill
what the version has and drop what it has not), or `NO_RESPONSE`.

Invariant (CONTRIBUTING.md, convention 9): per-partition and per-topic failures are returned as error codes in the
response, never raised. An exception escaping a handler is a bug; the dispatcher answers the
request with the API's error response (UNKNOWN_SERVER_ERROR, or a KafkaError's own code) and logs
it, rate limited (dispatcher.py). Handlers never see a null where the version's schema has none,
nor a Fetch/ListOffsets isolation level or size out of range (protocol/request_checks.py).

Advertised versions (ApiVersions) are `SUPPORTED_VERSIONS` restricted to the keys that have a
handler here, so an API (e.g. the group APIs, a later issue) is advertised exactly when its handler
module is registered.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kafkalite.config import BrokerConfig
from kafkalite.network.connection import ConnectionInfo
from kafkalite.protocol.errors import ErrorCode

Handler = Callable[["RequestContext", Any], Any]

HANDLERS: dict[int, Handler] = {}
DECODERS: dict[int, Callable[[Any, bytearray, int], Any]] = {}
"""Hand-written request decoders, for the hot path (Produce: record data stays in the frame)."""


def handles(
    api_key: int, *, decoder: Callable[[Any, bytearray, int], Any] | None = None
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of `api_key` (and its request decoder
    when it has its own; otherwise the protocol layer's kio decoder is used)."""

    def register(fn: Handler) -> Handler:
        HANDLERS[int(api_key)] = fn
        if decoder is not None:
            DECODERS[int(api_key)] = decoder
        return fn

    return register


@dataclass
class BrokerServices:
    """The roles a handler may call; built by kafkalite/server/ (the composition root).

    Anything may be None in unit tests that do not exercise it.
    """

    config: BrokerConfig
    broker_id: int
    replica_manager: Any = None
    metadata_cache: Any = None
    fetch_sessions: Any = None
    producer_id_manager: Any = None
    store: Any = None
    controller: Any = None
    log_manager: Any = None
    group_coordinator: Any = None
    txn_coordinator: Any = None
    cluster_id: str = ""
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    """The advertised ApiVersions table (set by the dispatcher)."""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RequestContext:
    header: Any
    connection: ConnectionInfo
    services: BrokerServices
    response_class: type

    @property
    def api_version(self) -> int:
        return int(self.header.api_version)

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    def response(self, **data: Any) -> Any:
        return build(self.response_class, data)

    def broker_epoch_is_stale(self, request: Any) -> bool:
        """KIP-380 (Kafka's isBrokerEpochStale): a controller request addressed to an earlier
        registration of this broker (before a restart or a session renewal) is refused with
        STALE_BROKER_EPOCH. -1 is an unknown epoch; a newer one than ours is possible (the
        controller saw the registration before this broker read it back) and accepted."""
        epoch = getattr(request, "broker_epoch", -1)
        return epoch != -1 and epoch < self.services.extra.get("broker_epoch", -1)


# ---------------------------------------------------------------------- building kio entities


def millis(value: Any) -> int:
    """A kio duration/timestamp field (timedelta, datetime or int) as integer milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def as_datetime(ms: Any) -> Any:
    if ms is None or isinstance(ms, datetime.datetime):
        return ms
    return _EPOCH + datetime.timedelta(milliseconds=int(ms))


def as_timedelta(ms: Any) -> Any:
    if isinstance(ms, datetime.timedelta):
        return ms
    return datetime.timedelta(milliseconds=int(ms))


_ZERO_BY_KAFKA_TYPE: dict[str, Any] = {
    "string": "",
    "bool": False,
    "bytes": b"",
    "records": None,
    "uuid": uuid.UUID(int=0),
    "error_code": ErrorCode.NONE,
    "float64": 0.0,
}


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kind: str  # "entity" | "entities" | "error_code" | "datetime" | "timedelta" | "plain"
    entity: type | None
    optional: bool
    required: bool
    zero: Any


def _entity_of(tp: Any) -> tuple[str, type | None, bool]:
    optional = False
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        tp = args[0]
        origin = typing.get_origin(tp)
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        if dataclasses.is_dataclass(inner):
            return "entities", inner, optional
        return "plain", None, optional
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return "entity", tp, optional
    return "plain", None, optional


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        kind, entity, optional = _entity_of(f.type)
        kafka_type = f.metadata.get("kafka_type", "")
        if kind == "plain":
            if kafka_type == "error_code":
                kind = "error_code"
            elif kafka_type == "datetime_i64":
                kind = "datetime"
            elif kafka_type.startswith("timedelta"):
                kind = "timedelta"
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if optional:
            zero = None
        elif kind == "entities" or (kind == "plain" and typing.get_origin(f.type) is tuple):
            zero = ()
        elif kind == "entity":
            zero = None  # built from {} below
        elif kind == "datetime":
            zero = _EPOCH
        elif kind == "timedelta":
            zero = datetime.timedelta(0)
        else:
            zero = _ZERO_BY_KAFKA_TYPE.get(kafka_type, 0)
        plans.append(_FieldPlan(f.name, kind, entity, optional, required, zero))
    return tuple(plans)


def build(cls: type, data: dict[str, Any] | Any) -> Any:
    """Construct the kio entity `cls` from a dict, recursively (lists of dicts for arrays).

    Keys the version does not have are ignored; required fields missing from `data` get a zero
    value (0, "", (), None for nullable). Ints are accepted for error codes (ErrorCode), timestamps
    (ms) and durations (ms). Values that already are entities pass through.
    """
    if not isinstance(data, dict):
        return data
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name in data:
            value = data[plan.name]
            kind = plan.kind
            if kind == "entities":
                if value is not None:
                    value = tuple(build(plan.entity, item) for item in value)  # type: ignore[arg-type]
            elif kind == "entity":
                if value is not None:
                    value = build(plan.entity, value)  # type: ignore[arg-type]
            elif kind == "error_code":
                if not isinstance(value, ErrorCode):
                    value = ErrorCode.of(int(value))
            elif kind == "datetime":
                if value is not None and not (plan.optional and value == -1):
                    value = as_datetime(value)
                else:
                    value = None if plan.optional else as_datetime(-1)
            elif kind == "timedelta":
                value = as_timedelta(value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[plan.name] = value
        elif plan.required:
            if plan.kind == "entity" and not plan.optional:
                kwargs[plan.name] = build(plan.entity, {})  # type: ignore[arg-type]
            else:
                kwargs[plan.name] = plan.zero
    return cls(**kwargs)


def has_field(cls: type, name: str) -> bool:
    return any(p.name == name for p in _plan(cls))
