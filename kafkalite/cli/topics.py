"""`kafkalite topics create|list|describe|alter|delete`, as kafka-topics does it: CreateTopics,
Metadata, DescribeConfigs, CreatePartitions, IncrementalAlterConfigs and DeleteTopics."""

from __future__ import annotations

from typing import Any

import click

from kafkalite.cli.common import (
    Group,
    bootstrap_option,
    console,
    error_name,
    error_text,
    fail,
    new_table,
    open_client,
    parse_pairs,
    run,
)


@click.group("topics", cls=Group)
def topics_app() -> None:
    """Create, list, describe, alter and delete topics."""


def exclude_internal_option(function: Any) -> Any:
    return click.option(
        "--exclude-internal",
        is_flag=True,
        help="leave out internal topics (__consumer_offsets, __transaction_state)",
    )(function)


@topics_app.command("create")
@click.argument("name", metavar="TOPIC")
@click.option(
    "--partitions", "-p", type=int, default=-1, show_default=True, help="-1: num.partitions"
)
@click.option(
    "--replication-factor",
    "-r",
    type=int,
    default=-1,
    show_default=True,
    help="-1: default.replication.factor",
)
@click.option("--config", multiple=True, metavar="KEY=VALUE", help="a topic config (repeatable)")
@click.option("--validate-only", is_flag=True, help="check the request, create nothing")
@bootstrap_option
def topics_create(
    name: str,
    partitions: int,
    replication_factor: int,
    config: tuple[str, ...],
    validate_only: bool,
    bootstrap: str,
) -> None:
    """Create a topic (CreateTopics on the controller)."""
    configs = parse_pairs(config or [], "--config")

    async def go() -> Any:
        client = await open_client(bootstrap)
        try:
            return await client.create_topics(
                [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                validate_only=validate_only,
            )
        finally:
            await client.close()

    response = run(go())
    (topic,) = response.topics
    if int(topic.error_code):
        fail(error_text(topic.error_code, topic.error_message, name))
    click.echo(f"Created topic {name}." if not validate_only else f"Topic {name} is valid.")


@topics_app.command("list")
@exclude_internal_option
@bootstrap_option
def topics_list(exclude_internal: bool, bootstrap: str) -> None:
    """List the topics' names."""

    async def go() -> Any:
        client = await open_client(bootstrap)
        try:
            return await client.metadata(None)
        finally:
            await client.close()

    for topic in sorted(run(go()).topics, key=lambda t: t.name):
        if not (exclude_internal and topic.is_internal):
            click.echo(topic.name)


@topics_app.command("describe")
@click.argument("names", metavar="[TOPIC]...", nargs=-1)
@exclude_internal_option
@bootstrap_option
def topics_describe(names: tuple[str, ...], exclude_internal: bool, bootstrap: str) -> None:
    """Partitions (leader, epoch, replicas, ISR) and config overrides of topics.

    The topics named, else every topic (as kafka-topics --describe without --topic)."""
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    async def go() -> tuple[Any, dict[str, dict[str, str]]]:
        client = await open_client(bootstrap)
        try:
            metadata = await client.metadata(list(dict.fromkeys(names)) or None)
            found = [t.name for t in metadata.topics if not int(t.error_code)]
            configs: dict[str, dict[str, str]] = {}
            if found:
                response = await client.send(
                    ApiKey.DESCRIBE_CONFIGS,
                    request_builder(
                        ApiKey.DESCRIBE_CONFIGS,
                        resources=[
                            {"resource_type": 2, "resource_name": n, "configuration_keys": None}
                            for n in found
                        ],
                        include_synonyms=False,
                        include_documentation=False,
                    ),
                )
                for result in response.results:
                    configs[result.resource_name] = topic_overrides(result)
            return metadata, configs
        finally:
            await client.close()

    response, configs = run(go())
    table = new_table("Topic", "Partition", "Leader", "Epoch", "Replicas", "Isr", "Error")
    failed = False
    shown = [t for t in response.topics if not (exclude_internal and t.is_internal)]
    for topic in sorted(shown, key=lambda t: t.name):
        if int(topic.error_code):
            failed = True
            table.add_row(topic.name, "", "", "", "", "", error_name(topic.error_code))
            continue
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        overrides = configs.get(topic.name, {})
        replication = len(partitions[0].replica_nodes) if partitions else 0
        # Kafka's tab-separated header line, tabs kept (a console would expand them)
        click.echo(
            f"Topic: {topic.name}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {replication}\t"
            f"Configs: {','.join(f'{k}={v}' for k, v in sorted(overrides.items()))}"
        )
        for p in partitions:
            table.add_row(
                topic.name,
                str(p.partition_index),
                str(p.leader_id),
                str(getattr(p, "leader_epoch", -1)),
                ",".join(map(str, p.replica_nodes)),
                ",".join(map(str, p.isr_nodes)),
                error_name(p.error_code) if int(p.error_code) else "",
            )
    console.print(table)
    if failed:
        for topic in shown:
            if int(topic.error_code):
                click.echo(
                    f"{click.style('error:', fg='red')} "
                    f"{error_text(topic.error_code, None, topic.name)}",
                    err=True,
                )
        raise SystemExit(1)


def topic_overrides(result: Any) -> dict[str, str]:
    """The configs a DescribeConfigs result says are set on the topic itself (what
    kafka-topics --describe lists): config_source TOPIC_CONFIG, or not is_default in v0."""
    out = {}
    for entry in result.configs:
        source = getattr(entry, "config_source", None)
        own = source == 1 if source is not None else not getattr(entry, "is_default", True)
        if own and entry.value is not None:
            out[entry.name] = "<sensitive>" if entry.is_sensitive else entry.value
    return out


@topics_app.command("delete")
@click.argument("name", metavar="TOPIC")
@bootstrap_option
def topics_delete(name: str, bootstrap: str) -> None:
    """Delete a topic (DeleteTopics on the controller)."""

    async def go() -> Any:
        client = await open_client(bootstrap)
        try:
            return await client.delete_topics([name])
        finally:
            await client.close()

    (result,) = run(go()).responses
    if int(result.error_code):
        fail(error_text(result.error_code, getattr(result, "error_message", None), name))
    click.echo(f"Deleted topic {name}.")


@topics_app.command("alter")
@click.argument("name", metavar="TOPIC")
@click.option("--partitions", "-p", type=int, help="new partition count")
@click.option(
    "--config", multiple=True, metavar="KEY=VALUE", help="set a topic config (repeatable)"
)
@click.option(
    "--delete-config", multiple=True, metavar="KEY", help="remove a topic config override"
)
@bootstrap_option
def topics_alter(
    name: str,
    partitions: int | None,
    config: tuple[str, ...],
    delete_config: tuple[str, ...],
    bootstrap: str,
) -> None:
    """Add partitions, set or remove topic config overrides."""
    import datetime

    from kafkalite.client.client import CONTROLLER
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    configs = parse_pairs(config or [], "--config")
    if partitions is None and not configs and not delete_config:
        fail("nothing to alter: give --partitions, --config or --delete-config", 2)

    async def go() -> list[tuple[str, int, str | None]]:
        client = await open_client(bootstrap)
        outcomes = []
        try:
            if partitions is not None:
                response = await client.send(
                    ApiKey.CREATE_PARTITIONS,
                    request_builder(
                        ApiKey.CREATE_PARTITIONS,
                        topics=[{"name": name, "count": partitions, "assignments": None}],
                        timeout=datetime.timedelta(seconds=30),
                        validate_only=False,
                    ),
                    node_id=CONTROLLER,
                )
                r = response.results[0]
                outcomes.append(("partitions", int(r.error_code), r.error_message))
            if configs or delete_config:
                ops = [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]
                ops += [{"name": k, "config_operation": 1, "value": None} for k in delete_config]
                response = await client.send(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    request_builder(
                        ApiKey.INCREMENTAL_ALTER_CONFIGS,
                        resources=[{"resource_type": 2, "resource_name": name, "configs": ops}],
                        validate_only=False,
                    ),
                    node_id=CONTROLLER,
                )
                r = response.responses[0]
                outcomes.append(("configs", int(r.error_code), r.error_message))
        finally:
            await client.close()
        return outcomes

    for what, code, message in run(go()):
        if code:
            fail(f"{what}: {error_text(code, message, name)}")
        click.echo(f"Altered {what} of topic {name}.")
