"""ACLs, SCRAM users and client quotas: /acls, /users and /quotas.

Each is Kafka's own request (DescribeAcls / CreateAcls / DeleteAcls,
DescribeUserScramCredentials / AlterUserScramCredentials, DescribeClientQuotas /
AlterClientQuotas) sent by the admin API's client, and each route needs what that request
needs of its caller (security.py ROUTE_ACLS): DESCRIBE on the cluster to list ACLs and users,
ALTER on the cluster to change them, DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster for
quotas. A password is salted here and only its salted form leaves the process; no answer
carries a credential.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import Reply, route
from kafkalite.protocol.acl import AclOperation, ResourceType

PATTERN_TYPES = {"LITERAL": 3, "PREFIXED": 4}
PATTERN_NAMES = {v: k for k, v in PATTERN_TYPES.items()}
PERMISSIONS = {"DENY": 2, "ALLOW": 3}
PERMISSION_NAMES = {v: k for k, v in PERMISSIONS.items()}
DEFAULT_ENTITY = "<default>"
ENTITY_TYPES = {"user": "user", "client-id": "client_id"}


def acl_json(resource: Any, acl: Any) -> dict[str, Any]:
    return {
        "resource_type": _name(ResourceType, resource.resource_type),
        "resource_name": resource.resource_name,
        "pattern_type": PATTERN_NAMES.get(int(resource.pattern_type), str(resource.pattern_type)),
        "principal": acl.principal,
        "host": acl.host,
        "operation": _name(AclOperation, acl.operation),
        "permission": PERMISSION_NAMES.get(int(acl.permission_type), str(acl.permission_type)),
    }


def _name(enum: Any, value: Any) -> str:
    try:
        return str(enum(int(value)).name)
    except ValueError:
        return str(value)


class SecurityRoutes(ApiBase):
    """ACLs, SCRAM users and quotas, over Kafka's own admin requests."""

    async def _send(self, api_key: Any, **fields: Any) -> Any:
        from kafkalite.client.connection import request_builder

        try:
            client = await self.kafka_client()
            return await client.send(api_key, request_builder(api_key, **fields))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the client's I/O and protocol failures, at the boundary
            raise AdminError(503, "UNAVAILABLE", f"the broker did not answer: {e}") from None

    @staticmethod
    def _check(code: Any, message: str | None) -> None:
        from kafkalite.protocol.errors import ErrorCode

        error = ErrorCode.of(int(code))
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, message or error.message or error.name)

    # -- ACLs --------------------------------------------------------------------------------

    @route("GET", "/acls", summary="List ACLs", tag="security", answer=list[m.Acl])
    async def list_acls(self, request: web.Request) -> Any:
        """Every ACL binding (DescribeAcls with a filter matching all)."""
        from kafkalite.protocol.api import ApiKey

        response = await self._send(
            ApiKey.DESCRIBE_ACLS,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        self._check(response.error_code, response.error_message)
        found = [acl_json(r, a) for r in response.resources for a in r.acls]
        return sorted(found, key=lambda a: tuple(a.values()))

    @staticmethod
    def _binding(acl: m.NewAcl | m.AclQuery) -> dict[str, Any]:
        return {
            "resource_type": int(ResourceType[acl.resource_type]),
            "resource_name": acl.resource_name,
            "pattern_type": PATTERN_TYPES[acl.pattern_type],
            "principal": acl.principal,
            "host": acl.host,
            "operation": int(AclOperation[acl.operation]),
            "permission_type": PERMISSIONS[acl.permission],
        }

    @route(
        "POST",
        "/acls",
        summary="Create ACL",
        tag="security",
        answer=m.Acl,
        body=m.NewAcl,
        status=201,
    )
    async def create_acl(self, request: web.Request, acl: m.NewAcl) -> Any:
        from kafkalite.protocol.api import ApiKey

        if acl.resource_type == "CLUSTER" and acl.resource_name != "kafka-cluster":
            raise AdminError.invalid("resource_name", "the cluster's name is kafka-cluster")
        binding = self._binding(acl)
        creation = {**binding, "resource_pattern_type": binding["pattern_type"]}
        response = await self._send(ApiKey.CREATE_ACLS, creations=[creation])
        [result] = response.results
        self._check(result.error_code, result.error_message)
        return Reply(acl.model_dump(), 201)

    @route(
        "DELETE",
        "/acls",
        summary="Delete ACL",
        tag="security",
        answer=m.DeletedAcls,
        query=m.AclQuery,
    )
    async def delete_acl(self, request: web.Request, query: m.AclQuery) -> Any:
        """The binding named by the query, exactly (DeleteAcls); 404 when there is none."""
        from kafkalite.protocol.api import ApiKey

        b = self._binding(query)
        response = await self._send(
            ApiKey.DELETE_ACLS,
            filters=[
                {
                    "resource_type_filter": b["resource_type"],
                    "resource_name_filter": b["resource_name"],
                    "pattern_type_filter": b["pattern_type"],
                    "principal_filter": b["principal"],
                    "host_filter": b["host"],
                    "operation": b["operation"],
                    "permission_type": b["permission_type"],
                }
            ],
        )
        [result] = response.filter_results
        self._check(result.error_code, result.error_message)
        deleted = [
            {
                "resource_type": _name(ResourceType, a.resource_type),
                "resource_name": a.resource_name,
                "pattern_type": PATTERN_NAMES.get(int(a.pattern_type), str(a.pattern_type)),
                "principal": a.principal,
                "host": a.host,
                "operation": _name(AclOperation, a.operation),
                "permission": PERMISSION_NAMES.get(int(a.permission_type), "?"),
            }
            for a in result.matching_acls
        ]
        if not deleted:
            raise AdminError(404, "RESOURCE_NOT_FOUND", "no such ACL")
        return {"deleted": deleted}

    # -- SCRAM users -------------------------------------------------------------------------

    @route("GET", "/users", summary="List SCRAM users", tag="security", answer=list[m.ScramUser])
    async def list_users(self, request: web.Request) -> Any:
        from kafkalite.protocol.api import ApiKey
        from kafkalite.security.scram import MECHANISM_TYPES

        names = {v: k for k, v in MECHANISM_TYPES.items()}
        response = await self._send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=None)
        self._check(response.error_code, response.error_message)
        return [
            {
                "name": r.user,
                "credentials": [
                    {
                        "mechanism": names.get(int(c.mechanism), str(c.mechanism)),
                        "iterations": c.iterations,
                    }
                    for c in r.credential_infos
                ],
            }
            for r in sorted(response.results, key=lambda r: r.user)
            if int(r.error_code) == 0
        ]

    @route(
        "POST",
        "/users",
        summary="Set a SCRAM credential",
        tag="security",
        answer=m.ScramUser,
        body=m.NewUser,
        status=201,
    )
    async def set_user(self, request: web.Request, user: m.NewUser) -> Any:
        """Add or replace a user's credential for one mechanism; the password is salted here
        and never stored or answered."""
        from kafkalite.admin.security import _executor
        from kafkalite.protocol.api import ApiKey
        from kafkalite.security.scram import MECHANISM_TYPES, salted_password

        salt = os.urandom(32)
        # the key derivation runs in the admin API's derivation threads, off the loop
        salted = await asyncio.get_running_loop().run_in_executor(
            _executor(),
            salted_password,
            user.mechanism,
            user.password.encode(),
            salt,
            user.iterations,
        )
        response = await self._send(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            deletions=[],
            upsertions=[
                {
                    "name": user.name,
                    "mechanism": MECHANISM_TYPES[user.mechanism],
                    "iterations": user.iterations,
                    "salt": salt,
                    "salted_password": salted,
                }
            ],
        )
        for result in response.results:
            self._check(result.error_code, result.error_message)
        shown = [{"mechanism": user.mechanism, "iterations": user.iterations}]
        return Reply({"name": user.name, "credentials": shown}, 201)

    @route(
        "DELETE",
        "/users/{name}",
        summary="Delete a SCRAM user",
        tag="security",
        answer=m.DeletedUser,
        params={"name": str},
    )
    async def delete_user(self, request: web.Request) -> Any:
        """Remove every SCRAM credential of the user; 404 when it has none."""
        from kafkalite.protocol.api import ApiKey

        name = request.match_info["name"]
        described = await self._send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=[{"name": name}])
        [result] = described.results
        self._check(result.error_code, result.error_message)
        mechanisms = [int(c.mechanism) for c in result.credential_infos]
        if not mechanisms:
            raise AdminError(404, "RESOURCE_NOT_FOUND", f"user {name!r} has no SCRAM credential")
        response = await self._send(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            deletions=[{"name": name, "mechanism": mech} for mech in mechanisms],
            upsertions=[],
        )
        for r in response.results:
            self._check(r.error_code, r.error_message)
        return {"name": name, "deleted": True}

    # -- quotas ------------------------------------------------------------------------------

    @route("GET", "/quotas", summary="List client quotas", tag="security", answer=list[m.Quota])
    async def list_quotas(self, request: web.Request) -> Any:
        return await self._quotas()

    async def _quotas(self) -> list[dict[str, Any]]:
        from kafkalite.protocol.api import ApiKey

        response = await self._send(ApiKey.DESCRIBE_CLIENT_QUOTAS, components=[], strict=False)
        self._check(response.error_code, response.error_message)
        out = []
        for entry in response.entries or ():
            quota: dict[str, Any] = {"user": None, "client_id": None}
            for e in entry.entity:
                key = ENTITY_TYPES.get(e.entity_type)
                if key is not None:
                    quota[key] = e.entity_name if e.entity_name is not None else DEFAULT_ENTITY
            quota["values"] = {v.key: float(v.value) for v in entry.values}
            out.append(quota)
        return sorted(out, key=lambda q: (q["user"] or "", q["client_id"] or ""))

    async def _alter_quotas(self, user: str | None, client_id: str | None, ops: list[Any]) -> None:
        from kafkalite.protocol.api import ApiKey

        if user is None and client_id is None:
            raise AdminError.invalid("user", "name a user, a client_id, or both")
        entity = [
            {"entity_type": kind, "entity_name": None if name == DEFAULT_ENTITY else name}
            for kind, name in (("user", user), ("client-id", client_id))
            if name is not None
        ]
        response = await self._send(
            ApiKey.ALTER_CLIENT_QUOTAS,
            entries=[{"entity": entity, "ops": ops}],
            validate_only=False,
        )
        [entry] = response.entries
        self._check(entry.error_code, entry.error_message)

    @route(
        "POST",
        "/quotas",
        summary="Set client quotas",
        tag="security",
        answer=m.Quota,
        body=m.QuotaChange,
    )
    async def set_quotas(self, request: web.Request, change: m.QuotaChange) -> Any:
        """Set or remove quotas of an entity; answers the quotas this request set."""
        if not change.values:
            raise AdminError.invalid("values", "give at least one quota (a number, or null)")
        ops = [
            {"key": key, "value": float(value or 0.0), "remove": value is None}
            for key, value in change.values.items()
        ]
        await self._alter_quotas(change.user, change.client_id, ops)
        # the quotas this request set (brokers apply them as they see the change)
        values = {k: float(v) for k, v in change.values.items() if v is not None}
        return {"user": change.user, "client_id": change.client_id, "values": values}

    @route(
        "DELETE",
        "/quotas",
        summary="Remove client quotas",
        tag="security",
        answer=m.Quota,
        query=m.QuotaQuery,
    )
    async def delete_quotas(self, request: web.Request, query: m.QuotaQuery) -> Any:
        """Remove every quota of the entity; 404 when it has none."""
        for quota in await self._quotas():
            if (quota["user"], quota["client_id"]) == (query.user, query.client_id):
                ops = [{"key": k, "value": 0.0, "remove": True} for k in quota["values"]]
                await self._alter_quotas(query.user, query.client_id, ops)
                return quota
        raise AdminError(404, "RESOURCE_NOT_FOUND", "no quotas for that entity")
