"""Operator commands over the HTTP admin API (thin clients: one HTTP call each, then a table).

    kafkalite cluster [--admin-url URL] [--json]            cluster id, controller, brokers
    kafkalite cluster brokers
    kafkalite cluster topics [TOPIC ...]                    partitions with ISR, offsets, size
    kafkalite cluster reassign TOPIC:PARTITION=B1,B2,...    (repeatable)
    kafkalite cluster reassignments
    kafkalite cluster elect-leaders [--type preferred|unclean] [TOPIC:PARTITION ...]
    kafkalite groups list
    kafkalite groups describe GROUP                          members, offsets, lag
    kafkalite groups reset-offsets GROUP --to earliest|latest|timestamp|explicit
              [--topic T]... [--timestamp MS] [--offset TOPIC:PARTITION=OFFSET]... [--dry-run]
    kafkalite groups delete GROUP
    kafkalite transactions list                             ids coordinated by that broker
    kafkalite transactions describe TRANSACTIONAL_ID
    kafkalite transactions abort TRANSACTIONAL_ID           fence and abort its open transaction
    kafkalite transactions abort --topic T --partition P --start-offset O [-b HOST:PORT]
              a hanging transaction (KIP-664, as kafka-transactions.sh): the producer whose
              open transaction starts at O in T-P is found with DescribeProducers and an ABORT
              marker is written with WriteTxnMarkers, over the Kafka protocol

`--admin-url` defaults to $KAFKALITE_ADMIN_URL, else http://127.0.0.1:9644 (the broker's
`admin.listener`). `--json` prints the API's JSON answer as is. Exit status: 0 on success, 1 when
the API answered an error (its code and message are printed) or cannot be reached, 2 on usage
errors.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

DEFAULT_ADMIN_URL = "http://127.0.0.1:9644"
TIMEOUT_S = 60.0

err_console = Console(stderr=True, soft_wrap=True)
PIPE_WIDTH = 250
"""Width of tables written to a pipe or file: as wide as their content, never wrapped at 80."""


def console() -> Console:
    """A console on the current stdout: the terminal's width there, else PIPE_WIDTH."""
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)


def checked_admin_url(value: str | None) -> str | None:
    """``--admin-url`` must be http(s)://host[:port][/prefix]; anything else is a usage error
    naming the option (urllib's own messages, 'unknown url type', 'nonnumeric port', said
    nothing about where the bad value came from)."""
    if value is None:
        return value
    problem = None
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as e:
        problem = str(e)
    else:
        if parts.scheme not in ("http", "https"):
            problem = "expected http://host:port"
        elif not parts.hostname:
            problem = "no host"
        elif parts.query or parts.fragment:
            problem = "a base URL takes no query or fragment"
    if problem is not None:
        fail(
            f"--admin-url: {value!r} is not an admin API URL ({problem}), e.g. {DEFAULT_ADMIN_URL}",
            2,
        )
    return value


AdminUrl = Annotated[
    str,
    typer.Option(
        "--admin-url",
        envvar="KAFKALITE_ADMIN_URL",
        help="base URL of any broker's admin API (admin.listener)",
        callback=checked_admin_url,
    ),
]
JsonOutput = Annotated[bool, typer.Option("--json", help="print the API's JSON answer")]

cluster_app = typer.Typer(
    help="Cluster, brokers, reassignment and leader elections (admin API)",
    invoke_without_command=True,
)
groups_app = typer.Typer(
    help="Consumer groups: list, describe (lag), reset offsets, delete (admin API)",
    no_args_is_help=True,
)


transactions_app = typer.Typer(
    help="Transactions: list, describe, abort (admin API; hanging ones over the Kafka protocol)",
    no_args_is_help=True,
)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def call(admin_url: str, method: str, path: str, body: Any = None) -> Any:
    """One request to the admin API; the decoded JSON answer. Raises ApiError or exits 1."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(admin_url.rstrip("/") + path, method=method, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        payload = e.read()
        try:
            answer = json.loads(payload)
            raise ApiError(e.code, answer.get("error", str(e.code)), answer.get("message", ""))
        except (json.JSONDecodeError, AttributeError):
            raise ApiError(e.code, str(e.code), payload.decode(errors="replace")[:200]) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        fail(f"cannot reach the admin API at {admin_url}: {reason}")


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def run(admin_url: str, method: str, path: str, body: Any = None) -> Any:
    try:
        return call(admin_url, method, path, body)
    except ApiError as e:
        fail(f"{e.code} (HTTP {e.status}): {e.message}")


def emit_json(answer: Any) -> None:
    typer.echo(json.dumps(answer, indent=2))


def _null(value: Any) -> str:
    return "-" if value is None else str(value)


def parse_partition(text: str) -> tuple[str, int]:
    topic, sep, partition = text.rpartition(":")
    if not sep or not topic:
        fail(f"expected TOPIC:PARTITION, got {text!r}", 2)
    try:
        return topic, int(partition)
    except ValueError:
        fail(f"partition must be an integer in {text!r}", 2)
    raise AssertionError  # unreachable


def parse_assignment(text: str, what: str) -> tuple[str, int, str]:
    left, sep, right = text.partition("=")
    if not sep:
        fail(f"{what} expects TOPIC:PARTITION=VALUE, got {text!r}", 2)
    topic, partition = parse_partition(left)
    return topic, partition, right


# ---------------------------------------------------------------------- cluster


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
            _null(b["host"]),
            _null(b["port"]),
            _null(b["rack"]),
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
                _null(p["log_start_offset"]),
                _null(p["high_watermark"]),
                _null(p["log_end_offset"]),
                _null(p["size_bytes"]),
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


# ---------------------------------------------------------------------- groups


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
            _null(o["high_watermark"]),
            _null(o["lag"]),
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


# ---------------------------------------------------------------------- transactions


@transactions_app.command("list")
def transactions_list(admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False) -> None:
    """Transactional ids coordinated by the broker behind --admin-url."""
    answer = run(admin_url, "GET", "/transactions")
    if as_json:
        emit_json(answer)
        return
    table = Table("transactional id", "producer id", "state")
    for t in answer:
        table.add_row(t["transactional_id"], str(t["producer_id"]), t["state"])
    console().print(table)


@transactions_app.command("describe")
def transactions_describe(
    transactional_id: str, admin_url: AdminUrl = DEFAULT_ADMIN_URL, as_json: JsonOutput = False
) -> None:
    """State, producer id and epoch, timeout, start time and partitions of a transaction."""
    answer = run(
        admin_url, "GET", f"/transactions/{urllib.request.quote(transactional_id, safe='')}"
    )
    if as_json:
        emit_json(answer)
        return
    table = Table(
        "transactional id",
        "coordinator",
        "state",
        "producer id",
        "epoch",
        "timeout ms",
        "start time ms",
        "partitions",
    )
    table.add_row(
        answer["transactional_id"],
        str(answer["coordinator"]),
        answer["state"],
        str(answer["producer_id"]),
        str(answer["producer_epoch"]),
        str(answer["timeout_ms"]),
        str(answer["start_time_ms"]),
        ",".join(f"{p['topic']}-{p['partition']}" for p in answer["partitions"]) or "-",
    )
    console().print(table)


@transactions_app.command("abort")
def transactions_abort(
    transactional_id: Annotated[str | None, typer.Argument()] = None,
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition")] = None,
    start_offset: Annotated[int | None, typer.Option("--start-offset")] = None,
    bootstrap: Annotated[
        str, typer.Option("--bootstrap-server", "-b", help="host:port of any broker")
    ] = "127.0.0.1:9092",
    admin_url: AdminUrl = DEFAULT_ADMIN_URL,
) -> None:
    """Abort an open transaction by id, or a hanging one by topic, partition, start offset.

    By transactional id, its coordinator fences the producer and aborts (admin API); with
    --topic/--partition/--start-offset the partition's leader writes the ABORT marker
    (KIP-664, as kafka-transactions.sh abort)."""
    hanging = (topic, partition, start_offset)
    if transactional_id is not None and any(v is not None for v in hanging):
        fail("give a transactional id or --topic/--partition/--start-offset, not both", 2)
    if transactional_id is not None:
        run(
            admin_url,
            "POST",
            f"/transactions/{urllib.request.quote(transactional_id, safe='')}/abort",
        )
        console().print(f"aborted the open transaction of {transactional_id}")
        return
    if any(v is None for v in hanging):
        fail("give a transactional id, or --topic, --partition and --start-offset", 2)
    import asyncio

    try:
        pid = asyncio.run(abort_hanging(bootstrap, topic, partition, start_offset))  # type: ignore[arg-type]
    except (OSError, ConnectionError) as e:
        fail(f"cannot reach the broker at {bootstrap}: {e}")
    except HangingAbortError as e:
        fail(str(e))
    console().print(
        f"aborted the transaction of producer {pid} starting at offset {start_offset} "
        f"of {topic}-{partition}"
    )


class HangingAbortError(Exception):
    pass


async def abort_hanging(bootstrap: str, topic: str, partition: int, start_offset: int) -> int:
    """kafka-transactions.sh abort: DescribeProducers on the partition's leader names the
    producer whose open transaction starts at ``start_offset``; WriteTxnMarkers to that leader
    writes an ABORT marker with its id, epoch and coordinator epoch. Returns the producer id."""
    from kafkalite.client.client import KafkaClient
    from kafkalite.protocol.api import ApiKey
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.types import TopicPartition

    client = KafkaClient(bootstrap, client_id="kafkalite-cli")
    await client.start()
    try:
        await client.refresh_metadata([topic])
        leader = client.leader_for(TopicPartition(topic, partition))
        if leader < 0:
            raise HangingAbortError(f"{topic}-{partition} has no leader (or does not exist)")
        described = await client.send(
            ApiKey.DESCRIBE_PRODUCERS,
            {"topics": [{"name": topic, "partition_indexes": [partition]}]},
            node_id=leader,
        )
        answer = described.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise HangingAbortError(f"DescribeProducers: {ErrorCode(answer.error_code).name}")
        found = [p for p in answer.active_producers if p.current_txn_start_offset == start_offset]
        if not found:
            raise HangingAbortError(
                f"no open transaction starts at offset {start_offset} of {topic}-{partition}"
            )
        producer = found[0]
        written = await client.send(
            ApiKey.WRITE_TXN_MARKERS,
            {
                "markers": [
                    {
                        "producer_id": producer.producer_id,
                        "producer_epoch": producer.producer_epoch,
                        "transaction_result": False,
                        "coordinator_epoch": producer.coordinator_epoch,
                        "topics": [{"name": topic, "partition_indexes": [partition]}],
                    }
                ]
            },
            node_id=leader,
        )
        error = written.markers[0].topics[0].partitions[0].error_code
        if error != ErrorCode.NONE:
            raise HangingAbortError(f"WriteTxnMarkers: {ErrorCode(error).name}")
        return producer.producer_id
    finally:
        await client.close()
