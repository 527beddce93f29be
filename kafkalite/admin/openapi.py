"""The OpenAPI 3.1 document of the admin API (served at /openapi.json), generated.

Nothing here is written by hand but the document's frame: the operations come from the routes
declared on AdminApi (routing.route: method, path, summary, parameters, statuses) and every
schema from the pydantic models of models.py (pydantic's JSON Schema, which OpenAPI 3.1 uses
as it is), the very models the server validates requests and answers with. Every operation also
documents `default` as the JSON error object, since any operation can answer 400/404/409/503
(and 500 only on a bug). The security is generated from the middleware's own table
(security.py, ROUTE_ACLS): every route it protects states the schemes the broker asks for and
the 401 (with WWW-Authenticate) and 403 answers; open routes state `security: []`. The document
a broker serves states its own settings (no schemes when its API is open, no 403 without an
authorizer); `openapi_document()` with no arguments states them all. tests/admin fuzz the live
API from this document (schemathesis), open and with credentials.
"""

from __future__ import annotations

import typing
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.json_schema import models_json_schema

from kafkalite import __version__ as _version

REF = "#/components/schemas/{model}"


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_of(arg)]


def _schema_of(annotation: Any) -> dict[str, Any]:
    """A reference to a model, or the schema of list[model], dict[...], ..."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"$ref": REF.format(model=annotation.__name__)}
    if typing.get_origin(annotation) is list:
        return {"type": "array", "items": _schema_of(typing.get_args(annotation)[0])}
    return _adapter(annotation).json_schema(ref_template=REF)


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation, config=ConfigDict(regex_engine="python-re"))


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter is absent rather than null: drop the null branch of an optional."""
    options = schema.get("anyOf")
    if options is None:
        return schema
    rest = [o for o in options if o != {"type": "null"}]
    out = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
    if len(rest) == 1:
        out.update(rest[0])
    else:
        out["anyOf"] = rest
    if schema.get("default") is not None:
        out["default"] = schema["default"]
    return out


def _parameters(spec: Any) -> list[dict[str, Any]]:
    params = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": _adapter(kind).json_schema(ref_template=REF),
        }
        for name, kind in spec.params.items()
    ]
    if spec.query is not None:
        schema = spec.query.model_json_schema(ref_template=REF)
        required = set(schema.get("required", ()))
        for name, prop in schema["properties"].items():
            prop = _without_null(dict(prop))
            prop.pop("title", None)
            param: dict[str, Any] = {
                "name": name,
                "in": "query",
                "required": name in required,
                "schema": prop,
            }
            if "description" in prop:
                param["description"] = prop["description"]
            params.append(param)
    return params


def _security(spec: Any, schemes: tuple[str, ...], authorised: bool) -> dict[str, Any]:
    """The operation's `security` and its 401/403 answers, from the middleware's table."""
    from kafkalite.admin.security import OPEN, route_need

    if route_need(spec.method, spec.path) is OPEN:
        return {"security": []}
    responses: dict[str, Any] = {}
    out: dict[str, Any] = {"responses": responses}
    if schemes:
        out["security"] = [{scheme: []} for scheme in schemes]
        responses["401"] = {"$ref": "#/components/responses/Unauthorized"}
        responses["429"] = {"$ref": "#/components/responses/TooManyFailedAuthentications"}
    if authorised:
        from kafkalite.admin.security import acl_statement

        responses["403"] = {"$ref": "#/components/responses/Forbidden"}
        out["x-required-acl"] = acl_statement(spec.method, spec.path)
    return out


def _error_response(description: str, **headers: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}},
    }
    if headers:
        out["headers"] = headers
    return out


def _security_components(schemes: tuple[str, ...], authorised: bool) -> dict[str, Any]:
    from kafkalite.admin.security import SECURITY_SCHEMES, WWW_AUTHENTICATE

    out: dict[str, Any] = {}
    responses: dict[str, Any] = {}
    if schemes:
        out["securitySchemes"] = {scheme: SECURITY_SCHEMES[scheme] for scheme in schemes}
        responses["Unauthorized"] = _error_response(
            'credentials missing or wrong ({"error": "unauthorized", ...})',
            **{
                "WWW-Authenticate": {
                    "description": f"the challenge: {WWW_AUTHENTICATE}",
                    "required": True,
                    "schema": {"type": "string"},
                }
            },
        )
        responses["TooManyFailedAuthentications"] = _error_response(
            "too many failed authentications from the client's address "
            '({"error": "too_many_requests", ...}); credentials are not checked until then',
            **{
                "Retry-After": {
                    "description": "seconds until the address may try again",
                    "required": True,
                    "schema": {"type": "integer"},
                }
            },
        )
    if authorised:
        responses["Forbidden"] = _error_response(
            'the principal lacks the ACL the route needs ({"error": "forbidden", ...})'
        )
    if responses:
        out["responses"] = responses
    return out


def _operation(spec: Any, schemes: tuple[str, ...], authorised: bool) -> dict[str, Any]:
    success: dict[str, Any] = {"description": "success"}
    if spec.answer is not None:
        success["content"] = {"application/json": {"schema": _schema_of(spec.answer)}}
    else:
        success["content"] = {spec.content_type: {"schema": {"type": "string"}}}
    if spec.headers:
        success["headers"] = {
            name: {"description": text, "schema": {"type": "integer"}}
            for name, text in spec.headers.items()
        }
    op: dict[str, Any] = {
        "summary": spec.summary,
        "tags": [spec.tag],
        "operationId": spec.summary.lower().replace(" ", "_").replace("'", ""),
        "responses": {
            **{str(status): success for status in (spec.status, *spec.also)},
            "default": {
                "description": "error",
                "content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}},
            },
        },
    }
    security = _security(spec, schemes, authorised)
    op["responses"].update(security.pop("responses", {}))
    op.update(security)
    if spec.description:
        op["description"] = spec.description
    if spec.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _schema_of(spec.body)}},
        }
    params = _parameters(spec)
    if params:
        op["parameters"] = params
    return op


ALL_SCHEMES = ("basic", "bearer")


@cache
def openapi_document(
    schemes: tuple[str, ...] = ALL_SCHEMES, authorised: bool = True
) -> dict[str, Any]:
    """The document of an API asking for `schemes` (none: open) and, when `authorised`,
    checking ACLs (security.document_security(server) gives a broker's)."""
    from kafkalite.admin import models
    from kafkalite.admin.app import AdminApi
    from kafkalite.admin.routing import route_specs

    specs = [spec for _, spec in route_specs(AdminApi)]
    used: dict[str, type[BaseModel]] = {"Error": models.Error}
    for spec in specs:
        for model in (*_models_of(spec.answer), spec.body):
            if model is not None:
                used[model.__name__] = model
    _, defs = models_json_schema(
        [(model, "validation") for model in used.values()], ref_template=REF
    )
    paths: dict[str, dict[str, Any]] = {}
    for spec in specs:
        paths.setdefault(spec.path, {})[spec.method.lower()] = _operation(spec, schemes, authorised)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kafkalite admin API",
            "version": _version,
            "description": "Cluster, brokers, topics, records, consumer groups, reassignment, "
            "leader elections and metrics of a kafkalite broker. Errors are "
            '{"error": CODE, "message": ...}. A request body must be application/json '
            "(415 otherwise); a POST, PUT, PATCH or DELETE whose Origin (else Referer) is "
            "another origin is refused 403. Generated from the server's own models.",
        },
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            **_security_components(schemes, authorised),
        },
    }
