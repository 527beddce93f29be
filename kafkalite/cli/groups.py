"""`kafkalite groups`: consumer groups over the HTTP admin API (admin_api.py).

    kafkalite groups list
    kafkalite groups describe GROUP                          members, offsets, lag
    kafkalite groups reset-offsets GROUP --to earliest|latest|timestamp|explicit
              [--topic T]... [--timestamp MS] [--offset TOPIC:PARTITION=OFFSET]... [--dry-run]
    kafkalite groups delete GROUP

``--admin-url`` and ``--json`` come after the subcommand (admin_api.py has their defaults).
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
    quote,
    run,
)
from kafkalite.cli.common import Group


@click.group("groups", cls=Group)
def groups_app() -> None:
    """Consumer groups: list, describe (lag), reset offsets, delete (admin API)."""


@groups_app.command("list")
@admin_url_option
@json_option
def groups_list(admin_url: str, as_json: bool) -> None:
    """Consumer groups coordinated by the broker behind --admin-url."""
    answer = run(admin_url, "GET", "/groups")
    if as_json:
        emit_json(answer)
        return
    table = new_table("group", "state", "protocol type")
    for g in answer:
        table.add_row(g["group_id"], g["state"], g["protocol_type"])
    console().print(table)


@groups_app.command("describe")
@click.argument("group")
@admin_url_option
@json_option
def groups_describe(group: str, admin_url: str, as_json: bool) -> None:
    """State, members and their assignments, committed offsets and lag per partition."""
    answer = run(admin_url, "GET", f"/groups/{quote(group)}")
    if as_json:
        emit_json(answer)
        return
    click.echo(
        f"group {answer['group_id']}: {answer['state']}"
        f" (protocol {answer['protocol'] or '-'}, coordinator {answer['coordinator']}),"
        f" total lag {answer['total_lag']}"
    )
    owners = {}
    for m in answer["members"]:
        for a in m["assignment"]:
            for p in a["partitions"]:
                owners[(a["topic"], p)] = f"{m['client_id']} {m['member_id']} ({m['client_host']})"
    table = new_table("topic", "partition", "committed", "high watermark", "lag", "member")
    for o in answer["offsets"]:
        table.add_row(
            o["topic"],
            str(o["partition"]),
            or_dash(o["committed_offset"]),
            or_dash(o["high_watermark"]),
            or_dash(o["lag"]),
            owners.pop((o["topic"], o["partition"]), ""),
        )
    for (topic, partition), owner in sorted(owners.items()):
        table.add_row(topic, str(partition), "-", "-", "-", owner)
    console().print(table)


@groups_app.command("reset-offsets")
@click.argument("group")
@click.option(
    "--to",
    required=True,
    type=click.Choice(["earliest", "latest", "timestamp", "explicit"]),
    help="where to move the offsets",
)
@click.option("--topic", multiple=True, metavar="TOPIC", help="only this topic (repeatable)")
@click.option(
    "--timestamp",
    metavar="TIME",
    callback=lambda ctx, param, value: None if value is None else epoch_ms(value),
    help="with --to timestamp: ISO-8601 (2026-11-27T13:05:09Z, UTC if no zone) or ms since "
    "the epoch",
)
@click.option(
    "--offset",
    multiple=True,
    metavar="TOPIC:PARTITION=OFFSET",
    help="with --to explicit (repeatable)",
)
@click.option("--dry-run", is_flag=True, help="show, do not commit")
@admin_url_option
@json_option
def groups_reset_offsets(
    group: str,
    to: str,
    topic: tuple[str, ...],
    timestamp: int | None,
    offset: tuple[str, ...],
    dry_run: bool,
    admin_url: str,
    as_json: bool,
) -> None:
    """Reset an inactive group's committed offsets (refused while it has members)."""
    body: dict[str, Any] = {"to": to, "dry_run": dry_run}
    if topic:
        body["topics"] = list(topic)
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
    answer = run(admin_url, "POST", f"/groups/{quote(group)}/offsets", body)
    if as_json:
        emit_json(answer)
        return
    table = new_table("topic", "partition", "new offset")
    for o in answer["offsets"]:
        table.add_row(o["topic"], str(o["partition"]), str(o["offset"]))
    console().print(table)
    click.echo("dry run: nothing committed" if answer["dry_run"] else "committed")


def epoch_ms(text: str) -> int:
    """``--timestamp``: milliseconds since the epoch, or an ISO-8601 time (UTC when it names no
    zone), as kafka-consumer-groups' --to-datetime."""
    import datetime

    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither ISO-8601 (2026-11-27T13:05:09Z) nor ms since the epoch"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


@groups_app.command("delete")
@click.argument("group")
@admin_url_option
@json_option
def groups_delete(group: str, admin_url: str, as_json: bool) -> None:
    """Delete an empty group and its committed offsets."""
    answer = run(admin_url, "DELETE", f"/groups/{quote(group)}")
    if as_json:
        emit_json(answer)
        return
    click.echo(f"group {answer['group_id']} deleted")
