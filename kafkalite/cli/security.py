"""`kafkalite users|acls|quotas`: SCRAM users, ACLs and client quotas over the Kafka protocol
(AlterUserScramCredentials / DescribeUserScramCredentials, CreateAcls / DescribeAcls /
DeleteAcls, AlterClientQuotas / DescribeClientQuotas), like kafka-configs and kafka-acls.

Every command takes ``--bootstrap-server`` and ``--command-config client.properties`` (Kafka's
client properties: security.protocol, ssl.* in PEM, sasl.mechanism, sasl.jaas.config), which
is also accepted before any command (``kafkalite --command-config c.properties topics list``;
read by common.py).
"""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any

import typer
from rich.table import Table

from kafkalite.cli.common import console, fail, load_command_config

users_app = typer.Typer(help="SCRAM users (credentials in /config/users)", no_args_is_help=True)
acls_app = typer.Typer(help="ACLs of the ACL authorizer", no_args_is_help=True)
quotas_app = typer.Typer(help="Client quotas of users and client ids", no_args_is_help=True)

BOOTSTRAP = typer.Option("127.0.0.1:9092", "--bootstrap-server", "-b", help="host:port of a broker")
COMMAND_CONFIG = typer.Option(
    None, "--command-config", help="client.properties: security.protocol, ssl.*, sasl.*"
)


def _send(bootstrap: str, command_config: str | None, api_key: int, request: Any) -> Any:
    from kafkalite.client.connection import KafkaConnection
    from kafkalite.client.errors import KafkaConnectionError
    from kafkalite.protocol.errors import KafkaError

    security = load_command_config(command_config)
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")

    async def go() -> Any:
        async with KafkaConnection(host or "127.0.0.1", int(port), security=security) as conn:
            return await conn.send(api_key, request)

    try:
        return asyncio.run(go())
    except (KafkaConnectionError, OSError) as e:
        fail(f"cannot reach the broker: {e}")
    except KafkaError as e:
        fail(str(e))


def _check(code: int, message: str | None) -> None:
    from kafkalite.protocol.errors import ErrorCode

    if int(code):
        error = ErrorCode.of(int(code))
        fail(f"{error.name}: {message or error.message}")


# ---------------------------------------------------------------------- users


MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def _mechanisms(mechanism: str) -> list[str]:
    if mechanism.lower() == "both":
        return list(MECHANISMS)
    if mechanism.upper() not in MECHANISMS:
        fail(f"--mechanism: {mechanism!r}: expected SCRAM-SHA-256, SCRAM-SHA-512 or both", 2)
    return [mechanism.upper()]


@users_app.command("add")
def users_add(
    name: str,
    password: str = typer.Option(..., "--password", prompt=True, hide_input=True),
    mechanism: str = typer.Option("both", "--mechanism"),
    iterations: int = typer.Option(4096, "--iterations"),
    bootstrap: str = BOOTSTRAP,
    command_config: str | None = COMMAND_CONFIG,
) -> None:
    """Add or change a user's SCRAM credentials."""
    from kafkalite.protocol.api import ApiKey
    from kafkalite.security.scram import salted_password

    upsertions = []
    for m in _mechanisms(mechanism):
        salt = os.urandom(32)
        upsertions.append(
            {
                "name": name,
                "mechanism": MECHANISMS[m],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted_password(m, password.encode(), salt, iterations),
            }
        )
    response = _send(
        bootstrap,
        command_config,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        {"deletions": [], "upsertions": upsertions},
    )
    for result in response.results:
        _check(result.error_code, result.error_message)
    console.print(f"User {name}: {', '.join(_mechanisms(mechanism))} set.")


@users_app.command("remove")
def users_remove(
    name: str,
    mechanism: str = typer.Option("both", "--mechanism"),
    bootstrap: str = BOOTSTRAP,
    command_config: str | None = COMMAND_CONFIG,
) -> None:
    """Remove a user's SCRAM credentials (with `both`, those it has)."""
    from kafkalite.protocol.api import ApiKey

    mechanisms = _mechanisms(mechanism)
    if mechanism.lower() == "both":
        described = _send(
            bootstrap,
            command_config,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            {"users": [{"name": name}]},
        )
        result = described.results[0]
        _check(result.error_code, result.error_message)
        have = {c.mechanism for c in result.credential_infos}
        mechanisms = [m for m in mechanisms if MECHANISMS[m] in have]
    response = _send(
        bootstrap,
        command_config,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        {
            "deletions": [{"name": name, "mechanism": MECHANISMS[m]} for m in mechanisms],
            "upsertions": [],
        },
    )
    for result in response.results:
        _check(result.error_code, result.error_message)
    console.print(f"User {name}: removed.")


@users_app.command("list")
def users_list(bootstrap: str = BOOTSTRAP, command_config: str | None = COMMAND_CONFIG) -> None:
    """The SCRAM users and their mechanisms."""
    from kafkalite.protocol.api import ApiKey

    response = _send(
        bootstrap, command_config, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None}
    )
    _check(response.error_code, response.error_message)
    names = {v: k for k, v in MECHANISMS.items()}
    table = Table("user", "mechanisms")
    for result in response.results:
        table.add_row(
            result.user,
            ", ".join(
                f"{names.get(c.mechanism, c.mechanism)} ({c.iterations})"
                for c in result.credential_infos
            ),
        )
    console.print(table)


# ---------------------------------------------------------------------- ACLs


def _resource(topic: str | None, group: str | None, cluster: bool, transactional_id: str | None):
    chosen = [
        (2, topic),
        (3, group),
        (4, "kafka-cluster" if cluster else None),
        (5, transactional_id),
    ]
    chosen = [(t, n) for t, n in chosen if n is not None]
    if len(chosen) > 1:
        fail("name one resource: --topic, --group, --cluster or --transactional-id", 2)
    return chosen[0] if chosen else (None, None)


def _operation(name: str) -> int:
    from kafkalite.security.acl import OPERATIONS_BY_NAME

    op = OPERATIONS_BY_NAME.get(name.replace("_", "").replace("-", "").lower())
    if op is None:
        fail(f"--operation: {name!r} is not one of {', '.join(sorted(OPERATIONS_BY_NAME))}", 2)
    return int(op)


@acls_app.command("add")
def acls_add(
    operation: Annotated[list[str], typer.Option("--operation", help="Read, Write, All, ...")],
    principal: str = typer.Option(..., "--principal", help="User:alice"),
    topic: str | None = typer.Option(None, "--topic"),
    group: str | None = typer.Option(None, "--group"),
    cluster: bool = typer.Option(False, "--cluster"),
    transactional_id: str | None = typer.Option(None, "--transactional-id"),
    prefixed: bool = typer.Option(False, "--prefixed", help="the name is a prefix"),
    deny: bool = typer.Option(False, "--deny", help="a DENY ACL (default ALLOW)"),
    host: str = typer.Option("*", "--host"),
    bootstrap: str = BOOTSTRAP,
    command_config: str | None = COMMAND_CONFIG,
) -> None:
    """Add ACLs (CreateAcls)."""
    from kafkalite.protocol.api import ApiKey

    resource_type, name = _resource(topic, group, cluster, transactional_id)
    if resource_type is None:
        fail("name a resource: --topic, --group, --cluster or --transactional-id", 2)
    creations = [
        {
            "resource_type": resource_type,
            "resource_name": name,
            "resource_pattern_type": 4 if prefixed else 3,
            "principal": principal,
            "host": host,
            "operation": _operation(op),
            "permission_type": 2 if deny else 3,
        }
        for op in operation
    ]
    response = _send(bootstrap, command_config, ApiKey.CREATE_ACLS, {"creations": creations})
    for result in response.results:
        _check(result.error_code, result.error_message)
    console.print(f"Added {len(creations)} ACL(s).")


def _filter(principal, topic, group, cluster, transactional_id, prefixed) -> dict[str, Any]:
    resource_type, name = _resource(topic, group, cluster, transactional_id)
    return {
        "resource_type_filter": resource_type or 1,
        "resource_name_filter": name,
        "pattern_type_filter": (4 if prefixed else 3) if name is not None else 1,
        "principal_filter": principal,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }


@acls_app.command("list")
def acls_list(
    principal: str | None = typer.Option(None, "--principal"),
    topic: str | None = typer.Option(None, "--topic"),
    group: str | None = typer.Option(None, "--group"),
    cluster: bool = typer.Option(False, "--cluster"),
    transactional_id: str | None = typer.Option(None, "--transactional-id"),
    prefixed: bool = typer.Option(False, "--prefixed"),
    bootstrap: str = BOOTSTRAP,
    command_config: str | None = COMMAND_CONFIG,
) -> None:
    """List ACLs (DescribeAcls)."""
    from kafkalite.protocol.api import ApiKey
    from kafkalite.security.acl import OPERATION_NAMES, RESOURCE_TYPE_NAMES

    request = _filter(principal, topic, group, cluster, transactional_id, prefixed)
    response = _send(bootstrap, command_config, ApiKey.DESCRIBE_ACLS, request)
    _check(response.error_code, response.error_message)
    table = Table("resource", "pattern", "principal", "host", "operation", "permission")
    for r in response.resources:
        for a in r.acls:
            table.add_row(
                f"{RESOURCE_TYPE_NAMES.get(r.resource_type, r.resource_type)}:{r.resource_name}",
                "PREFIXED" if r.pattern_type == 4 else "LITERAL",
                a.principal,
                a.host,
                OPERATION_NAMES.get(a.operation, str(a.operation)),
                "ALLOW" if a.permission_type == 3 else "DENY",
            )
    console.print(table)


@acls_app.command("remove")
def acls_remove(
    principal: str | None = typer.Option(None, "--principal"),
    topic: str | None = typer.Option(None, "--topic"),
    group: str | None = typer.Option(None, "--group"),
    cluster: bool = typer.Option(False, "--cluster"),
    transactional_id: str | None = typer.Option(None, "--transactional-id"),
    prefixed: bool = typer.Option(False, "--prefixed"),
    bootstrap: str = BOOTSTRAP,
    command_config: str | None = COMMAND_CONFIG,
) -> None:
    """Remove the ACLs matching the filter (DeleteAcls)."""
    from kafkalite.protocol.api import ApiKey

    if principal is None and not (topic or group or cluster or transactional_id):
        fail("give at least --principal or a resource (refusing to remove every ACL)", 2)
    request = _filter(principal, topic, group, cluster, transactional_id, prefixed)
    response = _send(bootstrap, command_config, ApiKey.DELETE_ACLS, {"filters": [request]})
    result = response.filter_results[0]
    _check(result.error_code, result.error_message)
    console.print(f"Removed {len(result.matching_acls)} ACL(s).")


# ---------------------------------------------------------------------- quotas


def _entity(user: str | None, client_id: str | None, default_user: bool, default_client: bool):
    entity = []
    if user is not None or default_user:
        entity.append({"entity_type": "user", "entity_name": None if default_user else user})
    if client_id is not None or default_client:
        entity.append(
            {"entity_type": "client-id", "entity_name": None if default_client else client_id}
        )
    if not entity:
        fail("name an entity: --user, --client-id, --default-user or --default-client", 2)
    return entity


@quotas_app.command("set")
def quotas_set(
    user: str | None = typer.Option(None, "--user"),
    client_id: str | None = typer.Option(None, "--client-id"),
    default_user: bool = typer.Option(False, "--default-user"),
    default_client: bool = typer.Option(False, "--default-client"),
    producer_byte_rate: float | None = typer.Option(None, "--producer-byte-rate"),
    consumer_byte_rate: float | None = typer.Option(None, "--consumer-byte-rate"),
    request_percentage: float | None = typer.Option(None, "--request-percentage"),
    remove: Annotated[list[str] | None, typer.Option("--remove", help="a quota key")] = None,
    bootstrap: str = BOOTSTRAP,
    command_config: str | None = COMMAND_CONFIG,
) -> None:
    """Set (or --remove) quotas of a user, a client id, or both (AlterClientQuotas)."""
    from kafkalite.protocol.api import ApiKey

    ops = [
        {"key": key, "value": float(value), "remove": False}
        for key, value in (
            ("producer_byte_rate", producer_byte_rate),
            ("consumer_byte_rate", consumer_byte_rate),
            ("request_percentage", request_percentage),
        )
        if value is not None
    ] + [{"key": key, "value": 0.0, "remove": True} for key in remove or []]
    if not ops:
        fail("nothing to set: give a rate or --remove KEY", 2)
    entity = _entity(user, client_id, default_user, default_client)
    response = _send(
        bootstrap,
        command_config,
        ApiKey.ALTER_CLIENT_QUOTAS,
        {"entries": [{"entity": entity, "ops": ops}], "validate_only": False},
    )
    _check(response.entries[0].error_code, response.entries[0].error_message)
    console.print("Quotas updated.")


@quotas_app.command("list")
def quotas_list(bootstrap: str = BOOTSTRAP, command_config: str | None = COMMAND_CONFIG) -> None:
    """Every quota (DescribeClientQuotas)."""
    from kafkalite.protocol.api import ApiKey

    response = _send(
        bootstrap,
        command_config,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        {"components": [], "strict": False},
    )
    _check(response.error_code, response.error_message)
    table = Table("entity", "quota", "value")
    for entry in response.entries or ():
        name = ", ".join(
            f"{e.entity_type}={e.entity_name if e.entity_name is not None else '<default>'}"
            for e in entry.entity
        )
        for v in entry.values:
            table.add_row(name, v.key, f"{v.value:g}")
    console.print(table)
