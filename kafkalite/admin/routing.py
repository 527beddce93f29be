"""Routes declared once: `@route(...)` on a handler of routes/ names its method, path, query,
body and answer models; the same declaration registers the aiohttp route (app.py), validates the
request and the answer (here), and writes the operation into the OpenAPI document (openapi.py).

A handler declared with `query=` and/or `body=` is called as `handler(request, query, body)`
with validated models; it returns the JSON answer (plain data, checked against `answer`), a
`Reply` (the same with another status or headers), or an aiohttp response for a route that does
not answer JSON.
"""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel, RootModel, TypeAdapter, ValidationError

from kafkalite.admin.errors import AdminError


@dataclass(frozen=True)
class Reply:
    """A JSON answer with a status other than the route's first, or with headers."""

    data: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RouteSpec:
    method: str
    path: str
    summary: str
    tag: str
    answer: Any = None
    """The JSON answer's type (a model, or list[model]); None: not JSON (`content_type`)."""
    status: int = 200
    also: tuple[int, ...] = ()
    """Other success statuses answering the same body."""
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    """Path parameter -> its type (for the document; handlers read `request.match_info`)."""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    """Response header -> its description."""
    description: str | None = None

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.answer)


Handler = Callable[..., Awaitable[Any]]


def route(method: str, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
    """Declare a method of a routes/ class as the handler of `method path` (see RouteSpec)."""

    def declare(fn: Handler) -> Handler:
        spec = RouteSpec(method, path, **kwargs)

        @functools.wraps(fn)
        async def handler(self: Any, request: web.Request) -> web.StreamResponse:
            args: list[Any] = []
            if spec.query is not None:
                args.append(parse(spec.query, dict(request.query), where="query"))
            if spec.body is not None:
                args.append(parse(spec.body, await json_body(request)))
            result = await fn(self, request, *args)
            if isinstance(result, web.StreamResponse):
                return result
            reply = result if isinstance(result, Reply) else Reply(result, spec.status)
            # the answer is checked against its declared model: a handler that drifts from the
            # document fails here (a 500 the tests see), not in a client
            data = spec.adapter.dump_python(spec.adapter.validate_python(reply.data), mode="json")
            return web.json_response(data, status=reply.status, headers=reply.headers)

        handler.route_spec = spec  # type: ignore[attr-defined]
        return handler

    return declare


def route_specs(cls: type) -> list[tuple[str, RouteSpec]]:
    """(attribute name, spec) of every declared route of `cls` and its bases: the bases in
    method resolution order, each one's routes in declaration order."""
    found: dict[str, RouteSpec] = {}
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if name not in found and hasattr(value, "route_spec"):
                found[name] = value.route_spec
    return list(found.items())


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object; 400 when it is not one."""
    raw = await request.read()
    if not raw.strip():
        raise AdminError(400, "INVALID_REQUEST", "a JSON object body is required")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:
        # JSONDecodeError and UnicodeDecodeError are ValueErrors; so is an integer with more
        # digits than Python converts; RecursionError is a too deeply nested document.
        raise AdminError(400, "INVALID_REQUEST", f"malformed JSON: {e}") from None
    if not isinstance(body, dict):
        raise AdminError(400, "INVALID_REQUEST", "the body must be a JSON object")
    return body


M = typing.TypeVar("M", bound=BaseModel)


def parse(model: type[M], data: dict[str, Any], *, where: str = "body") -> M:
    """`data` validated by `model`; the first problem answered 400 naming the field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise invalid(model, e) from None


def invalid(model: type[BaseModel], error: ValidationError) -> AdminError:
    from kafkalite.admin.models import CONFIG_VALUE_FORMS

    first = error.errors(include_url=False)[0]
    loc = list(first["loc"])
    kind = first["type"]
    if issubclass(model, RootModel):  # a tagged union: its tag leads the location
        tag = model.model_fields["root"].discriminator
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = [tag]
        elif loc and isinstance(loc[0], str):
            loc = loc[1:]
    detail = first["msg"]
    if loc and loc[0] == "configs" and len(loc) > 1:
        config = str(loc[1])
        if kind == "extra_forbidden":
            detail = f"Unknown topic config name: {config}"
        elif kind == "string_pattern_mismatch" and config in CONFIG_VALUE_FORMS:
            detail = f"{config}: must be {CONFIG_VALUE_FORMS[config]['description']}"
        else:
            detail = f"{config}: {detail}"
        loc = ["configs"]
    elif kind == "string_pattern_mismatch" and any(p in ("name", "topic", "topics") for p in loc):
        detail = "must be a legal topic name (1 to 249 of [a-zA-Z0-9._-], not '.' or '..')"
    field_name = format_loc(loc) or "body"
    return AdminError.invalid(field_name, detail)


def format_loc(loc: list[Any]) -> str:
    """('offsets', 0, 'offset') -> 'offsets[0].offset'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
