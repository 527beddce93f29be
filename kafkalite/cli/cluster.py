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

import urllib.request
from typing import Annotated, Any

import typer
from rich.table import Table

from kafkalite.cli.admin_api import (
    DEFAULT_ADMIN_URL,
    AdminUrl,
    JsonOutput,
    console,
    emit_json,
    fail,
    or_dash,
    parse_assignment,
    parse_partition,
    run,
)

cluster_app = typer.Typer(
    help="Cluster, brokers, reassignment and leader elections (admin API)",
    invoke_without_command=True,
)


def given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was on the command line (not its default, nor the env var)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def inherited(ctx: typer.Context, admin_url: str, as_json: bool) -> tuple[str, bool]:
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
    table = Table("id", "host", "port", "rack", "controller", "listeners")
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


@cluster_app.callback()
def cluster(
    ctx: typer.Context, admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False
) -> None:
    """Show the cluster: id, active controller and epoch, registered brokers.

    --admin-url and --json may be given here or after a subcommand."""
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
    console().print(f"cluster id: {answer['cluster_id']}")
    console().print(f"controller: broker {controller['broker_id']} (epoch {controller['epoch']})")
    print_brokers(answer["brokers"])


@cluster_app.command("brokers")
def cluster_brokers(
    ctx: typer.Context, admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False
) -> None:
    """List the registered brokers."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    answer = run(admin_url, "GET", "/brokers")
    if as_json:
        emit_json(answer)
    else:
        print_brokers(answer)


@cluster_app.command("topics")
def cluster_topics(
    ctx: typer.Context,
    names: Annotated[list[str] | None, typer.Argument(help="topics (default: all)")] = None,
    admin_url: AdminUrl = DEFAULT_ADMIN_URL,
    as_json: JsonOutput = False,
) -> None:
    """Partitions with leader, replicas, ISR, leader epoch, offsets and size on disk."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    if not names:
        names = [t["name"] for t in run(admin_url, "GET", "/topics")]
    topics = [run(admin_url, "GET", f"/topics/{urllib.request.quote(n, safe='')}") for n in names]
    if as_json:
        emit_json(topics)
        return
    table = Table(
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


@cluster_app.command("reassign")
def cluster_reassign(
    ctx: typer.Context,
    moves: Annotated[list[str], typer.Argument(help="TOPIC:PARTITION=BROKER,BROKER,...")],
    admin_url: AdminUrl = DEFAULT_ADMIN_URL,
    as_json: JsonOutput = False,
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
    console().print(f"reassignment of {len(answer['partitions'])} partition(s) submitted")


@cluster_app.command("reassignments")
def cluster_reassignments(
    ctx: typer.Context, admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False
) -> None:
    """Pending and ongoing partition reassignments."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    answer = run(admin_url, "GET", "/partitions/reassign")
    if as_json:
        emit_json(answer)
        return
    table = Table("topic", "partition", "state", "replicas", "adding", "removing")
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
def cluster_elect_leaders(
    ctx: typer.Context,
    partitions: Annotated[
        list[str] | None, typer.Argument(help="TOPIC:PARTITION ... (default: all)")
    ] = None,
    election_type: Annotated[
        str, typer.Option("--type", help="preferred or unclean")
    ] = "preferred",
    admin_url: AdminUrl = DEFAULT_ADMIN_URL,
    as_json: JsonOutput = False,
) -> None:
    """Ask the controller for a preferred (or unclean) leader election."""
    admin_url, as_json = inherited(ctx, admin_url, as_json)
    body: dict[str, Any] = {"election_type": election_type}
    if partitions:
        body["partitions"] = [
            {"topic": t, "partition": p} for t, p in (parse_partition(x) for x in partitions)
        ]
    answer = run(admin_url, "POST", "/partitions/elect-leaders", body)
    if as_json:
        emit_json(answer)
        return
    console().print(
        f"{answer['election_type']} leader election requested for "
        f"{len(answer['partitions'])} partition(s)"
    )
