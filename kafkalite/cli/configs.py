"""`kafkalite configs`, as kafka-configs.sh does it over the Kafka protocol: DescribeConfigs, and
IncrementalAlterConfigs (SET for --add-config, DELETE for --delete-config), for brokers (one
broker, or --entity-default for the cluster-wide defaults) and topics.

    kafkalite configs --entity-type brokers --entity-name 0 --describe [--all]
    kafkalite configs --entity-type brokers --entity-default --alter \\
        --add-config log.retention.ms=3600000,log.cleanup.policy=[delete,compact]
    kafkalite configs --entity-type topics --entity-name orders --alter --delete-config retention.ms

A broker's own level is sent to that broker (a broker alters only its own level or the
defaults, as in Kafka); the defaults and topics go to any broker. --add-config is Kafka's
syntax: ``k=v`` pairs separated by commas, a value holding commas in square brackets.
"""

from __future__ import annotations

from typing import Any

import click

from kafkalite.cli.common import bootstrap_option, error_text, fail, run

SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
RESOURCE = {"brokers": 4, "topics": 2}


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's --add-config: ``k1=v1,k2=[a,b],k3=v3``; a usage error names the bad entry."""
    out: dict[str, str] = {}
    entries: list[str] = []
    current, depth = "", 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            entries.append(current)
            current = ""
        else:
            current += ch
    if depth != 0:
        fail(f"--add-config: unbalanced square brackets in {text!r}", 2)
    entries.append(current)
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            fail(f"--add-config expects key=value, got {entry!r}", 2)
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def describe_lines(entity: str, result: Any, show_all: bool) -> list[str]:
    """kafka-configs.sh's listing: one line per config with its sensitivity and synonyms."""
    if show_all:
        head = f"All configs for {entity} are:"
        configs = list(result.configs)
    else:
        head = f"Dynamic configs for {entity} are:"
        configs = [c for c in result.configs if int(c.config_source) in (1, 2, 3)]
    lines = [head]
    for c in sorted(configs, key=lambda c: c.name):
        value = "null" if c.value is None else c.value
        synonyms = ", ".join(
            f"{SOURCES.get(int(s.source), s.source)}:{s.name}="
            f"{'null' if s.value is None else s.value}"
            for s in c.synonyms
        )
        lines.append(
            f"  {c.name}={value} sensitive={str(bool(c.is_sensitive)).lower()} "
            f"synonyms={{{synonyms}}}"
        )
    return lines


@click.command("configs")
@click.option(
    "--entity-type",
    type=click.Choice(["brokers", "topics"]),
    required=True,
    help="what the configs belong to",
)
@click.option("--entity-name", metavar="NAME", help="a broker id or a topic name")
@click.option("--entity-default", is_flag=True, help="the cluster-wide broker defaults")
@click.option("--describe", "do_describe", is_flag=True, help="list the configs")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="with --describe: every config, not only the dynamic ones",
)
@click.option("--alter", "do_alter", is_flag=True, help="change the configs")
@click.option("--add-config", metavar="K=V,...", help="with --alter: configs to set")
@click.option("--delete-config", metavar="K,...", help="with --alter: configs to remove")
@bootstrap_option
def configs_app(
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    do_describe: bool,
    show_all: bool,
    do_alter: bool,
    add_config: str | None,
    delete_config: str | None,
    bootstrap: str,
) -> None:
    """Describe or alter broker and topic configs. As kafka-configs.sh, over the Kafka protocol."""
    if do_describe == do_alter:
        fail("give exactly one of --describe and --alter", 2)
    if entity_default and entity_name is not None:
        fail("give --entity-name or --entity-default, not both", 2)
    if entity_type == "topics" and (entity_default or not entity_name):
        fail("topics need --entity-name (there are no topic defaults to alter)", 2)
    if entity_type == "brokers" and not entity_default:
        if entity_name is None or not entity_name.isdigit():
            fail("brokers need --entity-name <broker id> or --entity-default", 2)
    name = "" if entity_default else str(entity_name)
    if entity_type == "brokers":
        entity = "brokers in the cluster" if entity_default else f"broker {name}"
    else:
        entity = f"topic {name}"
    node_id = int(name) if entity_type == "brokers" and name else None
    if do_describe:
        describe(RESOURCE[entity_type], name, node_id, entity, show_all, entity_default, bootstrap)
    else:
        sets = parse_add_config(add_config or "")
        deletes = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
        if not sets and not deletes:
            fail("nothing to alter: give --add-config or --delete-config", 2)
        alter(RESOURCE[entity_type], name, node_id, sets, deletes, bootstrap)
        if entity_default:
            click.echo("Completed updating default config for brokers in the cluster.")
        else:
            click.echo(f"Completed updating config for {entity}.")


def describe(
    resource_type: int,
    name: str,
    node_id: int | None,
    entity: str,
    show_all: bool,
    entity_default: bool,
    bootstrap: str,
) -> None:
    from kafkalite.cli.common import open_client

    async def go() -> Any:
        client = await open_client(bootstrap)
        try:
            response = await client.describe_configs(
                [(resource_type, name)], node_id=node_id, include_synonyms=True
            )
        finally:
            await client.close()
        return response.results[0]

    result = run(go())
    if result.error_code:
        fail(error_text(result.error_code, result.error_message))
    if entity_default:
        lines = describe_lines(entity, result, show_all=True)
        lines[0] = "Default configs for brokers in the cluster are:"
    else:
        lines = describe_lines(entity, result, show_all)
    click.echo("\n".join(lines))


def alter(
    resource_type: int,
    name: str,
    node_id: int | None,
    sets: dict[str, str],
    deletes: list[str],
    bootstrap: str,
) -> None:
    from kafkalite.cli.common import open_client
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in sets.items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in deletes]

    async def go() -> Any:
        client = await open_client(bootstrap)
        try:
            response = await client.send(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                request_builder(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    resources=[
                        {"resource_type": resource_type, "resource_name": name, "configs": ops}
                    ],
                    validate_only=False,
                ),
                node_id=node_id,
            )
        finally:
            await client.close()
        return response.responses[0]

    result = run(go())
    if result.error_code:
        fail(error_text(result.error_code, result.error_message))
