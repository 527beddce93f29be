"""`kafkalite users|acls|quotas`: SCRAM users, ACLs and client quotas over the Kafka protocol
(AlterUserScramCredentials / DescribeUserScramCredentials, CreateAcls / DescribeAcls /
DeleteAcls, AlterClientQuotas / DescribeClientQuotas), like kafka-configs and kafka-acls.

Every command takes ``--bootstrap-server`` and ``--command-config client.properties`` (Kafka's
client properties: security.protocol, ssl.* in PEM, sasl.mechanism, sasl.jaas.config), which
is also accepted before any command (``kafkalite --command-config c.properties topics list``;
read by common.py).
"""

from __future__ import annotations

import os
from typing import Any

import click

from kafkalite.cli.common import Group, console, error_text, fail, load_command_config, new_table


@click.group("users", cls=Group)
def users_app() -> None:
    """SCRAM users (credentials in /config/users)."""


@click.group("acls", cls=Group)
def acls_app() -> None:
    """ACLs of the ACL authorizer."""


@click.group("quotas", cls=Group)
def quotas_app() -> None:
    """Client quotas of users and client ids."""


def connection_options(function: Any) -> Any:
    """--bootstrap-server and --command-config, on every command of these groups."""
    function = click.option(
        "--command-config",
        metavar="FILE",
        help="client.properties: security.protocol, ssl.*, sasl.*",
    )(function)
    return click.option(
        "--bootstrap-server",
        "-b",
        "bootstrap",
        default="127.0.0.1:9092",
        show_default=True,
        metavar="HOST:PORT",
        help="host:port of a broker",
    )(function)


def resource_options(function: Any) -> Any:
    """The resource an ACL command is about: --topic, --group, --cluster, --transactional-id,
    and --prefixed (the name is a prefix)."""
    for decorator in reversed(
        [
            click.option("--topic", help="a topic's ACLs"),
            click.option("--group", help="a consumer group's ACLs"),
            click.option("--cluster", is_flag=True, help="the cluster's ACLs"),
            click.option("--transactional-id", help="a transactional id's ACLs"),
            click.option("--prefixed", is_flag=True, help="the name is a prefix"),
        ]
    ):
        function = decorator(function)
    return function


def _send(bootstrap: str, command_config: str | None, api_key: int, request: Any) -> Any:
    import asyncio

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
        fail(error_text(e.error_code, e.args[0] if e.args else None))


def _check(code: int, message: str | None) -> None:
    if int(code):
        fail(error_text(code, message))


# ---------------------------------------------------------------------- users


MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def _mechanisms(mechanism: str) -> list[str]:
    if mechanism.lower() == "both":
        return list(MECHANISMS)
    if mechanism.upper() not in MECHANISMS:
        fail(f"--mechanism: {mechanism!r}: expected SCRAM-SHA-256, SCRAM-SHA-512 or both", 2)
    return [mechanism.upper()]


@users_app.command("add")
@click.argument("name", metavar="USER")
@click.option("--password", prompt=True, hide_input=True, help="(asked for when not given)")
@click.option(
    "--mechanism",
    default="both",
    show_default=True,
    metavar="SCRAM-SHA-256|SCRAM-SHA-512|both",
)
@click.option("--iterations", type=int, default=4096, show_default=True)
@connection_options
def users_add(
    name: str,
    password: str,
    mechanism: str,
    iterations: int,
    bootstrap: str,
    command_config: str | None,
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
    click.echo(f"User {name}: {', '.join(_mechanisms(mechanism))} set.")


@users_app.command("remove")
@click.argument("name", metavar="USER")
@click.option(
    "--mechanism",
    default="both",
    show_default=True,
    metavar="SCRAM-SHA-256|SCRAM-SHA-512|both",
)
@connection_options
def users_remove(name: str, mechanism: str, bootstrap: str, command_config: str | None) -> None:
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
    click.echo(f"User {name}: removed.")


@users_app.command("list")
@connection_options
def users_list(bootstrap: str, command_config: str | None) -> None:
    """The SCRAM users and their mechanisms."""
    from kafkalite.protocol.api import ApiKey

    response = _send(
        bootstrap, command_config, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None}
    )
    _check(response.error_code, response.error_message)
    names = {v: k for k, v in MECHANISMS.items()}
    table = new_table("user", "mechanisms")
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
@click.option(
    "--operation", multiple=True, required=True, help="Read, Write, All, ... (repeatable)"
)
@click.option("--principal", required=True, help="User:alice")
@resource_options
@click.option("--deny", is_flag=True, help="a DENY ACL (default ALLOW)")
@click.option("--host", default="*", show_default=True, help="the client host it applies to")
@connection_options
def acls_add(
    operation: tuple[str, ...],
    principal: str,
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    prefixed: bool,
    deny: bool,
    host: str,
    bootstrap: str,
    command_config: str | None,
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
    click.echo(f"Added {len(creations)} ACL(s).")


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
@click.option("--principal", help="User:alice")
@resource_options
@connection_options
def acls_list(
    principal: str | None,
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    prefixed: bool,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """List ACLs (DescribeAcls)."""
    from kafkalite.protocol.api import ApiKey
    from kafkalite.security.acl import OPERATION_NAMES, RESOURCE_TYPE_NAMES

    request = _filter(principal, topic, group, cluster, transactional_id, prefixed)
    response = _send(bootstrap, command_config, ApiKey.DESCRIBE_ACLS, request)
    _check(response.error_code, response.error_message)
    table = new_table("resource", "pattern", "principal", "host", "operation", "permission")
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
@click.option("--principal", help="User:alice")
@resource_options
@connection_options
def acls_remove(
    principal: str | None,
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    prefixed: bool,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """Remove the ACLs matching the filter (DeleteAcls)."""
    from kafkalite.protocol.api import ApiKey

    if principal is None and not (topic or group or cluster or transactional_id):
        fail("give at least --principal or a resource (refusing to remove every ACL)", 2)
    request = _filter(principal, topic, group, cluster, transactional_id, prefixed)
    response = _send(bootstrap, command_config, ApiKey.DELETE_ACLS, {"filters": [request]})
    result = response.filter_results[0]
    _check(result.error_code, result.error_message)
    click.echo(f"Removed {len(result.matching_acls)} ACL(s).")


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


def entity_options(function: Any) -> Any:
    """The entity a quota command is about: a user, a client id, or the defaults."""
    for decorator in reversed(
        [
            click.option("--user", help="a user's quotas"),
            click.option("--client-id", help="a client id's quotas"),
            click.option("--default-user", is_flag=True, help="the default of every user"),
            click.option("--default-client", is_flag=True, help="the default of every client id"),
        ]
    ):
        function = decorator(function)
    return function


@quotas_app.command("set")
@entity_options
@click.option("--producer-byte-rate", type=float, metavar="BYTES/S")
@click.option("--consumer-byte-rate", type=float, metavar="BYTES/S")
@click.option("--request-percentage", type=float, metavar="PERCENT")
@click.option("--remove", multiple=True, metavar="KEY", help="remove this quota (repeatable)")
@connection_options
def quotas_set(
    user: str | None,
    client_id: str | None,
    default_user: bool,
    default_client: bool,
    producer_byte_rate: float | None,
    consumer_byte_rate: float | None,
    request_percentage: float | None,
    remove: tuple[str, ...],
    bootstrap: str,
    command_config: str | None,
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
    click.echo("Quotas updated.")


@quotas_app.command("list")
@connection_options
def quotas_list(bootstrap: str, command_config: str | None) -> None:
    """Every quota (DescribeClientQuotas)."""
    from kafkalite.protocol.api import ApiKey

    response = _send(
        bootstrap,
        command_config,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        {"components": [], "strict": False},
    )
    _check(response.error_code, response.error_message)
    table = new_table("entity", "quota", "value")
    for entry in response.entries or ():
        name = ", ".join(
            f"{e.entity_type}={e.entity_name if e.entity_name is not None else '<default>'}"
            for e in entry.entity
        )
        for v in entry.values:
            table.add_row(name, v.key, f"{v.value:g}")
    console.print(table)
