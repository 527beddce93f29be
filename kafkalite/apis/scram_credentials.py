"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554.

Credentials live in ``/config/users/<user>`` (zk/security.py), in Kafka's format, so any
broker of the cluster authenticates a user as soon as the write is done (each SCRAM exchange
reads the store). Kafka's checks (ZkAdminManager.alterUserScramCredentials /
describeUserScramCredentials):

- a user named twice in one Alter request, or twice in a Describe: DUPLICATE_RESOURCE;
- an empty user name, iterations outside 4096..16384, an empty salt or salted password:
  UNACCEPTABLE_CREDENTIAL; an unknown mechanism: UNSUPPORTED_SASL_MECHANISM;
- deleting a credential that does not exist, or describing a user without any:
  RESOURCE_NOT_FOUND.
With an authorizer, both need the CLUSTER resource (ALTER / DESCRIBE), else
CLUSTER_AUTHORIZATION_FAILED for every user.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)
from kafkalite.zk.security import alter_entity_config, get_entity_config, scram_users

MECHANISM_NAMES = {v: k for k, v in MECHANISM_TYPES.items()}


def _cluster_denied(ctx: RequestContext, operation: str) -> bool:
    authorizer = ctx.services.extra.get("authorizer")
    return authorizer is not None and not authorizer.authorize_cluster(ctx.connection, operation)


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
async def handle_describe(ctx: RequestContext, request: Any) -> Any:
    if _cluster_denied(ctx, "DESCRIBE"):
        return ctx.response(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            results=[],
        )
    users = await scram_users(ctx.services.store)
    wanted = None if request.users is None else [u.name for u in request.users]
    results = []
    if wanted is None or not wanted:
        names = sorted(users)
        duplicates: set[str] = set()
    else:
        names = list(dict.fromkeys(wanted))
        duplicates = {n for n in names if wanted.count(n) > 1}
    for name in names:
        if name in duplicates:
            results.append(
                {
                    "user": name,
                    "error_code": ErrorCode.DUPLICATE_RESOURCE,
                    "error_message": f"Cannot describe SCRAM credentials for the same user "
                    f"twice in a single request: {name}",
                    "credential_infos": [],
                }
            )
        elif name not in users:
            results.append(
                {
                    "user": name,
                    "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                    "error_message": f"Attempt to describe a user credential that does not "
                    f"exist: {name}",
                    "credential_infos": [],
                }
            )
        else:
            results.append(
                {
                    "user": name,
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "credential_infos": [
                        {"mechanism": MECHANISM_TYPES[m], "iterations": c.iterations}
                        for m, c in sorted(users[name].items())
                    ],
                }
            )
    return ctx.response(error_code=ErrorCode.NONE, error_message=None, results=results)


def _check(name: str, mechanism: int, iterations: int | None = None, *extra: bytes) -> Any:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mechanism}"
    if iterations is not None and not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        return (
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Iterations {iterations} not in {MIN_ITERATIONS}..{MAX_ITERATIONS}",
        )
    if any(not value for value in extra):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
async def handle_alter(ctx: RequestContext, request: Any) -> Any:
    ops = [(d.name, d.mechanism, None) for d in request.deletions] + [
        (u.name, u.mechanism, u) for u in request.upsertions
    ]
    users = list(dict.fromkeys(name for name, _, _ in ops))
    if _cluster_denied(ctx, "ALTER"):
        return ctx.response(
            results=[
                {"user": u, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED} for u in users
            ]
        )
    results = []
    store = ctx.services.store
    for user in users:
        mine = [(m, up) for name, m, up in ops if name == user]
        mechanisms = [m for m, _ in mine]
        error = None
        if len(set(mechanisms)) != len(mechanisms):
            error = (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        for mechanism, upsert in mine:
            if error is not None:
                break
            if upsert is None:
                error = _check(user, mechanism)
            else:
                error = _check(
                    user, mechanism, upsert.iterations, upsert.salt, upsert.salted_password
                )
        if error is None:
            current = await get_entity_config(store, "users", user)
            removals = []
            updates: dict[str, str] = {}
            for mechanism, upsert in mine:
                name = MECHANISM_NAMES[mechanism]
                if upsert is None:
                    if name not in current:
                        error = (
                            ErrorCode.RESOURCE_NOT_FOUND,
                            f"Attempt to delete a user credential that does not exist: {name}",
                        )
                        break
                    removals.append(name)
                else:
                    credential: ScramCredential = credential_from_salted(
                        name, bytes(upsert.salted_password), bytes(upsert.salt), upsert.iterations
                    )
                    updates[name] = credential.to_string()
            if error is None:
                await alter_entity_config(store, "users", user, updates, removals)
                # this broker's cache at once (the others follow the change notification)
                cache = ctx.services.extra.get("scram_cache")
                if cache is not None:
                    cache.invalidate(user)
        code, message = error if error is not None else (ErrorCode.NONE, None)
        results.append({"user": user, "error_code": code, "error_message": message})
    return ctx.response(results=results)
