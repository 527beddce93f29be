"""Client quotas at the API edge: DescribeClientQuotas (48) / AlterClientQuotas (49), and the
throttling of Produce and Fetch (KIP-13, KIP-219).

The QuotaManager (security/quotas.py, ``services.extra["quotas"]``) holds every user and
client-id quota of the cluster, loaded at start-up and refreshed from ``/config/changes``.
``throttle(api_key, handler)`` wraps Produce and consumer Fetch: the request's bytes (produced
record bytes, fetched response bytes) are counted against the quota of the connection's user
(its principal's name; ANONYMOUS on a plaintext listener) and client id; past the quota the
response carries ``throttle_time_ms`` and the connection reads nothing more for that long
(ConnectionInfo.throttled_until, network/connection.py). Followers are never throttled.
``request_percentage`` is counted as the handler's time per second (percent of one thread).
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import time
from collections.abc import Callable
from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.quotas import QUOTA_KEYS, QuotaManager
from kafkalite.zk.security import DEFAULT_ENTITY, alter_config_at, quota_path

ENTITY_TYPES = ("user", "client-id")


def _user(ctx: Any) -> str:
    principal = ctx.connection.authenticated_principal
    return principal.partition(":")[2] or principal


def _throttle_until(ctx: Any, ms: int) -> None:
    if ms > 0:
        ctx.connection.throttled_until = max(
            ctx.connection.throttled_until, time.monotonic() + ms / 1000
        )


def throttle(api_key: int, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    if api_key == ApiKey.PRODUCE:

        def produce(ctx: Any, request: Any) -> Any:
            quotas: QuotaManager = ctx.services.extra["quotas"]
            if not quotas.enabled:
                return handler(ctx, request)
            size = sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data)
            ms = quotas.record("producer_byte_rate", _user(ctx), ctx.client_id or "", size)
            _throttle_until(ctx, ms)
            result = handler(ctx, request)
            if ms <= 0:
                return result
            delay = datetime.timedelta(milliseconds=ms)
            if inspect.isawaitable(result):
                return _then(result, lambda r: _with_throttle(r, delay))
            return _with_throttle(result, delay)

        return produce
    if api_key == ApiKey.FETCH:

        def fetch(ctx: Any, request: Any, **options: Any) -> Any:
            # options: the authorizer's may_read (apis/authorization.py), passed on
            quotas: QuotaManager = ctx.services.extra["quotas"]
            if not quotas.enabled or request.replica_id >= 0:
                return handler(ctx, request, **options)
            result = handler(ctx, request, **options)

            def count(buffers: Any) -> Any:
                if not isinstance(buffers, list) or not buffers:
                    return buffers
                size = sum(len(b) for b in buffers)
                ms = quotas.record("consumer_byte_rate", _user(ctx), ctx.client_id or "", size)
                if ms <= 0:
                    return buffers
                _throttle_until(ctx, ms)
                head = bytearray(buffers[0])
                at = 8 + (1 if ctx.api_version >= 12 else 0)  # size, correlation id, tags
                head[at : at + 4] = ms.to_bytes(4, "big")
                return [head, *buffers[1:]]

            if inspect.isawaitable(result):
                return _then(result, count)
            return count(result)

        return fetch

    def timed(ctx: Any, request: Any) -> Any:
        quotas: QuotaManager = ctx.services.extra["quotas"]
        if not quotas.enabled:
            return handler(ctx, request)
        started = time.perf_counter()
        result = handler(ctx, request)
        spent = (time.perf_counter() - started) * 100  # percent of one thread for a second
        _throttle_until(
            ctx, quotas.record("request_percentage", _user(ctx), ctx.client_id or "", spent)
        )
        return result

    return timed


def _with_throttle(response: Any, delay: datetime.timedelta) -> Any:
    if dataclasses.is_dataclass(response) and hasattr(response, "throttle_time"):
        return dataclasses.replace(response, throttle_time=delay)
    return response


async def _then(result: Any, fn: Callable[[Any], Any]) -> Any:
    return fn(await result)


# ---------------------------------------------------------------------- 48 / 49


def _entity(items: Any) -> tuple[tuple[str, str], ...] | str:
    """(("user", u), ("client-id", c)) from the request's entity data, or an error text."""
    found: dict[str, str] = {}
    for item in items:
        if item.entity_type not in ENTITY_TYPES:
            return f"unsupported quota entity type {item.entity_type!r} (user, client-id)"
        if item.entity_type in found:
            return f"duplicate entity type {item.entity_type}"
        found[item.entity_type] = (
            item.entity_name if item.entity_name is not None else DEFAULT_ENTITY
        )
    if not found:
        return "the entity is empty"
    return tuple((t, found[t]) for t in ENTITY_TYPES if t in found)


@handles(ApiKey.ALTER_CLIENT_QUOTAS)
async def handle_alter_client_quotas(ctx: RequestContext, request: Any) -> Any:
    quotas: QuotaManager | None = ctx.services.extra.get("quotas")
    entries = []
    for entry in request.entries:
        entity = _entity(entry.entity)
        echo = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        error: tuple[ErrorCode, str] | None = None
        if isinstance(entity, str):
            error = (ErrorCode.INVALID_REQUEST, entity)
        else:
            for op in entry.ops:
                if op.key not in QUOTA_KEYS:
                    error = (ErrorCode.INVALID_REQUEST, f"unknown quota key {op.key!r}")
                elif not op.remove and op.value <= 0 and op.key != "request_percentage":
                    error = (ErrorCode.INVALID_REQUEST, f"{op.key} must be positive")
                if error:
                    break
        if error is None and not request.validate_only:
            assert not isinstance(entity, str)
            updates = {op.key: _format(op.key, op.value) for op in entry.ops if not op.remove}
            removals = [op.key for op in entry.ops if op.remove]
            config = await alter_config_at(
                ctx.services.store, quota_path(entity), updates, removals
            )
            if quotas is not None:
                quotas.set_entity(entity, config)
        code, message = error if error is not None else (ErrorCode.NONE, None)
        entries.append({"error_code": code, "error_message": message, "entity": echo})
    return ctx.response(entries=entries)


def _format(key: str, value: float) -> str:
    return str(int(value)) if key != "request_percentage" and value == int(value) else str(value)


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
def handle_describe_client_quotas(ctx: RequestContext, request: Any) -> Any:
    quotas: QuotaManager | None = ctx.services.extra.get("quotas")
    filters = {}
    for c in request.components:
        if c.entity_type not in ENTITY_TYPES:
            return ctx.response(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"unsupported entity type {c.entity_type!r}",
                entries=None,
            )
        filters[c.entity_type] = c
    entries = []
    for entity, values in sorted((quotas.configs if quotas else {}).items()):
        kinds = dict(entity)
        if request.strict and set(kinds) != set(filters):
            continue
        ok = True
        for kind, c in filters.items():
            name = kinds.get(kind)
            if name is None:
                ok = False
            elif c.match_type == 0 and name != c.match:
                ok = False
            elif c.match_type == 1 and name != DEFAULT_ENTITY:
                ok = False
        if not ok:
            continue
        entries.append(
            {
                "entity": [
                    {"entity_type": t, "entity_name": None if n == DEFAULT_ENTITY else n}
                    for t, n in entity
                ],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
            }
        )
    return ctx.response(error_code=ErrorCode.NONE, error_message=None, entries=entries)
