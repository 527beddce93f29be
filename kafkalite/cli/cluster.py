"""`kafkalite cluster`: the cluster, its brokers, partition reassignments and leader elections,
over the HTTP admin API (admin_api.py).

    kafkalite cluster [--admin-url URL] [--json]            cluster id, controller, brokers
    kafkalite cluster brokers
    kafkalite cluster topics [TOPIC ...]                    partitions with ISR, offsets, size
    kafkalite cluster reassign TOPIC:PARTITION=B1,B2,...    (repeatable)
    kafkalite cluster reassignments
    kafkalite cluster elect-leaders [--type preferred|unclean] [TOPIC:PARTITION ...]

``--admin-url`` and ``--json`` may be given before or after the subcommand.
"""

from __future__ import annotations

from typing import Any

import click

from kafkalite.cli.admin_api import (
    admin_url_option,
    console,
    emit_json,
    fail,
    json_option,
    new_table,
    or_dash,
    parse_assignment,
    parse_partition,
    quote,
    run,
)
from kafkalite.cli.common import Group, bootstrap_option

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def given(ctx: click.Context, name: str) -> bool:
    """Whether option ``name`` was on the command line (not its default, nor the env var)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def inherited(ctx: click.Context, admin_url: str, as_json: bool) -> tuple[str, bool]:
    """A cluster subcommand's --admin-url and --json, given after it or before it
    (`kafkalite cluster --admin-url URL brokers`); given in both places, they must agree."""
    parent = ctx.obj if isinstance(ctx.obj, dict) else {}
    outer_url = parent.get("admin_url")
    if outer_url is not None:
        if given(ctx, "admin_url") and admin_url != outer_url:
            fail(f"--admin-url given twice: {outer_url!r} and {admin_url!r}", 2)
        admin_url = outer_url
    return admin_url, as_json or bool(parent.get("json"))


def print_brokers(brokers: list[dict[str, Any]]) -> None:
    table = new_table("id", "host", "port", "rack", "controller", "listeners")
    for b in brokers:
        table.add_row(
            str(b["id"]),
            or_dash(b["host"]),
            or_dash(b["port"]),
            or_dash(b["rack"]),
            "yes" if b["is_controller"] else "",
            ", ".join(f"{e['listener']}://{e['host']}:{e['port']}" for e in b["endpoints"]),
        )
    console().print(table)


@click.group("cluster", cls=Group, invoke_without_command=True)
@admin_url_option
@json_option
@click.pass_context
def cluster_app(ctx: click.Context, admin_url: str, as_json: bool) -> None:
    """Cluster, brokers, reassignment and leader elections (admin API).

    Without a subcommand: the cluster id, the active controller and its epoch, the registered
    brokers. --admin-url and --json may be given here or after a subcommand."""
    if ctx.invoked_subcommand is not None:
        # Handed to the subcommand (see inherited): ignoring them would act on whatever
        # cluster answers at the default address.
        ctx.obj = {"admin_url": admin_url if given(ctx, "admin_url") else None, "json": as_json}
        return
    answer = run(admin_url, "GET", "/cluster")
    if as_json:
        emit_json(answer)
        return
    controller = answer["controller"]
    click.echo(f"cluster id: {answer['cluster_id']}")
    click.echo(f"controller: broker {controller['broker_id']} (epoch {controller['epoch']})")
    print_brokers(answer["brokers"])


@cluster_app.command("brokers")
@admin_url_option
@json_option
@click.pass_context
def cluster_brokers(ctx: click.Context, admin_url: str, as_json: bool) -> None:
    """List the registered brokers."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    answer = run(admin_url, "GET", "/brokers")
    if as_json:
        emit_json(answer)
    else:
        print_brokers(answer)


@cluster_app.command("topics")
@click.argument("names", metavar="[TOPIC]...", nargs=-1)
@click.option(
    "--exclude-internal",
    is_flag=True,
    help="leave out internal topics (__consumer_offsets, __transaction_state)",
)
@admin_url_option
@json_option
@click.pass_context
def cluster_topics(
    ctx: click.Context,
    names: tuple[str, ...],
    exclude_internal: bool,
    admin_url: str,
    as_json: bool,
) -> None:
    """Partitions with leader, replicas, ISR, leader epoch, offsets and size on disk.

    Every topic when none is named, user topics first and then the internal ones."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    if names:
        chosen = list(names)
    else:
        listed = run(admin_url, "GET", "/topics")
        chosen = [t["name"] for t in listed if not t.get("internal")]
        chosen += [t["name"] for t in listed if t.get("internal")]
    topics = [run(admin_url, "GET", f"/topics/{quote(n)}") for n in chosen]
    if exclude_internal:
        topics = [t for t in topics if not is_internal(t)]
    if as_json:
        emit_json(topics)
        return
    table = new_table(
        "topic", "partition", "leader", "epoch", "replicas", "isr",
        "log start", "high watermark", "log end", "bytes",
    )  # fmt: skip
    for topic in topics:
        for p in topic["partitions"]:
            table.add_row(
                topic["name"],
                str(p["partition"]),
                str(p["leader"]) if p["leader"] >= 0 else "[red]none[/red]",
                str(p["leader_epoch"]),
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
                or_dash(p["log_start_offset"]),
                or_dash(p["high_watermark"]),
                or_dash(p["log_end_offset"]),
                or_dash(p["size_bytes"]),
            )
    console().print(table)


def is_internal(topic: dict[str, Any]) -> bool:
    return bool(topic.get("internal", topic["name"] in INTERNAL_TOPICS))


@cluster_app.command("reassign")
@click.argument("moves", metavar="TOPIC:PARTITION=BROKER,BROKER,...", nargs=-1, required=True)
@admin_url_option
@json_option
@click.pass_context
def cluster_reassign(
    ctx: click.Context, moves: tuple[str, ...], admin_url: str, as_json: bool
) -> None:
    """Start a partition reassignment (written to /admin/reassign_partitions)."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    partitions = []
    for move in moves:
        topic, partition, brokers = parse_assignment(move, "reassign")
        try:
            replicas = [int(b) for b in brokers.split(",") if b.strip()]
        except ValueError:
            fail(f"replicas must be broker ids in {move!r}", 2)
        partitions.append({"topic": topic, "partition": partition, "replicas": replicas})
    answer = run(admin_url, "POST", "/partitions/reassign", {"partitions": partitions})
    if as_json:
        emit_json(answer)
        return
    click.echo(f"reassignment of {len(answer['partitions'])} partition(s) submitted")


@cluster_app.command("reassignments")
@admin_url_option
@json_option
@click.pass_context
def cluster_reassignments(ctx: click.Context, admin_url: str, as_json: bool) -> None:
    """Pending and ongoing partition reassignments."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    answer = run(admin_url, "GET", "/partitions/reassign")
    if as_json:
        emit_json(answer)
        return
    if not answer["pending"] and not answer["ongoing"]:
        click.echo("No partition reassignment is pending or in progress.")
        return
    table = new_table("topic", "partition", "state", "replicas", "adding", "removing")
    for p in answer["pending"]:
        table.add_row(p["topic"], str(p["partition"]), "pending", str(p["replicas"]), "", "")
    for p in answer["ongoing"]:
        table.add_row(
            p["topic"],
            str(p["partition"]),
            "ongoing",
            str(p["replicas"]),
            str(p["adding_replicas"]),
            str(p["removing_replicas"]),
        )
    console().print(table)


@cluster_app.command("elect-leaders")
@click.argument("partitions", metavar="[TOPIC:PARTITION]...", nargs=-1)
@click.option(
    "--type",
    "election_type",
    type=click.Choice(["preferred", "unclean"]),
    default="preferred",
    show_default=True,
    help="preferred: leadership back to the first assigned replica; unclean: a leader for "
    "partitions without one, from outside the ISR if need be",
)
@bootstrap_option
@json_option
@click.pass_context
def cluster_elect_leaders(
    ctx: click.Context,
    partitions: tuple[str, ...],
    election_type: str,
    bootstrap: str,
    as_json: bool,
) -> None:
    """Elect leaders (ElectLeaders, as kafka-leader-election.sh) and say which partitions got one.

    Every partition when none is named: those whose leader is already the right one are left
    out, as Kafka's controller answers. Over the Kafka protocol (--bootstrap-server); a named
    partition that needed no election is reported as such. Exit status 1 when a partition could
    not be elected."""
    _, as_json = inherited(ctx, "", as_json)
    named = [parse_partition(x) for x in partitions]
    results = elect_leaders(bootstrap, election_type, named or None)
    if as_json:
        emit_json(results)
        return
    kind = election_type.upper()
    elected = [r for r in results if r["error"] is None]
    not_needed = [r for r in results if r["error"] == "ELECTION_NOT_NEEDED"]
    failed = [r for r in results if r["error"] not in (None, "ELECTION_NOT_NEEDED")]

    def names(rows: list[dict[str, Any]]) -> str:
        return ", ".join(f"{r['topic']}-{r['partition']}" for r in rows)

    if elected:
        click.echo(
            f"Successfully completed leader election ({kind}) for partitions {names(elected)}"
        )
    if not_needed:
        click.echo(f"Valid replica already elected for partitions {names(not_needed)}")
    if not results:
        click.echo(f"No partition needed a {election_type} leader election.")
    for r in failed:
        click.echo(
            f"Error completing leader election ({kind}) for partition {r['topic']}-"
            f"{r['partition']}: {r['error']}: {r['message']}"
        )
    if failed:
        fail(f"{len(failed)} partition(s) could not be elected")


def elect_leaders(
    bootstrap: str, election_type: str, partitions: list[tuple[str, int]] | None
) -> list[dict[str, Any]]:
    """ElectLeaders v2 to the controller: one row per partition in its answer (topic,
    partition, error name or None, message), sorted."""
    import datetime

    from kafkalite.cli.common import open_client, without_error_name
    from kafkalite.cli.common import run as run_protocol
    from kafkalite.client.client import CONTROLLER
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey
    from kafkalite.protocol.errors import ErrorCode

    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or []:
        by_topic.setdefault(topic, []).append(partition)

    async def go() -> Any:
        client = await open_client(bootstrap)
        try:
            return await client.send(
                ApiKey.ELECT_LEADERS,
                request_builder(
                    ApiKey.ELECT_LEADERS,
                    election_type=0 if election_type == "preferred" else 1,
                    topic_partitions=None
                    if partitions is None
                    else [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                    timeout=datetime.timedelta(seconds=30),
                ),
                node_id=CONTROLLER,
            )
        finally:
            await client.close()

    response = run_protocol(go())
    top = int(getattr(response, "error_code", 0))
    if top:
        error = ErrorCode.of(top)
        fail(f"{error.name}: {error.message}")
    rows = []
    for result in response.replica_election_results:
        for p in result.partition_result:
            code = int(p.error_code)
            name = ErrorCode.of(code).name if code else None
            rows.append(
                {
                    "topic": result.topic,
                    "partition": p.partition_id,
                    "error": name,
                    "message": without_error_name(p.error_message, name) if name else None,
                }
            )
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))
