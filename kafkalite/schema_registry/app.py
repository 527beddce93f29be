"""Confluent Schema Registry's REST API v1 (aiohttp), served by every broker on
`schema.registry.listeners`.

Every route is declared once (`@route` below): the declaration registers it, validates its
query and body with the pydantic models of models.py, checks its answer against its model, and
is what `openapi_document()` turns into the OpenAPI 3.1 document at /openapi.json.

Answers are `application/vnd.schemaregistry.v1+json`; errors are Confluent's
`{"error_code": N, "message": ...}` with its codes (errors.py). Requests may send that media
type, `application/vnd.schemaregistry+json`, `application/json` or
`application/octet-stream` (as Confluent's accepts); another is 415.

Security is the admin API's (kafkalite/admin/security.py, reused, not copied): TLS with the
broker's ssl.* key store on an https listener, `admin.authentication`'s schemes (HTTP basic
against SCRAM/PLAIN users, or the bearer token), the failed-authentication limit, and with an
ACL authorizer DESCRIBE on the cluster to read and ALTER on the cluster to write.

Invariant: no request can take the broker down or answer 500 for bad input: a handler's
RegistryError is its Confluent error, bad JSON or a bad field is 400/422, anything else a
logged 500.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.json_schema import models_json_schema

from kafkalite.admin.openapi import REF, _models_of, _schema_of
from kafkalite.schema_registry import errors, models
from kafkalite.schema_registry.errors import RegistryError
from kafkalite.schema_registry.formats import PROTOBUF, SCHEMA_TYPES
from kafkalite.schema_registry.registry import Registry, parse_version, stored_of

log = structlog.get_logger("kafkalite.schema_registry")

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_BODY_TYPES = frozenset(
    (
        MEDIA_TYPE,
        "application/vnd.schemaregistry+json",
        "application/json",
        "application/octet-stream",
    )
)
Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class RouteSpec:
    method: str
    path: str
    summary: str
    answer: Any
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    """The HTTP statuses of the Confluent errors it may answer (besides 400 and 500)."""
    params: dict[str, Any] = field(default_factory=dict)
    raw: bool = False
    """Answers the schema text itself (…/schema), not JSON of a model: the handler returns
    (schema type, text); a .proto is answered as text/plain."""

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.answer)


def route(method: str, path: str, summary: str, answer: Any, **kwargs: Any) -> Any:
    def declare(fn: Handler) -> Handler:
        spec = RouteSpec(method, path, summary, answer, **kwargs)

        @functools.wraps(fn)
        async def handler(self: Any, request: web.Request) -> web.StreamResponse:
            args: list[Any] = []
            if spec.query is not None:
                args.append(_validated(spec.query, dict(request.query), 400))
            if spec.body is not None:
                args.append(_validated(spec.body, await _body(request), 422))
            result = await fn(self, request, *args)
            if spec.raw:  # (schema type, text): JSON as the registry's JSON, .proto as text
                schema_type, text = result
                kind = "text/plain" if schema_type == PROTOBUF else MEDIA_TYPE
                return web.Response(text=text, content_type=kind)
            data = spec.adapter.dump_python(
                spec.adapter.validate_python(result), mode="json", exclude_none=True
            )
            return _json(data)

        handler.route_spec = spec  # type: ignore[attr-defined]
        return handler

    return declare


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data), status=status, content_type=MEDIA_TYPE)


async def _body(request: web.Request) -> Any:
    if request.content_type not in ACCEPTED_BODY_TYPES:
        raise RegistryError(
            errors.UNSUPPORTED_MEDIA_TYPE, f"unsupported media type {request.content_type}"
        )
    raw = await request.read()
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise RegistryError(errors.BAD_REQUEST, f"malformed JSON: {e}") from None
    if not isinstance(body, dict):
        raise RegistryError(errors.BAD_REQUEST, "the body must be a JSON object")
    return body


def _validated(model: type[BaseModel], data: Any, code: int) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise RegistryError(code if code < 1000 else code, f"{where}: {first['msg']}") from None


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except RegistryError as e:
        return _json(e.body(), e.status)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        response = _json({"error_code": e.status, "message": e.reason or "error"}, e.status)
        if isinstance(e, web.HTTPMethodNotAllowed):
            response.headers["Allow"] = ", ".join(sorted(e.allowed_methods))
        return response
    except asyncio.CancelledError:
        raise
    except Exception as e:  # the boundary: a bug here must not take the broker down
        log.exception("schema registry request failed", method=request.method, path=request.path)
        return _json(
            {"error_code": errors.INTERNAL_ERROR, "message": f"{type(e).__name__}: {e}"}, 500
        )


SUBJECT = {"subject": str}
VERSION = {"subject": str, "version": str}
ID = {"id": int}


class RegistryApi:
    """Every route of the API, over a Registry."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    # -- schemas ---------------------------------------------------------------------------

    @route("GET", "/schemas/types", "List schema types", list[str])
    async def schema_types(self, request: web.Request) -> Any:
        return list(SCHEMA_TYPES)

    @route(
        "GET",
        "/schemas/ids/{id}",
        "Get a schema by id",
        models.SchemaById,
        query=models.FormatQuery,
        errors=(404,),
        params=ID,
    )
    async def schema_by_id(self, request: web.Request, query: models.FormatQuery) -> Any:
        registry = self.registry
        view = await registry.view()
        schema_id = _id(request)
        stored = registry.schema(view, schema_id)
        return models.SchemaById(
            schema=await self._text(view, schema_id, query.format),
            schemaType=None if stored.schema_type == "AVRO" else stored.schema_type,
            references=_refs(stored) or None,
        )

    @route(
        "GET",
        "/schemas/ids/{id}/schema",
        "Get the text of a schema by id",
        str,
        raw=True,
        errors=(404,),
        params=ID,
    )
    async def schema_text_by_id(self, request: web.Request) -> Any:
        view = await self.registry.view()
        stored = self.registry.schema(view, _id(request))
        return stored.schema_type, stored.text

    @route(
        "GET",
        "/schemas/ids/{id}/subjects",
        "List the subjects of a schema id",
        list[str],
        query=models.DeletedQuery,
        errors=(404,),
        params=ID,
    )
    async def schema_subjects(self, request: web.Request, query: models.DeletedQuery) -> Any:
        view = await self.registry.view()
        schema_id = _id(request)
        self.registry.schema(view, schema_id)
        return sorted({s for s, _ in view.usages(schema_id, deleted=query.deleted)})

    @route(
        "GET",
        "/schemas/ids/{id}/versions",
        "List the subject versions of a schema id",
        list[models.SubjectVersion],
        query=models.DeletedQuery,
        errors=(404,),
        params=ID,
    )
    async def schema_versions(self, request: web.Request, query: models.DeletedQuery) -> Any:
        view = await self.registry.view()
        schema_id = _id(request)
        self.registry.schema(view, schema_id)
        return [
            models.SubjectVersion(subject=s, version=v)
            for s, v in view.usages(schema_id, deleted=query.deleted)
        ]

    # -- subjects --------------------------------------------------------------------------

    @route("GET", "/subjects", "List subjects", list[str], query=models.SubjectsQuery)
    async def subjects(self, request: web.Request, query: models.SubjectsQuery) -> Any:
        view = await self.registry.view()
        prefix = query.subjectPrefix or ""
        return [s for s in view.subject_names(deleted=query.deleted) if s.startswith(prefix)]

    @route(
        "GET",
        "/subjects/{subject}/versions",
        "List the versions of a subject",
        list[int],
        query=models.DeletedQuery,
        errors=(404,),
        params=SUBJECT,
    )
    async def versions(self, request: web.Request, query: models.DeletedQuery) -> Any:
        view = await self.registry.view()
        subject = request.match_info["subject"]
        return [v.version for v in self.registry.subject_versions(view, subject, query.deleted)]

    @route(
        "GET",
        "/subjects/{subject}/versions/{version}",
        "Get a version of a subject",
        models.SubjectSchema,
        query=models.VersionQuery,
        errors=(404, 422),
        params=VERSION,
    )
    async def version(self, request: web.Request, query: models.VersionQuery) -> Any:
        registry = self.registry
        view = await registry.view()
        subject = request.match_info["subject"]
        entry = registry.version(view, subject, request.match_info["version"], query.deleted)
        stored = view.schemas[entry.id]
        return models.SubjectSchema(
            subject=subject,
            version=entry.version,
            id=entry.id,
            schema=await self._text(view, entry.id, query.format),
            schemaType=None if stored.schema_type == "AVRO" else stored.schema_type,
            references=_refs(stored) or None,
        )

    @route(
        "GET",
        "/subjects/{subject}/versions/{version}/schema",
        "Get the text of a version of a subject",
        str,
        raw=True,
        query=models.DeletedQuery,
        errors=(404, 422),
        params=VERSION,
    )
    async def version_text(self, request: web.Request, query: models.DeletedQuery) -> Any:
        view = await self.registry.view()
        entry = self.registry.version(
            view, request.match_info["subject"], request.match_info["version"], query.deleted
        )
        stored = view.schemas[entry.id]
        return stored.schema_type, stored.text

    @route(
        "GET",
        "/subjects/{subject}/versions/{version}/referencedby",
        "List the ids of the schemas referencing a version",
        list[int],
        errors=(404, 422),
        params=VERSION,
    )
    async def referenced_by(self, request: web.Request) -> Any:
        view = await self.registry.view()
        subject = request.match_info["subject"]
        entry = self.registry.version(view, subject, request.match_info["version"], False)
        return view.referenced_by(subject, entry.version)

    @route(
        "POST",
        "/subjects/{subject}",
        "Look up a schema under a subject",
        models.SubjectSchema,
        query=models.LookupQuery,
        body=models.SchemaRequest,
        errors=(404, 415, 422),
        params=SUBJECT,
    )
    async def lookup(
        self, request: web.Request, query: models.LookupQuery, body: models.SchemaRequest
    ) -> Any:
        subject = request.match_info["subject"]
        found = await self.registry.lookup(
            subject, stored_of(body.schema_, body.schemaType, body.references), query.deleted
        )
        return models.SubjectSchema(
            subject=subject,
            version=found.version,
            id=found.id,
            schema=found.stored.text,
            schemaType=None if found.stored.schema_type == "AVRO" else found.stored.schema_type,
            references=_refs(found.stored) or None,
        )

    @route(
        "POST",
        "/subjects/{subject}/versions",
        "Register a schema under a subject",
        models.RegisteredId,
        query=models.NormalizeQuery,
        body=models.SchemaRequest,
        errors=(409, 415, 422),
        params=SUBJECT,
    )
    async def register(
        self, request: web.Request, query: models.NormalizeQuery, body: models.SchemaRequest
    ) -> Any:
        schema_id = await self.registry.register(
            request.match_info["subject"],
            stored_of(body.schema_, body.schemaType, body.references),
            schema_id=body.id if body.id is not None and body.id >= 0 else None,
            version=body.version if body.version is not None and body.version > 0 else None,
        )
        return models.RegisteredId(id=schema_id)

    @route(
        "DELETE",
        "/subjects/{subject}",
        "Delete a subject",
        list[int],
        query=models.PermanentQuery,
        errors=(404, 422),
        params=SUBJECT,
    )
    async def delete_subject(self, request: web.Request, query: models.PermanentQuery) -> Any:
        return await self.registry.delete_subject(request.match_info["subject"], query.permanent)

    @route(
        "DELETE",
        "/subjects/{subject}/versions/{version}",
        "Delete a version of a subject",
        int,
        query=models.PermanentQuery,
        errors=(404, 422),
        params=VERSION,
    )
    async def delete_version(self, request: web.Request, query: models.PermanentQuery) -> Any:
        return await self.registry.delete_version(
            request.match_info["subject"], request.match_info["version"], query.permanent
        )

    # -- compatibility ---------------------------------------------------------------------

    @route(
        "POST",
        "/compatibility/subjects/{subject}/versions/{version}",
        "Test a schema against a version of a subject",
        models.Compatibility,
        query=models.VerboseQuery,
        body=models.SchemaRequest,
        errors=(404, 415, 422),
        params=VERSION,
    )
    async def compatibility_version(
        self, request: web.Request, query: models.VerboseQuery, body: models.SchemaRequest
    ) -> Any:
        parse_version(request.match_info["version"])
        problems = await self.registry.check(
            request.match_info["subject"],
            request.match_info["version"],
            stored_of(body.schema_, body.schemaType, body.references),
        )
        return models.Compatibility(
            is_compatible=not problems, messages=problems if query.verbose else None
        )

    @route(
        "POST",
        "/compatibility/subjects/{subject}/versions",
        "Test a schema against the versions of a subject its level checks",
        models.Compatibility,
        query=models.VerboseQuery,
        body=models.SchemaRequest,
        errors=(404, 415, 422),
        params=SUBJECT,
    )
    async def compatibility_all(
        self, request: web.Request, query: models.VerboseQuery, body: models.SchemaRequest
    ) -> Any:
        problems = await self.registry.check(
            request.match_info["subject"],
            None,
            stored_of(body.schema_, body.schemaType, body.references),
        )
        return models.Compatibility(
            is_compatible=not problems, messages=problems if query.verbose else None
        )

    # -- config and mode -------------------------------------------------------------------

    @route("GET", "/config", "Get the global compatibility level", models.ConfigAnswer)
    async def get_config(self, request: web.Request) -> Any:
        view = await self.registry.view()
        return models.ConfigAnswer(compatibilityLevel=self.registry.level(view, None))

    @route(
        "PUT",
        "/config",
        "Set the global compatibility level",
        models.ConfigRequest,
        body=models.ConfigRequest,
        errors=(415, 422),
    )
    async def put_config(self, request: web.Request, body: models.ConfigRequest) -> Any:
        await self.registry.set_config(None, body.compatibility)
        return body

    @route(
        "DELETE",
        "/config",
        "Reset the global compatibility level",
        models.ConfigAnswer,
    )
    async def delete_global_config(self, request: web.Request) -> Any:
        return models.ConfigAnswer(compatibilityLevel=await self.registry.delete_config(None))

    @route(
        "GET",
        "/config/{subject}",
        "Get a subject's compatibility level",
        models.ConfigAnswer,
        query=models.DefaultToGlobalQuery,
        errors=(404,),
        params=SUBJECT,
    )
    async def get_subject_config(
        self, request: web.Request, query: models.DefaultToGlobalQuery
    ) -> Any:
        view = await self.registry.view()
        subject = request.match_info["subject"]
        if subject not in view.configs and not query.defaultToGlobal:
            raise RegistryError(
                errors.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        return models.ConfigAnswer(compatibilityLevel=self.registry.level(view, subject))

    @route(
        "PUT",
        "/config/{subject}",
        "Set a subject's compatibility level",
        models.ConfigRequest,
        body=models.ConfigRequest,
        errors=(415, 422),
        params=SUBJECT,
    )
    async def put_subject_config(self, request: web.Request, body: models.ConfigRequest) -> Any:
        await self.registry.set_config(request.match_info["subject"], body.compatibility)
        return body

    @route(
        "DELETE",
        "/config/{subject}",
        "Remove a subject's compatibility level",
        models.ConfigAnswer,
        errors=(404,),
        params=SUBJECT,
    )
    async def delete_subject_config(self, request: web.Request) -> Any:
        level = await self.registry.delete_config(request.match_info["subject"])
        return models.ConfigAnswer(compatibilityLevel=level)

    @route("GET", "/mode", "Get the global mode", models.ModeBody)
    async def get_mode(self, request: web.Request) -> Any:
        view = await self.registry.view()
        return models.ModeBody(mode=self.registry.mode(view, None))

    @route(
        "PUT",
        "/mode",
        "Set the global mode",
        models.ModeBody,
        query=models.ForceQuery,
        body=models.ModeBody,
        errors=(415, 422),
    )
    async def put_mode(
        self, request: web.Request, query: models.ForceQuery, body: models.ModeBody
    ) -> Any:
        await self.registry.set_mode(None, body.mode, force=query.force)
        return body

    @route(
        "GET",
        "/mode/{subject}",
        "Get a subject's mode",
        models.ModeBody,
        query=models.DefaultToGlobalQuery,
        errors=(404,),
        params=SUBJECT,
    )
    async def get_subject_mode(
        self, request: web.Request, query: models.DefaultToGlobalQuery
    ) -> Any:
        view = await self.registry.view()
        subject = request.match_info["subject"]
        if subject not in view.modes and not query.defaultToGlobal:
            raise RegistryError(
                errors.SUBJECT_LEVEL_MODE_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level mode configured",
            )
        return models.ModeBody(mode=self.registry.mode(view, subject))

    @route(
        "PUT",
        "/mode/{subject}",
        "Set a subject's mode",
        models.ModeBody,
        query=models.ForceQuery,
        body=models.ModeBody,
        errors=(415, 422),
        params=SUBJECT,
    )
    async def put_subject_mode(
        self, request: web.Request, query: models.ForceQuery, body: models.ModeBody
    ) -> Any:
        await self.registry.set_mode(request.match_info["subject"], body.mode, force=query.force)
        return body

    @route(
        "DELETE",
        "/mode/{subject}",
        "Remove a subject's mode",
        models.ModeBody,
        errors=(404,),
        params=SUBJECT,
    )
    async def delete_subject_mode(self, request: web.Request) -> Any:
        return models.ModeBody(mode=await self.registry.delete_mode(request.match_info["subject"]))

    @route("GET", "/", "Root", models.Empty)
    async def root(self, request: web.Request) -> Any:
        return models.Empty()

    # -- helpers ---------------------------------------------------------------------------

    async def _text(self, view: Any, schema_id: int, fmt: str | None) -> str:
        stored = view.schemas[schema_id]
        if fmt == "serialized" and stored.schema_type == PROTOBUF:
            return (await self.registry.parsed(view, schema_id)).serialized()
        return stored.text


def _id(request: web.Request) -> int:
    text = request.match_info["id"]
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0 or value > 2**31 - 1:
        raise RegistryError(errors.SCHEMA_NOT_FOUND, f"Schema {text} not found")
    return value


def _refs(stored: Any) -> list[models.ReferenceModel]:
    return [
        models.ReferenceModel(name=r.name, subject=r.subject, version=r.version)
        for r in stored.references
    ]


def route_specs() -> list[tuple[str, RouteSpec]]:
    return [
        (name, value.route_spec)
        for name, value in vars(RegistryApi).items()
        if hasattr(value, "route_spec")
    ]


# ----------------------------------------------------------------------------- OpenAPI


def _query_parameters(spec: RouteSpec) -> list[dict[str, Any]]:
    out = []
    for name, kind in spec.params.items():
        schema: dict[str, Any] = {"type": "integer" if kind is int else "string"}
        if kind is int:
            schema.update(minimum=0, maximum=2**31 - 1)
        if name == "version":  # registry.parse_version: "latest", -1, or 1 .. 2**31-1
            schema = {
                "anyOf": [
                    {"type": "string", "enum": ["latest"]},
                    {"type": "integer", "enum": [-1]},
                    {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                ]
            }
        out.append({"name": name, "in": "path", "required": True, "schema": schema})
    if spec.query is not None:
        schema = spec.query.model_json_schema(ref_template=REF)
        for name, prop in schema.get("properties", {}).items():
            prop = dict(prop)
            prop.pop("title", None)
            options = prop.pop("anyOf", None)
            if options:
                rest = [o for o in options if o != {"type": "null"}]
                prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
            if prop.get("default") is None:
                prop.pop("default", None)
            out.append({"name": name, "in": "query", "required": False, "schema": prop})
    return out


ERROR_DESCRIPTIONS = {
    400: "malformed request (bad JSON or query)",
    401: "credentials missing or wrong",
    403: "the principal lacks the ACL",
    404: "subject, version or schema not found (40401, 40402, 40403, 40408, 40409)",
    409: "incompatible schema",
    415: "unsupported media type",
    422: "invalid schema, version, level or mode (42201-42206)",
    500: "store error (50001-50003)",
}


@functools.cache
def openapi_document(schemes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The API's OpenAPI 3.1 document, generated from the route declarations and models."""
    from kafkalite import __version__

    specs = [spec for _, spec in route_specs()]
    used: dict[str, type[BaseModel]] = {"Error": models.Error}
    for spec in specs:
        for model in (*_models_of(spec.answer), spec.body):
            if model is not None:
                used[model.__name__] = model
    _, defs = models_json_schema([(m, "validation") for m in used.values()], ref_template=REF)
    paths: dict[str, Any] = {}
    error = {
        "content": {MEDIA_TYPE: {"schema": {"$ref": REF.format(model="Error")}}},
    }
    for spec in specs:
        if spec.raw:  # an Avro or JSON schema is JSON; a .proto is text
            content = {MEDIA_TYPE: {"schema": {}}, "text/plain": {"schema": {"type": "string"}}}
        else:
            content = {MEDIA_TYPE: {"schema": _schema_of(spec.answer)}}
        responses: dict[str, Any] = {"200": {"description": "success", "content": content}}
        statuses = {400, 500, *spec.errors}
        if schemes:
            statuses |= {401, 403}
        for status in sorted(statuses):
            responses[str(status)] = {"description": ERROR_DESCRIPTIONS[status], **error}
        op: dict[str, Any] = {
            "summary": spec.summary,
            "operationId": spec.summary.lower().replace(" ", "_").replace("'", ""),
            "responses": responses,
        }
        params = _query_parameters(spec)
        if params:
            op["parameters"] = params
        if spec.body is not None:
            op["requestBody"] = {
                "required": True,
                "content": {
                    media: {"schema": _schema_of(spec.body)}
                    for media in (MEDIA_TYPE, "application/json")
                },
            }
        if schemes:
            op["security"] = [{scheme: []} for scheme in schemes]
        paths.setdefault(spec.path, {})[spec.method.lower()] = op
    components: dict[str, Any] = {"schemas": defs.get("$defs", {})}
    if schemes:
        from kafkalite.admin.security import SECURITY_SCHEMES

        components["securitySchemes"] = {s: SECURITY_SCHEMES[s] for s in schemes}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kafkalite Schema Registry",
            "version": __version__,
            "description": "Confluent Schema Registry's REST API v1, served by a kafkalite "
            'broker. Errors are {"error_code": N, "message": ...}. Generated from the '
            "server's own models.",
        },
        "paths": paths,
        "components": components,
    }
