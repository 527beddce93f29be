"""`kafkalite groups`: consumer groups over the HTTP admin API (admin_api.py).

    kafkalite groups list
    kafkalite groups describe GROUP                          members, offsets, lag
    kafkalite groups reset-offsets GROUP --to earliest|latest|timestamp|explicit
              [--topic T]... [--timestamp MS] [--offset TOPIC:PARTITION=OFFSET]... [--dry-run]
    kafkalite groups delete GROUP

``--admin-url`` and ``--json`` come after the subcommand (admin_api.py has their defaults).
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
    run,
)

groups_app = typer.Typer(
    help="Consumer groups: list, describe (lag), reset offsets, delete (admin API)",
    no_args_is_help=True,
)


@groups_app.command("list")
def groups_list(admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False) -> None:
    """Consumer groups coordinated by the broker behind --admin-url."""
    answer = run(admin_url, "GET", "/groups")
    if as_json:
        emit_json(answer)
        return
    table = Table("group", "state", "protocol type")
    for g in answer:
        table.add_row(g["group_id"], g["state"], g["protocol_type"])
    console().print(table)


@groups_app.command("describe")
def groups_describe(
    group: str, admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False
) -> None:
    """State, members and their assignments, committed offsets and lag per partition."""
    answer = run(admin_url, "GET", f"/groups/{urllib.request.quote(group, safe='')}")
    if as_json:
        emit_json(answer)
        return
    console().print(
        f"group {answer['group_id']}: {answer['state']}"
        f" (protocol {answer['protocol'] or '-'}, coordinator {answer['coordinator']}),"
        f" total lag {answer['total_lag']}"
    )
    owners = {}
    for m in answer["members"]:
        for a in m["assignment"]:
            for p in a["partitions"]:
                owners[(a["topic"], p)] = f"{m['client_id']} {m['member_id']} ({m['client_host']})"
    table = Table("topic", "partition", "committed", "high watermark", "lag", "member")
    for o in answer["offsets"]:
        table.add_row(
            o["topic"],
            str(o["partition"]),
            str(o["committed_offset"]),
            or_dash(o["high_watermark"]),
            or_dash(o["lag"]),
            owners.pop((o["topic"], o["partition"]), ""),
        )
    for (topic, partition), owner in sorted(owners.items()):
        table.add_row(topic, str(partition), "-", "-", "-", owner)
    console().print(table)


@groups_app.command("reset-offsets")
def groups_reset_offsets(
    group: str,
    to: Annotated[str, typer.Option("--to", help="earliest, latest, timestamp or explicit")],
    topic: Annotated[list[str] | None, typer.Option("--topic", help="(repeatable)")] = None,
    timestamp: Annotated[int | None, typer.Option("--timestamp", help="ms since the epoch")] = None,
    offset: Annotated[
        list[str] | None, typer.Option("--offset", help="TOPIC:PARTITION=OFFSET (repeatable)")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show, do not commit")] = False,
    admin_url: AdminUrl = DEFAULT_ADMIN_URL,
    as_json: JsonOutput = False,
) -> None:
    """Reset an inactive group's committed offsets (refused while it has members)."""
    body: dict[str, Any] = {"to": to, "dry_run": dry_run}
    if topic:
        body["topics"] = topic
    if timestamp is not None:
        body["timestamp"] = timestamp
    if offset:
        entries = []
        for item in offset:
            t, p, value = parse_assignment(item, "--offset")
            try:
                entries.append({"topic": t, "partition": p, "offset": int(value)})
            except ValueError:
                fail(f"offset must be an integer in {item!r}", 2)
        body["offsets"] = entries
    answer = run(admin_url, "POST", f"/groups/{urllib.request.quote(group, safe='')}/offsets", body)
    if as_json:
        emit_json(answer)
        return
    table = Table("topic", "partition", "new offset")
    for o in answer["offsets"]:
        table.add_row(o["topic"], str(o["partition"]), str(o["offset"]))
    console().print(table)
    console().print("dry run: nothing committed" if answer["dry_run"] else "committed")


@groups_app.command("delete")
def groups_delete(
    group: str, admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False
) -> None:
    """Delete an empty group and its committed offsets."""
    answer = run(admin_url, "DELETE", f"/groups/{urllib.request.quote(group, safe='')}")
    if as_json:
        emit_json(answer)
        return
    console().print(f"group {answer['group_id']} deleted")
