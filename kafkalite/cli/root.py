"""The `kafkalite` command line (typer + rich).

    kafkalite serve [--config server.properties] [--override key=value]...
    kafkalite topics create NAME [--partitions N] [--replication-factor R] [--config k=v]...
    kafkalite topics list | describe [NAME] | delete NAME
    kafkalite topics alter NAME [--partitions N] [--config k=v]... [--delete-config k]...
    kafkalite produce TOPIC [--partition P] [--key-separator SEP] [--acks A]   (lines on stdin)
    kafkalite consume TOPIC [--partition P] [--from-beginning | --offset N] [--group G]
              [--max-messages N] [--timeout-ms MS]
    kafkalite --version
    kafkalite storage verify PATH   (offline check of segments and indexes, kafkalite/admin/storage_cli.py)
    kafkalite users add|list|remove, acls add|list|remove, quotas set|list   (admin/security_cli.py)
    kafkalite --command-config client.properties ...   (TLS / SASL settings of every connection)

The tools speak the Kafka protocol to any broker (`--bootstrap-server`, default
127.0.0.1:9092) through the project's async client (kafkalite/client/); the console producer
and consumer are in kafkalite/admin/console_*.py. Exit status: 0 on success, 1 when the broker
answered an error (printed with Kafka's error name) or the command cannot do what was asked (a
missing topic or partition, said so), 2 on usage or configuration errors (the message names the
bad option or key). Anything else is a bug: one line with the path of a report file holding the
traceback, exit 1 (see main).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kafkalite.cli.cluster import cluster_app, groups_app, transactions_app
from kafkalite.cli.security import acls_app, apply_command_config, quotas_app, users_app
from kafkalite.cli.storage import storage_app
from kafkalite.config import BrokerConfig, ConfigError

app = typer.Typer(
    help="kafkalite: a Kafka broker in Python",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def show_version(value: bool) -> None:
    if value:
        from kafkalite import __version__

        typer.echo(f"kafkalite {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=show_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
    command_config: Annotated[
        str | None,
        typer.Option(
            "--command-config",
            help="client.properties (security.protocol, ssl.*, sasl.*) for every connection",
        ),
    ] = None,
) -> None:
    """kafkalite: a Kafka broker in Python, and the tools to operate it."""
    apply_command_config(command_config)


topics_app = typer.Typer(
    help="Create, list, describe, alter and delete topics", no_args_is_help=True
)
app.add_typer(topics_app, name="topics")
app.add_typer(cluster_app, name="cluster")
app.add_typer(groups_app, name="groups")
app.add_typer(transactions_app, name="transactions")
app.add_typer(storage_app, name="storage")
app.add_typer(users_app, name="users")
app.add_typer(acls_app, name="acls")
app.add_typer(quotas_app, name="quotas")

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def checked_bootstrap(value: str) -> str:
    """``--bootstrap-server`` as host:port[,host:port...]; a bad entry is a usage error naming
    the option and the entry (int() said "invalid literal for int() with base 10")."""
    entries = [e.strip() for e in value.split(",")]
    if not any(entries):
        fail("--bootstrap-server: no address given (expected host:port[,host:port...])", 2)
    for entry in entries:
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else "9092"
        elif entry.count(":") == 1:
            host, port = entry.split(":")
        else:
            host, port = entry, "9092"
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            fail(
                f"--bootstrap-server: {entry!r} is not host:port "
                f"(the port must be a number from 1 to 65535)",
                2,
            )
    return value


BOOTSTRAP_OPTION = typer.Option(
    "127.0.0.1:9092",
    "--bootstrap-server",
    "-b",
    help="host:port[,host:port...] of any broker",
    callback=checked_bootstrap,
)


def error_name(code: int) -> str:
    from kafkalite.protocol.errors import ErrorCode

    return ErrorCode.of(int(code)).name


def error_text(code: int, message: str | None, topic: str | None = None) -> str:
    """Kafka's error name and the broker's message, else one that says what happened."""
    from kafkalite.protocol.errors import ErrorCode

    error = ErrorCode.of(int(code))
    if not message and topic is not None and error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        message = f"topic {topic!r} does not exist"
    return f"{error.name}: {message or error.message}"


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
    from kafkalite.cli.console_producer import TopicProblem
    from kafkalite.client.errors import KafkaConnectionError
    from kafkalite.protocol.errors import KafkaError

    try:
        return asyncio.run(coro)
    except BrokenPipeError:  # stdout, not the broker: see main
        raise
    except (KafkaConnectionError, ConnectionError, socket.gaierror) as e:
        fail(f"cannot reach the broker: {e}")
    except TopicProblem as e:  # a missing topic or partition, an illegal name...
        fail(str(e))
    except KafkaError as e:  # an answer the command cannot use (unsupported version, ...)
        fail(str(e))


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
    raise typer.Exit(serve_broker(broker_config, exit_when_stopped=True))


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
    """Create a topic (CreateTopics on the controller)."""
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
        fail(error_text(topic.error_code, topic.error_message, name))
    console.print(f"Created topic {name}." if not validate_only else f"Topic {name} is valid.")


@topics_app.command("list")
def topics_list(bootstrap: str = BOOTSTRAP_OPTION) -> None:
    """List the topics' names."""

    async def go() -> Any:
        client = await _client(bootstrap)
        try:
            return await client.metadata(None)
        finally:
            await client.close()

    for topic in sorted(run(go()).topics, key=lambda t: t.name):
        console.print(topic.name)


@topics_app.command("describe")
def topics_describe(
    name: str = typer.Argument(None, help="a topic (default: every topic)"),
    bootstrap: str = BOOTSTRAP_OPTION,
) -> None:
    """Partitions (leader, epoch, replicas, ISR) and config overrides of topics."""
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    async def go() -> tuple[Any, dict[str, dict[str, str]]]:
        client = await _client(bootstrap)
        try:
            metadata = await client.metadata(None if name is None else [name])
            names = [t.name for t in metadata.topics if not int(t.error_code)]
            configs: dict[str, dict[str, str]] = {}
            if names:
                response = await client.send(
                    ApiKey.DESCRIBE_CONFIGS,
                    request_builder(
                        ApiKey.DESCRIBE_CONFIGS,
                        resources=[
                            {"resource_type": 2, "resource_name": n, "configuration_keys": None}
                            for n in names
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
    table = Table("Topic", "Partition", "Leader", "Epoch", "Replicas", "Isr", "Error")
    failed = False
    for topic in sorted(response.topics, key=lambda t: t.name):
        if int(topic.error_code):
            failed = True
            table.add_row(topic.name, "", "", "", "", "", error_name(topic.error_code))
            continue
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        overrides = configs.get(topic.name, {})
        replication = len(partitions[0].replica_nodes) if partitions else 0
        console.print(
            f"Topic: {topic.name}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {replication}\t"
            f"Configs: {','.join(f'{k}={v}' for k, v in sorted(overrides.items()))}",
            highlight=False,
            markup=False,
            soft_wrap=True,
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
        for topic in response.topics:
            if int(topic.error_code):
                err_console.print(f"[red]error:[/red] {topic.name}: {error_name(topic.error_code)}")
        raise typer.Exit(1)


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
def topics_delete(name: str, bootstrap: str = BOOTSTRAP_OPTION) -> None:
    """Delete a topic (DeleteTopics on the controller)."""

    async def go() -> Any:
        client = await _client(bootstrap)
        try:
            return await client.delete_topics([name])
        finally:
            await client.close()

    (result,) = run(go()).responses
    if int(result.error_code):
        fail(error_text(result.error_code, getattr(result, "error_message", None), name))
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
    """Add partitions, set or remove topic config overrides."""
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
            fail(f"{what}: {error_text(code, message, name)}")
        console.print(f"Altered {what} of topic {name}.")


# ---------------------------------------------------------------------- produce / consume


@app.command()
def produce(
    topic: str,
    partition: int = typer.Option(
        None, "--partition", "-p", help="send every record here (default: Kafka's partitioner)"
    ),
    key_separator: str = typer.Option(
        None, "--key-separator", "-K", help="split each line into key and value"
    ),
    acks: int = typer.Option(-1, "--acks", help="-1 (all), 0 or 1"),
    batch_size: int = typer.Option(500, "--batch-size", help="records per produce request"),
    bootstrap: str = BOOTSTRAP_OPTION,
) -> None:
    """Send each line of stdin as one record.

    Keyed records go to Kafka's murmur2 partition of their key (the partition Kafka's and
    librdkafka's default partitioners choose); unkeyed ones fill one partition per batch in
    turn. A missing topic is created if the broker creates topics on first use."""
    from kafkalite.cli.console_producer import ConsoleProducer, partitions_of

    separator = key_separator.encode() if key_separator is not None else None

    def record(line: bytes) -> tuple[bytes | None, bytes]:
        if separator is not None and separator in line:
            key, _, value = line.partition(separator)
            return key, value
        return None, line

    async def go() -> ConsoleProducer:
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
        try:
            count = await partitions_of(client, topic, create=True)
            producer = ConsoleProducer(client, topic, count, partition=partition, acks=acks)
            threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
            done = False
            while not done:
                line = await lines.get()
                if line is None:
                    break
                batch = [record(line)]
                while len(batch) < batch_size and not lines.empty():
                    more = lines.get_nowait()
                    if more is None:
                        done = True
                        break
                    batch.append(record(more))
                await producer.send(batch)
        finally:
            await client.close()
        return producer

    producer = run(go())
    sent = sum(producer.sent_per_partition.values())
    where = ", ".join(f"{topic}-{p}: {n}" for p, n in sorted(producer.sent_per_partition.items()))
    err_console.print(f"{sent} records sent" + (f" ({where})" if where else ""), highlight=False)


@app.command()
def consume(
    topic: str,
    partition: int = typer.Option(
        None, "--partition", "-p", help="read only this partition (default: every partition)"
    ),
    from_beginning: bool = typer.Option(
        False, "--from-beginning", help="start at the log start (default: at the end)"
    ),
    offset: int = typer.Option(None, "--offset", help="start at this offset (needs --partition)"),
    group: str = typer.Option(
        None, "--group", "-g", help="join this consumer group and commit offsets"
    ),
    max_messages: int = typer.Option(
        None, "--max-messages", "-n", help="exit after this many records"
    ),
    timeout_ms: int = typer.Option(
        None, "--timeout-ms", help="exit when no record arrives for this long"
    ),
    print_key: bool = typer.Option(False, "--print-key", help="print KEY<TAB>VALUE"),
    print_offset: bool = typer.Option(False, "--print-offset", help="print the offset first"),
    print_partition: bool = typer.Option(
        False, "--print-partition", help="print the partition first"
    ),
    bootstrap: str = BOOTSTRAP_OPTION,
) -> None:
    """Print the records of a topic, one per line.

    Every partition is read unless --partition names one. With --group the tool joins that
    consumer group: it starts at the group's committed offsets and commits what it printed."""
    from kafkalite.cli.console_consumer import ConsoleConsumer, ConsumedRecord, ConsumeOptions

    if offset is not None and partition is None:
        fail("--offset needs --partition (offsets are per partition)", 2)
    if offset is not None and group is not None:
        fail("--offset and --group exclude each other: a group starts at its committed offsets", 2)

    def emit(record: ConsumedRecord) -> None:
        fields = []
        if print_partition:
            fields.append(str(record.partition))
        if print_offset:
            fields.append(str(record.offset))
        if print_key:
            fields.append((record.key or b"").decode(errors="replace"))
        fields.append((record.value or b"").decode(errors="replace"))
        sys.stdout.write("\t".join(fields) + "\n")
        sys.stdout.flush()

    options = ConsumeOptions(
        partition=partition,
        from_beginning=from_beginning,
        offset=offset,
        group=group,
        max_messages=max_messages,
        timeout_ms=timeout_ms,
    )

    async def go() -> int:
        client = await _client(bootstrap)
        try:
            return await ConsoleConsumer(client, topic, options, emit).run()
        finally:
            await client.close()

    count = run(go())
    where = f"{topic}-{partition}" if partition is not None else topic
    err_console.print(f"{count} records consumed from {where}", highlight=False)


def write_error_report() -> str:
    """The current exception's traceback, with the command and versions, in a new file; its
    path."""
    import platform
    import tempfile
    import traceback

    from kafkalite import __version__

    fd, path = tempfile.mkstemp(prefix="kafkalite-error-", suffix=".txt")
    with open(fd, "w", encoding="utf-8") as report:
        report.write(f"command: {' '.join(sys.argv)}\n")
        report.write(f"kafkalite {__version__}, Python {platform.python_version()}\n\n")
        report.write(traceback.format_exc())
    return path


def main() -> None:
    """The command line's entry point. The rule: a command explains what it can in one line
    (exit 1 or 2); anything else is a bug, reported in one line with the path of a file holding
    the full traceback (exit 1), never a traceback on the terminal."""
    # kio registers hypothesis strategies for its types whenever hypothesis is importable (a
    # test dependency); building hypothesis' character tables costs seconds per process start
    # (its cache lives in the working directory). The command line never needs it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    try:
        app()
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:  # `kafkalite consume ... | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except Exception as e:
        try:
            where = f"full report in {write_error_report()}"
        except OSError as report_error:
            where = f"no report written: {report_error}"
        err_console.print(
            f"[red]error:[/red] unexpected {type(e).__name__}: {e} ({where})",
            markup=True,
            highlight=False,
        )
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
