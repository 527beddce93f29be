"""`kafkalite groups`: groups over the HTTP admin API (admin_api.py): classic groups, consumer
groups of the KIP-848 protocol and share groups (KIP-932), as Kafka's kafka-consumer-groups.sh
and kafka-share-groups.sh show them.

    kafkalite groups list [--type classic|consumer|share]   type, state, members, lag
    kafkalite groups describe GROUP                          offsets and lag (a share group:
                                                             each share-partition's window and
                                                             in-flight records), then members
    kafkalite groups reset-offsets GROUP --to earliest|latest|timestamp|explicit
              [--topic T]... [--timestamp MS] [--offset TOPIC:PARTITION=OFFSET]... [--dry-run]
                                                             (a share group: its share-partitions'
                                                             start offsets)
    kafkalite groups delete-offsets GROUP --topic T...       a share group starts again at
                                                             share.auto.offset.reset
    kafkalite groups delete GROUP                            (a share group: its state too)

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
    """Groups (classic, consumer, share): list, describe (lag), reset offsets, delete."""


@groups_app.command("list")
@click.option(
    "--type",
    "group_type",
    type=click.Choice(["classic", "consumer", "share"]),
    help="only groups of this type",
)
@admin_url_option
@json_option
def groups_list(group_type: str | None, admin_url: str, as_json: bool) -> None:
    """Every group of the cluster with its type, state, members and total lag (a share group
    has no committed offsets: no lag)."""
    answer = run(admin_url, "GET", "/groups" + (f"?type={group_type}" if group_type else ""))
    if as_json:
        emit_json(answer)
        return
    table = new_table("group", "type", "state", "protocol type", "members", "lag")
    for g in answer:
        table.add_row(
            g["group_id"],
            g.get("group_type") or "classic",
            g["state"],
            g["protocol_type"] or "-",
            or_dash(g.get("members")),
            or_dash(g.get("total_lag")),
        )
    console().print(table)


@groups_app.command("describe")
@click.argument("group")
@admin_url_option
@json_option
def groups_describe(group: str, admin_url: str, as_json: bool) -> None:
    """Type, state, committed offsets and lag per partition (a share group: each
    share-partition's start and end offset and its in-flight records by state: who holds the
    acquired ones and until when, where the partition's leader is the broker asked), then the members with their assignments (a consumer or
    share group: their epochs; a consumer group: their target assignments)."""
    answer = run(admin_url, "GET", f"/groups/{quote(group)}")
    if as_json:
        emit_json(answer)
        return
    group_type = answer.get("group_type") or "classic"
    if group_type == "classic":
        detail = f"protocol {answer['protocol'] or '-'}"
    else:
        detail = (
            f"group epoch {answer.get('group_epoch')}, assignment epoch "
            f"{answer.get('assignment_epoch')}, assignor {answer.get('assignor') or '-'}"
        )
    lag = "" if group_type == "share" else f", total lag {answer['total_lag']}"
    click.echo(
        f"{group_type} group {answer['group_id']}: {answer['state']}"
        f" ({detail}, coordinator {answer['coordinator']}){lag}"
    )
    if group_type == "share":
        _share_tables(answer)
        _members_table(answer, group_type)
        return
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
    _members_table(answer, group_type)


def _share_tables(answer: dict[str, Any]) -> None:
    """Each share-partition's window (start and end offset, which view, records per state),
    then its in-flight ranges (as kafka-share-groups --describe --offsets, and what only the
    partition's leader knows: who holds each acquired range and until when)."""
    rows = answer.get("share_offsets") or []
    table = new_table("topic", "partition", "start offset", "end offset", "view", "in flight")
    for o in rows:
        counts: dict[str, int] = {}
        for r in o.get("in_flight") or []:
            counts[r["state"]] = (
                counts.get(r["state"], 0) + r["last_offset"] - r["first_offset"] + 1
            )
        summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or (
            "none" if o.get("in_flight") is not None else "-"
        )
        view = o.get("view") or "-"
        if o.get("leader") is not None:
            view += f" (leader {o['leader']})"
        table.add_row(
            o["topic"],
            str(o["partition"]),
            or_dash(o["start_offset"]) + _error(o),
            or_dash(o.get("end_offset")),
            view,
            summary,
        )
    console().print(table)
    ranges = [(o, r) for o in rows for r in o.get("in_flight") or []]
    if not ranges:
        return
    clients = {m["member_id"]: m["client_id"] for m in answer.get("members") or []}
    table = new_table(
        "topic", "partition", "offsets", "state", "deliveries", "member", "lock expires"
    )
    for o, r in ranges:
        first, last = r["first_offset"], r["last_offset"]
        member = r.get("member_id")
        table.add_row(
            o["topic"],
            str(o["partition"]),
            str(first) if first == last else f"{first}-{last}",
            r["state"],
            str(r["delivery_count"]),
            f"{clients.get(member, '')} {member}".strip() if member else "-",
            _expiry(r.get("lock_expires_ms")),
        )
    console().print(table)


def _expiry(ms: int | None) -> str:
    if ms is None:
        return "-"
    import datetime
    import time

    at = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%H:%M:%S UTC")
    return f"{at} (in {max(0, round(ms / 1000 - time.time()))} s)"


def _error(row: dict[str, Any]) -> str:
    return f" ({row['error']})" if row.get("error") else ""


def _assignment_text(assignment: list[dict[str, Any]] | None) -> str:
    if not assignment:
        return "-"
    return ", ".join(
        f"{a['topic']}:{','.join(str(p) for p in a['partitions'])}" for a in assignment
    )


def _members_table(answer: dict[str, Any], group_type: str) -> None:
    """kafka-consumer-groups --describe --members (--verbose for the epochs and targets) and
    kafka-share-groups --describe --members."""
    if not answer["members"]:
        click.echo("no active members")
        return
    columns = ["member", "client id", "host", "#partitions", "assignment"]
    if group_type != "classic":
        columns.insert(3, "epoch")
    if group_type == "consumer":
        columns.append("target assignment")
    table = new_table(*columns)
    for m in answer["members"]:
        assignment = m.get("assignment") or []
        row = [
            m["member_id"] + (f" ({m['group_instance_id']})" if m.get("group_instance_id") else ""),
            m["client_id"],
            m["client_host"],
            str(sum(len(a["partitions"]) for a in assignment)),
            _assignment_text(assignment),
        ]
        if group_type != "classic":
            row.insert(3, or_dash(m.get("member_epoch")))
        if group_type == "consumer":
            row.append(_assignment_text(m.get("target_assignment")))
        table.add_row(*row)
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
    """Reset an inactive group's committed offsets, or a share group's start offsets (as
    kafka-share-groups --reset-offsets); refused while the group has members."""
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
    share = answer.get("group_type") == "share"
    if answer["dry_run"]:
        click.echo("dry run: nothing " + ("altered" if share else "committed"))
    else:
        click.echo("share-partitions' start offsets altered" if share else "committed")


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


@groups_app.command("delete-offsets")
@click.argument("group")
@click.option(
    "--topic",
    multiple=True,
    required=True,
    metavar="TOPIC",
    help="every partition of this topic (repeatable)",
)
@admin_url_option
@json_option
def groups_delete_offsets(
    group: str, topic: tuple[str, ...], admin_url: str, as_json: bool
) -> None:
    """Delete a group's offsets of whole topics: a share group's share-partition state (it must
    have no members; it starts again at share.auto.offset.reset, as kafka-share-groups
    --delete-offsets), a consumer group's committed offsets (OffsetDelete, as
    kafka-consumer-groups --delete-offsets: not of a topic its members subscribe to)."""
    from urllib.parse import quote as quote_query

    topics = quote_query(",".join(topic), safe=",")
    answer = run(admin_url, "DELETE", f"/groups/{quote(group)}/offsets?topic={topics}")
    if as_json:
        emit_json(answer)
        return
    click.echo(
        f"{answer['group_type']} group {answer['group_id']}: offsets of "
        f"{', '.join(answer['topics'])} deleted"
    )


@groups_app.command("delete")
@click.argument("group")
@admin_url_option
@json_option
def groups_delete(group: str, admin_url: str, as_json: bool) -> None:
    """Delete an empty group and its committed offsets (a share group: its share-partitions'
    state too)."""
    answer = run(admin_url, "DELETE", f"/groups/{quote(group)}")
    if as_json:
        emit_json(answer)
        return
    click.echo(f"group {answer['group_id']} deleted")
