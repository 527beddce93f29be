"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-3: literal and prefixed patterns.

ACLs are written to the coordination store as Kafka's AclAuthorizer writes them
(security/acl.py, zk/security.py), and this broker's cache is updated at once; the others
follow the change notification. Without an authorizer (``authorizer.class.name`` empty) Kafka
answers SECURITY_DISABLED, and so does this. The caller needs ALTER (create, delete) or
DESCRIBE on the cluster (checked by apis/authorization.py).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import (
    AclBinding,
    AclEntry,
    AclError,
    PatternType,
    PermissionType,
    ResourcePattern,
    filter_matches,
    validate_binding,
)
from kafkalite.zk.security import update_acls

DISABLED = "No Authorizer is configured on the broker"


def _filter(f: Any) -> dict[str, Any]:
    return {
        "resource_type": int(f.resource_type_filter),
        "name": f.resource_name_filter,
        "pattern_type": int(getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        "principal": f.principal_filter,
        "host": f.host_filter,
        "operation": int(f.operation),
        "permission": int(f.permission_type),
    }


def _invalid_filter(fields: dict[str, Any]) -> str | None:
    if fields["resource_type"] in (0,) or fields["operation"] == 0 or fields["permission"] == 0:
        return "the filter has an UNKNOWN element"
    if fields["pattern_type"] == 0:
        return "the filter has an UNKNOWN pattern type"
    return None


@handles(ApiKey.DESCRIBE_ACLS)
def handle_describe_acls(ctx: RequestContext, request: Any) -> Any:
    auth = ctx.services.extra.get("authorizer")
    if auth is None:
        return ctx.response(
            error_code=ErrorCode.SECURITY_DISABLED, error_message=DISABLED, resources=[]
        )
    fields = _filter(request)
    problem = _invalid_filter(fields)
    if problem is not None:
        return ctx.response(
            error_code=ErrorCode.INVALID_REQUEST, error_message=problem, resources=[]
        )
    found: dict[ResourcePattern, list[AclEntry]] = defaultdict(list)
    for pattern, entries in auth.cache.items():
        for entry in entries:
            if filter_matches(pattern, entry, **fields):
                found[pattern].append(entry)
    resources = [
        {
            "resource_type": int(p.resource_type),
            "resource_name": p.name,
            "pattern_type": int(p.pattern_type),
            "acls": [
                {
                    "principal": e.principal,
                    "host": e.host,
                    "operation": int(e.operation),
                    "permission_type": int(e.permission),
                }
                for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation))
            ],
        }
        for p, entries in sorted(found.items(), key=lambda kv: (kv[0].resource_type, kv[0].name))
    ]
    return ctx.response(error_code=ErrorCode.NONE, error_message=None, resources=resources)


def _binding(c: Any) -> AclBinding:
    try:
        pattern = ResourcePattern(
            ResourceType(int(c.resource_type)),
            c.resource_name,
            PatternType(int(getattr(c, "resource_pattern_type", PatternType.LITERAL))),
        )
        entry = AclEntry(
            c.principal,
            c.host,
            AclOperation(int(c.operation)),
            PermissionType(int(c.permission_type)),
        )
    except ValueError as e:
        raise AclError(str(e)) from None
    binding = AclBinding(pattern, entry)
    validate_binding(binding)
    return binding


@handles(ApiKey.CREATE_ACLS)
async def handle_create_acls(ctx: RequestContext, request: Any) -> Any:
    auth = ctx.services.extra.get("authorizer")
    if auth is None:
        return ctx.response(
            results=[
                {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": DISABLED}
                for _ in request.creations
            ]
        )
    results = []
    for creation in request.creations:
        try:
            binding = _binding(creation)
        except AclError as e:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
            continue
        entries = await update_acls(
            ctx.services.store, binding.pattern, lambda acls, b=binding: acls | {b.entry}
        )
        auth.cache.set(binding.pattern, entries)
        results.append({"error_code": ErrorCode.NONE, "error_message": None})
    return ctx.response(results=results)


@handles(ApiKey.DELETE_ACLS)
async def handle_delete_acls(ctx: RequestContext, request: Any) -> Any:
    auth = ctx.services.extra.get("authorizer")
    if auth is None:
        return ctx.response(
            filter_results=[
                {
                    "error_code": ErrorCode.SECURITY_DISABLED,
                    "error_message": DISABLED,
                    "matching_acls": [],
                }
                for _ in request.filters
            ]
        )
    results = []
    for f in request.filters:
        fields = _filter(f)
        problem = _invalid_filter(fields)
        if problem is not None:
            results.append(
                {
                    "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": problem,
                    "matching_acls": [],
                }
            )
            continue
        matched: dict[ResourcePattern, set[AclEntry]] = defaultdict(set)
        for pattern, entries in auth.cache.items():
            for entry in entries:
                if filter_matches(pattern, entry, **fields):
                    matched[pattern].add(entry)
        matching = []
        for pattern, doomed in matched.items():
            remaining = await update_acls(
                ctx.services.store, pattern, lambda acls, d=doomed: acls - d
            )
            auth.cache.set(pattern, remaining)
            for e in sorted(doomed, key=lambda e: (e.principal, e.host, e.operation)):
                matching.append(
                    {
                        "error_code": ErrorCode.NONE,
                        "error_message": None,
                        "resource_type": int(pattern.resource_type),
                        "resource_name": pattern.name,
                        "pattern_type": int(pattern.pattern_type),
                        "principal": e.principal,
                        "host": e.host,
                        "operation": int(e.operation),
                        "permission_type": int(e.permission),
                    }
                )
        results.append(
            {"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": matching}
        )
    return ctx.response(filter_results=results)
