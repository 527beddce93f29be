"""The `kafkalite` command line (typer + rich).

    kafkalite serve [--config server.properties] [--override key=value]...
    kafkalite topics create NAME [--partitions N] [--replication-factor R] [--config k=v]...
    kafkalite topics list | describe [NAME] | delete NAME
    kafkalite topics alter NAME [--partitions N] [--config k=v]... [--delete-config k]...
    kafkalite produce TOPIC [--partition P] [--key-separator SEP] [--acks A]   (lines on stdin)
    kafkalite consume TOPIC [--partition P] [--from-beginning | --offset N] [--max-messages N]
    kafkalite storage verify PATH   (offline check of segments and indexes, kafkalite/admin/storage_cli.py)

The tools speak the Kafka protocol to any broker (`--bootstrap-server`, default
127.0.0.1:9092) through the project's async client (kafkalite/client/). Exit status: 0 on
success, 1 when the broker answered an error (printed with Kafka's error name), 2 on usage or
configuration errors (the message names the bad key).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kafkalite.admin.cli import cluster_app, groups_app
from kafkalite.admin.storage_cli import storage_app
from kafkalite.config import BrokerConfig, ConfigError

app = typer.Typer(
    help="kafkalite: a Kafka broker in Python", no_args_is_help=True, add_completion=False
)
topics_app = typer.Typer(
    help="Create, list, describe, alter and delete topics", no_args_is_help=True
)
app.add_typer(topics_app, name="topics")
app.add_typer(cluster_app, name="cluster")
app.add_typer(groups_app, name="groups")
app.add_typer(storage_app, name="storage")

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

BOOTSTRAP_OPTION = typer.Option(
    "127.0.0.1:9092", "--bootstrap-server", "-b", help="host:port[,host:port...] of any broker"
)


def error_name(code: int) -> str:
    from kafkalite.protocol.errors import ErrorCode

    return ErrorCode.of(int(code)).name


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def parse_pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{what} expects key=value, got {item!r}", 2)
        out[key.strip()] = value.strip()
    return out


def run(coro: Any) -> Any:
    """Run a command's coroutine; what goes wrong is a one-line error, never a traceback."""
    from kafkalite.client.errors import KafkaConnectionError
    from kafkalite.protocol.errors import KafkaError

    try:
        return asyncio.run(coro)
    except KafkaConnectionError as e:
        fail(f"cannot reach the broker: {e}")
    except OSError as e:
        fail(f"cannot reach the broker: {e}")
    except KafkaError as e:  # an answer the command cannot use (unsupported version, ...)
        fail(str(e))
    except ValueError as e:  # a bad argument found on the way (--bootstrap-server, ...)
        fail(str(e), 2)


async def _client(bootstrap: str) -> Any:
    from kafkalite.client.client import KafkaClient

    client = KafkaClient(bootstrap, client_id="kafkalite-cli")
    await client.start()
    return client


# ---------------------------------------------------------------------- serve


@app.command()
def serve(
    config: str = typer.Option(None, "--config", "-c", help="server.properties file"),
    override: Annotated[list[str] | None, typer.Option(help="key=value (repeatable)")] = None,
) -> None:
    """Run a broker until SIGTERM/SIGINT."""
    from kafkalite.server import serve as serve_broker

    try:
        broker_config = BrokerConfig.load(config, override or [])
    except ConfigError as e:
        fail(str(e), 2)
    raise typer.Exit(serve_broker(broker_config))


# ---------------------------------------------------------------------- topics


@topics_app.command("create")
def topics_create(
    name: str,
    partitions: int = typer.Option(-1, "--partitions", "-p", help="-1: num.partitions"),
    replication_factor: int = typer.Option(-1, "--replication-factor", "-r"),
    config: Annotated[list[str] | None, typer.Option(help="topic config key=value")] = None,
    validate_only: bool = typer.Option(False, "--validate-only"),
    bootstrap: str = BOOTSTRAP_OPTION,
) -> None:
    configs = parse_pairs(config or [], "--config")

    async def go() -> Any:
        client = await _client(bootstrap)
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
        fail(f"{error_name(topic.error_code)}: {topic.error_message or ''}")
    console.print(f"Created topic {name}." if not validate_only else f"Topic {name} is valid.")


@topics_app.command("list")
def topics_list(bootstrap: str = BOOTSTRAP_OPTION) -> None:
    async def go() -> Any:
        client = await _client(bootstrap)
        try:
            return await client.metadata(None)
        finally:
            await client.close()

    for topic in sorted(run(go()).topics, key=lambda t: t.name):
        console.print(topic.name)


@topics_app.command("describe")
def topics_describe(name: str = typer.Argument(None), bootstrap: str = BOOTSTRAP_OPTION) -> None:
    async def go() -> Any:
        client = await _client(bootstrap)
        try:
            return await client.metadata(None if name is None else [name])
        finally:
            await client.close()

    response = run(go())
    table = Table("Topic", "Partition", "Leader", "Epoch", "Replicas", "Isr", "Error")
    failed = False
    for topic in sorted(response.topics, key=lambda t: t.name):
        if int(topic.error_code):
            failed = True
            table.add_row(topic.name, "", "", "", "", "", error_name(topic.error_code))
            continue
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
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
        for topic in response.topics:
            if int(topic.error_code):
                err_console.print(f"[red]error:[/red] {topic.name}: {error_name(topic.error_code)}")
        raise typer.Exit(1)


@topics_app.command("delete")
def topics_delete(name: str, bootstrap: str = BOOTSTRAP_OPTION) -> None:
    async def go() -> Any:
        client = await _client(bootstrap)
        try:
            return await client.delete_topics([name])
        finally:
            await client.close()

    (result,) = run(go()).responses
    if int(result.error_code):
        fail(f"{error_name(result.error_code)}: {getattr(result, 'error_message', '') or ''}")
    console.print(f"Deleted topic {name}.")


@topics_app.command("alter")
def topics_alter(
    name: str,
    partitions: int = typer.Option(None, "--partitions", "-p", help="new partition count"),
    config: Annotated[list[str] | None, typer.Option(help="set topic config key=value")] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option(help="remove a topic config override")
    ] = None,
    bootstrap: str = BOOTSTRAP_OPTION,
) -> None:
    import datetime

    from kafkalite.client.client import CONTROLLER
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    configs = parse_pairs(config or [], "--config")
    delete_config = delete_config or []
    if partitions is None and not configs and not delete_config:
        fail("nothing to alter: give --partitions, --config or --delete-config", 2)

    async def go() -> list[tuple[str, int, str | None]]:
        client = await _client(bootstrap)
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
            fail(f"{what}: {error_name(code)}: {message or ''}")
        console.print(f"Altered {what} of topic {name}.")


# ---------------------------------------------------------------------- produce / consume


@app.command()
def produce(
    topic: str,
    partition: int = typer.Option(0, "--partition", "-p"),
    key_separator: str = typer.Option(
        None, "--key-separator", "-K", help="split each line into key and value"
    ),
    acks: int = typer.Option(-1, "--acks"),
    batch_size: int = typer.Option(500, "--batch-size", help="records per produce request"),
    bootstrap: str = BOOTSTRAP_OPTION,
) -> None:
    """Send each line of stdin as one record."""
    from kafkalite.protocol.records import Record, build_batch
    from kafkalite.protocol.types import TopicPartition

    tp = TopicPartition(topic, partition)

    separator = key_separator.encode() if key_separator is not None else None

    async def send(client: Any, lines: list[bytes]) -> None:
        now = int(time.time() * 1000)
        records = []
        for i, line in enumerate(lines):
            key = None
            value = line
            if separator is not None and separator in line:
                key, _, value = line.partition(separator)
            records.append(Record(i, 0, key, value))
        response = await client.produce(tp, build_batch(records, base_timestamp=now), acks=acks)
        if response is not None:
            part = response.responses[0].partition_responses[0]
            if int(part.error_code):
                fail(f"{error_name(part.error_code)}: {getattr(part, 'error_message', '') or ''}")

    async def go() -> int:
        # stdin is read (as bytes: values pass through undecoded) by a thread, and whatever
        # has arrived is sent at once, up to --batch-size records a request: piped bursts are
        # batched, and a line typed or tailed in is sent without waiting for more.
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()

        def read_stdin() -> None:
            for raw in sys.stdin.buffer:
                loop.call_soon_threadsafe(lines.put_nowait, raw.rstrip(b"\r\n"))
            loop.call_soon_threadsafe(lines.put_nowait, None)

        client = await _client(bootstrap)
        threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
        sent = 0
        try:
            done = False
            while not done:
                line = await lines.get()
                if line is None:
                    break
                batch = [line]
                while len(batch) < batch_size and not lines.empty():
                    more = lines.get_nowait()
                    if more is None:
                        done = True
                        break
                    batch.append(more)
                await send(client, batch)
                sent += len(batch)
        finally:
            await client.close()
        return sent

    sent = run(go())
    err_console.print(f"{sent} records sent to {tp}")


@app.command()
def consume(
    topic: str,
    partition: int = typer.Option(0, "--partition", "-p"),
    from_beginning: bool = typer.Option(False, "--from-beginning"),
    offset: int = typer.Option(None, "--offset", help="start at this offset"),
    max_messages: int = typer.Option(None, "--max-messages", "-n"),
    timeout_ms: int = typer.Option(
        None, "--timeout-ms", help="exit when no record arrives for this long"
    ),
    print_key: bool = typer.Option(False, "--print-key"),
    print_offset: bool = typer.Option(False, "--print-offset"),
    bootstrap: str = BOOTSTRAP_OPTION,
) -> None:
    """Print records of one partition, one per line."""
    from kafkalite.protocol.records import iter_batches
    from kafkalite.protocol.types import TopicPartition

    tp = TopicPartition(topic, partition)

    async def go() -> int:
        client = await _client(bootstrap)
        count = 0
        try:
            if offset is not None:
                position = offset
            else:
                when = -2 if from_beginning else -1
                response = await client.list_offsets(tp, when)
                part = response.topics[0].partitions[0]
                if int(part.error_code):
                    fail(error_name(part.error_code))
                position = part.offset
            last_data = time.monotonic()
            while max_messages is None or count < max_messages:
                response = await client.fetch(tp, position, max_wait_ms=500)
                part = response.responses[0].partitions[0]
                if int(part.error_code):
                    fail(error_name(part.error_code))
                got = False
                for header, records in iter_batches(part.records or b""):
                    for record in records:
                        record_offset = header.base_offset + record.offset_delta
                        if record_offset < position:
                            continue
                        fields = []
                        if print_offset:
                            fields.append(str(record_offset))
                        if print_key:
                            fields.append((record.key or b"").decode(errors="replace"))
                        fields.append((record.value or b"").decode(errors="replace"))
                        sys.stdout.write("\t".join(fields) + "\n")
                        count += 1
                        got = True
                        position = record_offset + 1
                        if max_messages is not None and count >= max_messages:
                            break
                    else:
                        position = max(position, header.next_offset)
                        continue
                    break
                sys.stdout.flush()
                if got:
                    last_data = time.monotonic()
                elif timeout_ms is not None and (time.monotonic() - last_data) * 1000 > timeout_ms:
                    break
        finally:
            await client.close()
        return count

    count = run(go())
    err_console.print(f"{count} records consumed from {tp}")


def main() -> None:
    # kio registers hypothesis strategies for its types whenever hypothesis is importable (a
    # test dependency); building hypothesis' character tables costs seconds per process start
    # (its cache lives in the working directory). The command line never needs it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    app()


if __name__ == "__main__":
    main()
